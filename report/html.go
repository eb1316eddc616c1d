package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

//go:embed html.tmpl
var htmlSource string

// htmlTmpl renders the page. Only html/template writes markup: every log-derived string
// (routes, request keys, hosts) reaches the page as a text node or a <title>, escaped by
// the template; the charts' geometry is numbers computed here.
var htmlTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct":          pct,
	"ratio":        ratio,
	"clean":        Shown,
	"verdictClass": verdictClass,
	"num":          func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"meaning":      func(kind string) string { return findingText[kind] },
	"clock":        func(t time.Time, loc *time.Location) string { return t.In(loc).Format("15:04:05") },
}).Parse(htmlSource))

// chartClock is how the timeline shows a time: with seconds when its buckets are shorter
// than a minute.
func chartClock(width time.Duration) string {
	if width > 0 && width%time.Minute != 0 {
		return "15:04:05"
	}
	return "15:04"
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 960.0, 300.0 // the timeline
	padL, padR, padT, padB = 56.0, 56.0, 16.0, 36.0
	timeTicks              = 6
	barW, barH             = 460.0, 220.0 // attempts per logical request
	barPadL, barPadT       = 48.0, 20.0
	barPadB                = 40.0
	gapW, gapH             = 460.0, 200.0 // one gap histogram
	gapPadL, gapPadT       = 40.0, 20.0
	gapPadB                = 52.0
	maxGapCharts           = 4  // histograms for attempts 1..4
	attemptBarsShown       = 10 // the tenth bar is "10+"
	incidentLabelW         = 64 // the room the label "incident" takes
)

type svgText struct {
	X, Y   float64
	Text   string
	Anchor string // start, middle, end
}

type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
	Label      string // a value printed on top of a bar
}

type svgLine struct{ X1, Y1, X2, Y2 float64 }

type polyline struct {
	Class  string
	Points string
}

// svgPoint is a series' value in a bucket that has no neighbour to draw a line to.
type svgPoint struct {
	X, Y  float64
	Class string
}

// timeline is the chart of amplification (left axis) and retry rate, 5xx and 429 share
// (right axis) per bucket, with alert periods shaded and incident windows marked.
type timeline struct {
	W, H, Left, Right, Top, Bottom float64
	Width                          string // the buckets' width, e.g. "1m"
	Lines                          []polyline
	Points                         []svgPoint // runs of one bucket (a line needs two)
	Dots                           []svgRect  // one invisible hover target per bucket, with its figures
	Alerts, Incidents              []svgRect
	Grid                           []svgLine
	XLabels, LeftLabels, RightLabs []svgText
}

type barChart struct {
	W, H, Bottom float64
	Title        string
	Bars         []svgRect
	Labels       []svgText
	Axis         svgLine
}

type htmlView struct {
	*Report
	Title          string
	Verdict        string
	Logical        int64
	Facts          []fact
	Incidents      []string // before → during → after lines
	Alerts         []string
	Loops          []string
	Backoff        []string
	Notes          []string
	Timeline       *timeline
	Closeup        *timeline // the first incident's minutes, when it is a sliver of Timeline
	Load           *timeline // first attempts, attempts and goodput a second
	Attempts       *barChart
	Gaps           []barChart
	Endpoints      *htmlTable
	EndpointsTitle string
	Windows        htmlTable
	Groups         *htmlTable // --by
	Generated      string
	Loc            *time.Location
}

type fact struct{ Label, Value, Note string }

// htmlTable is a table of the shown columns (header, cells), as the table format has them.
type htmlTable struct {
	Header []string
	Rows   []htmlRow
}

type htmlRow struct {
	All   bool // the whole range's row
	Cells []htmlCell
}

// htmlCell is a cell's text and its class: "text" for a log-derived label, the verdict's
// name for the verdict, which colours it.
type htmlCell struct{ Text, Class string }

// metricRow is a row of an htmlTable.
func metricRow(label, labelClass string, m judge.Metrics) htmlRow {
	var row htmlRow
	for i, c := range cells(label, m) {
		class := ""
		if i == 0 {
			class = labelClass
		} else if shown[i-1].key == verdictKey {
			class = verdictClass(c)
		}
		row.Cells = append(row.Cells, htmlCell{c, class})
	}
	return row
}

// verdictClass is a verdict as one CSS class: "no attempt data" is no-attempt-data.
func verdictClass(v string) string { return strings.ReplaceAll(v, " ", "-") }

// groupTable is an htmlTable of groups; nil for none.
func groupTable(label string, gs []query.Group) *htmlTable {
	if len(gs) == 0 {
		return nil
	}
	t := &htmlTable{Header: header(label)}
	for _, g := range gs {
		t.Rows = append(t.Rows, metricRow(Shown(g.Key), "text", g.Metrics))
	}
	return t
}

// HTML writes the report as one self-contained page: inline CSS and SVG, no script, no
// network (a Content-Security-Policy forbids both), readable when printed.
func HTML(w io.Writer, r *Report) error {
	p := r.parts(Shown) // html/template escapes markup; Shown takes control characters out and cuts long values
	v := htmlView{Report: r, Title: r.title(), Loc: r.loc(), Generated: r.GeneratedAt.UTC().Format(time.RFC3339),
		Incidents: p.incidents, Alerts: p.alerts, Loops: p.loops, Backoff: p.backoff, Notes: p.notes}
	m, l := r.Summary, r.Linking
	v.Verdict = m.Verdict
	v.Logical = l.Strong() + l.Heuristic + l.Inferred
	v.Facts = []fact{
		{"logical requests", strconv.FormatInt(v.Logical, 10), "what the business sent"},
		{"effective success", pct(m.EffectiveSuccess), "logical requests ending 2xx"},
		{"requests", strconv.FormatInt(m.Requests, 10), strings.ToLower(r.carried()[:1]) + r.carried()[1:] + r.unseen()},
		{"actual success", pct(m.ActualSuccess), "attempts answered 2xx"},
		{"amplification", ratio(m.Amplification), "attempts per first attempt"},
		{"extra load", pct(m.ExtraLoad), "attempts that were retries"},
		{"retry rate", pct(m.RetryRate), "first attempts retried"},
		{"retry success", pct(m.RetrySuccessRate), "retries answered 2xx"},
		{"recovered", strconv.FormatInt(m.Recovered, 10), "failed first, then rescued"},
		{"exhausted", strconv.FormatInt(m.Exhausted, 10), "retried and never 2xx"},
	}
	if gatewayRetried(m) {
		v.Facts = append(v.Facts, fact{"upstream load", ratio(m.UpstreamLoad), "tries per logical request, client and gateway"})
	}
	eps, _ := r.retriedEndpoints()
	v.Endpoints = groupTable("endpoint", eps)
	v.EndpointsTitle = "Endpoints with retries, most first" + r.endpointsCut()
	if r.By != "" {
		v.Groups = groupTable(r.By, r.Groups)
	}
	v.Windows.Header = header("window")
	for _, win := range r.Windows {
		v.Windows.Rows = append(v.Windows.Rows, metricRow(win.Start.In(r.loc()).Format("2006-01-02 "+r.clock()), "", win.Metrics))
	}
	all := metricRow("all", "", r.Summary)
	all.All = true
	v.Windows.Rows = append(v.Windows.Rows, all)
	if len(r.Chart) > 0 {
		v.Timeline, v.Load = r.timeline(), r.load()
	}
	if len(r.Closeup) > 1 {
		v.Closeup = r.closeupTimeline()
	}
	if len(r.AttemptCounts) > 0 {
		v.Attempts = attemptBars(r.AttemptCounts)
	}
	for i, g := range r.Gaps {
		if i == maxGapCharts {
			break
		}
		v.Gaps = append(v.Gaps, gapBars(g))
	}
	return htmlTmpl.Execute(w, v)
}

func share(n, of int64) *float64 {
	if of == 0 {
		return nil
	}
	x := float64(n) / float64(of)
	return &x
}

func (r *Report) timeline() *timeline {
	var spans []judge.Span // alerts and incidents may reach past the chart's buckets
	for _, a := range r.Alerts {
		spans = append(spans, judge.Span{Start: a.Start, End: a.End})
	}
	for _, in := range r.Incidents {
		spans = append(spans, judge.Span{Start: in.Start, End: in.End})
	}
	t, x := r.frame(spans)
	// The left axis runs from 1x in four steps of 0.25, 0.5, 1, 2, 5, … : round labels.
	top := 1.0
	for _, w := range r.Chart {
		if w.Amplification != nil {
			top = max(top, *w.Amplification)
		}
	}
	step := 0.25
	for i := 0; 1+4*step < top; i++ {
		step *= []float64{2, 2, 2.5}[i%3]
	}
	maxAmp := 1 + 4*step
	yAmp := func(a float64) float64 { return t.Bottom - (t.Bottom-t.Top)*(a-1)/(maxAmp-1) }
	yPct := func(p float64) float64 { return t.Bottom - (t.Bottom-t.Top)*p }
	for _, a := range r.Alerts {
		t.Alerts = append(t.Alerts, svgRect{X: x(a.Start), Y: t.Top, W: math.Max(x(a.End)-x(a.Start), 1), H: t.Bottom - t.Top,
			Class: "alert-" + a.Severity, Title: fmt.Sprintf("alert %s (%s) %s, peak %s", a.Rule, a.Severity, r.span(a.Start, a.End), alertValue(a))})
	}
	// An incident's label goes at its left edge unless it would run into the one before:
	// the outline and its tooltip still say what it is.
	labelEnd := math.Inf(-1)
	for _, in := range r.Incidents {
		rect := svgRect{X: x(in.Start), Y: t.Top, W: math.Max(x(in.End)-x(in.Start), 1), H: t.Bottom - t.Top,
			Class: "incident", Title: "incident " + r.span(in.Start, in.End)}
		if rect.X >= labelEnd {
			rect.Label, labelEnd = "incident", rect.X+incidentLabelW
		}
		t.Incidents = append(t.Incidents, rect)
	}
	r.series(t, x, "amp", func(m judge.Metrics) *float64 { return m.Amplification }, yAmp)
	r.series(t, x, "retry", func(m judge.Metrics) *float64 { return m.RetryRate }, yPct)
	r.series(t, x, "s5xx", func(m judge.Metrics) *float64 { return share(m.Status5xx.Total(), m.Requests) }, yPct)
	r.series(t, x, "s429", func(m judge.Metrics) *float64 { return share(m.Status429.Total(), m.Requests) }, yPct)
	r.series(t, x, "abandoned", func(m judge.Metrics) *float64 { return share(m.Abandoned.Total(), m.Requests) }, yPct)
	for _, w := range r.Chart {
		x0, x1 := x(w.Start), x(w.Start.Add(r.ChartWidth))
		m := w.Metrics
		t.Dots = append(t.Dots, svgRect{X: x0, Y: t.Top, W: x1 - x0, H: t.Bottom - t.Top, Class: "hover",
			Title: fmt.Sprintf("%s: %s, amplification %s, retry rate %s, 5xx %s, 429 %s, abandoned %s", w.Start.In(r.loc()).Format(chartClock(r.ChartWidth)),
				plural(m.Requests, "request"), ratio(m.Amplification), pct(m.RetryRate), pct(share(m.Status5xx.Total(), m.Requests)),
				pct(share(m.Status429.Total(), m.Requests)), pct(share(m.Abandoned.Total(), m.Requests)))})
	}
	for i := range 5 {
		f := float64(i) / 4
		y := t.Bottom - (t.Bottom-t.Top)*f
		t.Grid = append(t.Grid, svgLine{t.Left, y, t.Right, y})
		t.LeftLabels = append(t.LeftLabels, svgText{X: t.Left - 6, Y: y + 4, Text: fmt.Sprintf("%.2fx", 1+f*(maxAmp-1)), Anchor: "end"})
		t.RightLabs = append(t.RightLabs, svgText{X: t.Right + 6, Y: y + 4, Text: fmt.Sprintf("%.0f%%", f*100), Anchor: "start"})
	}
	return t
}

// closeupTimeline is the timeline of the first incident's minutes (Result.Closeup), with
// that incident and the alerts as far as they reach into them.
func (r *Report) closeupTimeline() *timeline {
	c := *r
	c.Chart, c.ChartWidth = r.Closeup, time.Minute
	lo, hi := r.Closeup[0].Start, r.Closeup[len(r.Closeup)-1].Start.Add(time.Minute)
	c.Incidents = r.Incidents[:1]
	c.Alerts = nil
	for _, a := range r.Alerts {
		if a.Start.Before(hi) && a.End.After(lo) {
			a.Start, a.End = maxTime(a.Start, lo), minTime(a.End, hi)
			c.Alerts = append(c.Alerts, a)
		}
	}
	return c.timeline()
}

// frame is a time chart over the chart's buckets and spans (which may reach past them):
// its geometry, its time labels, and where a time falls on it.
func (r *Report) frame(spans []judge.Span) (*timeline, func(time.Time) float64) {
	t := &timeline{W: chartW, H: chartH, Left: padL, Right: chartW - padR, Top: padT, Bottom: chartH - padB,
		Width: shortDuration(r.ChartWidth)}
	from := r.Chart[0].Start
	to := r.Chart[len(r.Chart)-1].Start.Add(r.ChartWidth)
	for _, s := range spans {
		from, to = minTime(from, s.Start), maxTime(to, s.End)
	}
	span := to.Sub(from).Seconds()
	x := func(at time.Time) float64 { return t.Left + (t.Right-t.Left)*at.Sub(from).Seconds()/span }
	layout := chartClock(r.ChartWidth)
	if to.Sub(from) > 36*time.Hour {
		layout = "01-02 15:04"
	}
	for _, at := range ticks(from, to, r.loc()) {
		t.XLabels = append(t.XLabels, svgText{X: x(at), Y: t.Bottom + 18, Text: at.In(r.loc()).Format(layout), Anchor: "middle"})
	}
	return t, x
}

// tickSteps are the distances between time labels a chart may take: round on a clock.
var tickSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// ticks are the times in [from, to] at the smallest round step that gives at most
// timeTicks+1 of them, on the clock of loc (10:00, 10:15, 10:30, …), so that the labels
// are evenly spaced and read as a clock does.
func ticks(from, to time.Time, loc *time.Location) []time.Time {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if to.Sub(from)/s <= timeTicks {
			step = s
			break
		}
	}
	for to.Sub(from)/step > timeTicks { // longer than days: whole days
		step *= 2
	}
	// the first multiple of step at or after from, counted from loc's midnight
	l := from.In(loc)
	midnight := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
	at := midnight.Add((from.Sub(midnight) + step - 1) / step * step)
	var out []time.Time
	for ; !at.After(to); at = at.Add(step) {
		out = append(out, at)
	}
	return out
}

// series draws one polyline of t per run of the chart's buckets that have a value; a gap
// in the data (no traffic, or no value) breaks the line.
func (r *Report) series(t *timeline, x func(time.Time) float64, class string, val func(judge.Metrics) *float64, y func(float64) float64) {
	var pts []byte
	var n int
	var last svgPoint
	var prev time.Time
	flush := func() {
		switch {
		case n == 1:
			t.Points = append(t.Points, last)
		case n > 1:
			t.Lines = append(t.Lines, polyline{Class: class, Points: string(pts)})
		}
		pts, n = nil, 0
	}
	for _, w := range r.Chart {
		v := val(w.Metrics)
		if v == nil || (!prev.IsZero() && !w.Start.Equal(prev.Add(r.ChartWidth))) {
			flush()
		}
		if v == nil {
			continue
		}
		prev = w.Start
		last = svgPoint{X: x(w.Start.Add(r.ChartWidth / 2)), Y: y(*v), Class: class}
		pts = fmt.Appendf(pts, "%.1f,%.1f ", last.X, last.Y)
		n++
	}
	flush()
}

// load is the chart of what the service was asked and what it delivered, a second: first
// attempts, attempts (tagged lines) and goodput (attempts answered 2xx), with the
// stretches of retry-sustained overload shaded: where the retries, not the clients, kept
// it down.
func (r *Report) load() *timeline {
	var spans []judge.Span
	for _, s := range r.Sustained {
		spans = append(spans, judge.Span{Start: s.Start, End: s.End})
	}
	t, x := r.frame(spans)
	per := r.ChartWidth.Seconds()
	top := 1.0
	for _, w := range r.Chart {
		top = max(top, float64(w.FirstAttempts+w.Retries)/per)
	}
	step := 0.25 // the axis in four steps of 0.25, 0.5, 1, 2.5, 5, 10, …
	for i := 0; 4*step < top; i++ {
		step *= []float64{2, 2, 2.5}[i%3]
	}
	y := func(v float64) float64 { return t.Bottom - (t.Bottom-t.Top)*v/(4*step) }
	for _, s := range r.Sustained {
		t.Alerts = append(t.Alerts, svgRect{X: x(s.Start), Y: t.Top, W: math.Max(x(s.End)-x(s.Start), 1), H: t.Bottom - t.Top, Class: "sustained",
			Title: fmt.Sprintf("retry-sustained overload %s: shedding the retries would take %.3g attempts/s off", r.span(s.Start, s.End), s.Shed)})
	}
	perSecond := func(n float64) *float64 { v := n / per; return &v }
	r.series(t, x, "first", func(m judge.Metrics) *float64 { return perSecond(float64(m.FirstAttempts)) }, y)
	r.series(t, x, "attempts", func(m judge.Metrics) *float64 { return perSecond(float64(m.FirstAttempts + m.Retries)) }, y)
	r.series(t, x, "goodput", func(m judge.Metrics) *float64 {
		if m.ActualSuccess == nil {
			return perSecond(0)
		}
		return perSecond(math.Round(*m.ActualSuccess * float64(m.FirstAttempts+m.Retries)))
	}, y)
	for i := range 5 {
		v := float64(i) * step
		yy := y(v)
		t.Grid = append(t.Grid, svgLine{t.Left, yy, t.Right, yy})
		label := fmt.Sprintf("%.0f/s", v)
		if v < 10 {
			label = fmt.Sprintf("%.3g/s", v)
		}
		t.LeftLabels = append(t.LeftLabels, svgText{X: t.Left - 6, Y: yy + 4, Text: label, Anchor: "end"})
	}
	return t
}

// attemptBars is the chart of logical requests per number of attempts.
func attemptBars(cs []query.AttemptCount) *barChart {
	folded := len(cs) > attemptBarsShown
	if folded { // a long tail folds into the last bar
		tail := cs[attemptBarsShown-1]
		for _, c := range cs[attemptBarsShown:] {
			tail.Requests += c.Requests
		}
		cs = append(append([]query.AttemptCount(nil), cs[:attemptBarsShown-1]...), tail)
	}
	var total, most int64
	for _, c := range cs {
		total += c.Requests
		most = max(most, c.Requests)
	}
	b := &barChart{W: barW, H: barH, Bottom: barH - barPadB}
	b.Axis = svgLine{barPadL, b.Bottom, barW - 8, b.Bottom}
	slot := (barW - barPadL - 8) / float64(len(cs))
	for i, c := range cs {
		h := (b.Bottom - barPadT) * float64(c.Requests) / float64(most)
		x := barPadL + slot*float64(i) + slot*0.15
		label := strconv.Itoa(c.Attempts)
		if folded && i == len(cs)-1 {
			label += "+"
		}
		attempts := "attempts"
		if label == "1" {
			attempts = "attempt"
		}
		b.Bars = append(b.Bars, svgRect{X: x, Y: b.Bottom - h, W: slot * 0.7, H: h, Class: "bar",
			Title: fmt.Sprintf("%s with %s %s (%.1f%%)", plural(c.Requests, "logical request"), label, attempts, 100*float64(c.Requests)/float64(total)),
			Label: strconv.FormatInt(c.Requests, 10)})
		b.Labels = append(b.Labels, svgText{X: x + slot*0.35, Y: b.Bottom + 16, Text: label, Anchor: "middle"})
	}
	b.Labels = append(b.Labels, svgText{X: barPadL + (barW-barPadL)/2, Y: b.Bottom + 34, Text: "attempts per logical request", Anchor: "middle"})
	return b
}

// gapLabels name the buckets of query.GapEdges.
// by where each starts (ms unless marked s).
var gapLabels = func() []string {
	e := query.GapEdges
	out := []string{"<" + shortMS(e[0])}
	for i := 1; i < len(e); i++ {
		out = append(out, shortMS(e[i-1]))
	}
	return append(out, "≥"+shortMS(e[len(e)-1]))
}()

func shortMS(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(ms, 'f', -1, 64)
}

// gapBars is the histogram of the gaps before one attempt number.
func gapBars(g query.GapHistogram) barChart {
	var most, total int64
	for _, n := range g.Counts {
		most = max(most, n)
		total += n
	}
	b := barChart{W: gapW, H: gapH, Bottom: gapH - gapPadB,
		Title: fmt.Sprintf("before retry %d (logged attempt %d): %s", g.Attempt, g.Attempt, plural(total, "gap"))}
	b.Axis = svgLine{gapPadL, b.Bottom, gapW - 4, b.Bottom}
	slot := (gapW - gapPadL - 4) / float64(len(g.Counts))
	for i, n := range g.Counts {
		x := gapPadL + slot*float64(i)
		h := 0.0
		if most > 0 {
			h = (b.Bottom - gapPadT) * float64(n) / float64(most)
		}
		label := ""
		if n > 0 {
			label = strconv.FormatInt(n, 10)
		}
		b.Bars = append(b.Bars, svgRect{X: x + slot*0.1, Y: b.Bottom - h, W: slot * 0.8, H: h, Class: "bar gap",
			Title: fmt.Sprintf("%s in bucket %s", plural(n, "gap"), gapLabels[i]), Label: label})
		b.Labels = append(b.Labels, svgText{X: x + slot/2, Y: b.Bottom + 14, Text: gapLabels[i], Anchor: "middle"})
	}
	b.Labels = append(b.Labels, svgText{X: gapPadL + (gapW-gapPadL)/2, Y: b.Bottom + 34, Text: "wait after the previous attempt ended, ms (bucket start)", Anchor: "middle"})
	return b
}

func shortDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
