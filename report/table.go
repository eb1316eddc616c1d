package report

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

func (r *Report) rows() [][]string {
	layout := "2006-01-02 " + r.clock()
	rows := make([][]string, 0, len(r.Windows))
	for _, w := range r.Windows {
		rows = append(rows, r.colored(cells(w.Start.In(r.loc()).Format(layout), w.Metrics)))
	}
	return rows
}

// colored paints the verdict cell (the last) when the report is for a colour terminal.
func (r *Report) colored(c []string) []string {
	if !r.Color {
		return c
	}
	switch v := c[len(c)-1]; v {
	case judge.Fuelling:
		c[len(c)-1] = "\x1b[1;31m" + v + "\x1b[0m"
	case judge.Rescuing:
		c[len(c)-1] = "\x1b[32m" + v + "\x1b[0m"
	}
	return c
}

func (r *Report) title() string {
	if r.From.IsZero() {
		return "retrylens report: no requests in range"
	}
	zone := r.loc().String()
	what := ""
	if r.Endpoint != "" {
		what = " for " + r.Endpoint
	}
	// The range the windows cover, half-open like every range shown; without a width,
	// the first and last request.
	if n := len(r.Windows); n > 0 && r.Width > 0 {
		return fmt.Sprintf("retrylens report%s, %s windows, %s (%s)", what, r.Window,
			r.span(r.Windows[0].Start, r.Windows[n-1].Start.Add(r.Width)), zone)
	}
	return fmt.Sprintf("retrylens report%s, %s windows, first request %s, last %s (%s)", what, r.Window,
		r.From.In(r.loc()).Format("2006-01-02 15:04:05"), r.To.In(r.loc()).Format("2006-01-02 15:04:05"), zone)
}

// clock is how times are shown: to the minute, or to the second for sub-minute windows.
func (r *Report) clock() string {
	if r.Width > 0 && r.Width%time.Minute != 0 {
		return "15:04:05"
	}
	return "15:04"
}

// span shows [from, to) with its end's date only when it differs: every range shown
// (the report's, alerts', incidents') is half-open, and says so.
func (r *Report) span(from, to time.Time) string {
	from, to = from.In(r.loc()), to.In(r.loc())
	end := to.Format(r.clock())
	if from.YearDay() != to.YearDay() || from.Year() != to.Year() {
		end = to.Format("2006-01-02 " + r.clock())
	}
	return "[" + from.Format("2006-01-02 "+r.clock()) + ", " + end + ")"
}

func newTable(w io.Writer, opts ...tablewriter.Option) *tablewriter.Table {
	base := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off), // keep header text as written: stable goldens
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight, PerColumn: columnAlign}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	}
	return tablewriter.NewTable(w, append(base, opts...)...)
}

// Table writes the report for a terminal, in the order a postmortem reads: the summary
// and verdict, incident windows, the timeline (one row per window, the whole range last)
// and its alerts, the endpoints with retries, the --by table, 429 loops, findings, the
// backoff profile, notes. A section with nothing to say is left out.
func Table(w io.Writer, r *Report) error {
	p := r.parts(Shown)
	var err error
	line := func(s string) {
		if err == nil {
			_, err = fmt.Fprintln(w, s)
		}
	}
	lines := func(ls []string) {
		for _, s := range ls {
			line(s)
		}
	}
	line(r.title())
	lines(p.summary)
	lines(p.incidents)
	if err != nil {
		return err
	}
	if err := r.fit(w, "window", append(r.rows(), r.colored(cells("all", r.Summary)))); err != nil {
		return err
	}
	lines(p.alerts)
	if eps, _ := r.retriedEndpoints(); len(eps) > 0 && r.By != "route" {
		line("endpoints with retries, most first" + r.endpointsCut() + ":")
		if err != nil {
			return err
		}
		if err := r.fit(w, "endpoint", groupRows(eps, Shown)); err != nil {
			return err
		}
	}
	if r.By != "" {
		line("by " + r.By + ":")
		if err != nil {
			return err
		}
		if err := r.fit(w, r.By, groupRows(r.Groups, Shown)); err != nil {
			return err
		}
	}
	lines(p.loops)
	lines(p.findings)
	lines(p.backoff)
	lines(p.notes)
	return err
}

// retriedEndpoints are the endpoints whose retries added the most load, at most r.Top
// (see Report.Top), and how many endpoints had retries in all (with those the postmortem
// left out: Result.MoreEndpoints).
func (r *Report) retriedEndpoints() (shown []query.Group, all int) {
	all = r.MoreEndpoints
	top := r.Top
	if top == 0 {
		top = 10
	}
	for _, g := range r.Endpoints {
		if g.Retries == 0 {
			continue
		}
		all++
		if top < 0 || len(shown) < top {
			shown = append(shown, g)
		}
	}
	return shown, all
}

// endpointsCut is what the endpoints table's heading adds when the table is cut.
func (r *Report) endpointsCut() string {
	shown, all := r.retriedEndpoints()
	if len(shown) == all {
		return ""
	}
	return fmt.Sprintf(" (%d of %d shown; --top 0 for all)", len(shown), all)
}

// shownRunes is how much of one log-derived value (a route, a request key, an example)
// the table, Markdown and HTML show: one 100 KB URI made every row of a table 100 KB wide.
const shownRunes = 120

// Shown is Clean, cut to shownRunes with an ellipsis: for the formats people read. JSON,
// CSV and TSV keep values whole.
func Shown(s string) string {
	s = Clean(s)
	if utf8.RuneCountInString(s) <= shownRunes {
		return s
	}
	r := []rune(s)
	return string(r[:shownRunes-1]) + "…"
}

// gatewayRetried reports whether the gateway retried upstream too (proxy amplification
// above 1): then the upstream's load across both layers is worth showing.
func gatewayRetried(m judge.Metrics) bool {
	return m.UpstreamLoad != nil && *m.ProxyAmplification > 1
}

// plural is n and the word, with an s unless n is 1: "1 gap", "2 gaps".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// findingText says what each finding kind means, for people.
var findingText = map[string]string{
	"duplicate_write_risk":     "retried POST/PATCH without an idempotency key",
	"retried_idempotent_write": "retried PUT/DELETE without an idempotency key: idempotent only if the server makes it so",
	"possible_duplicate_write": "a write retried after an abandoned attempt (499, 0), without a key: the upstream may have performed both",
	"false_success":            "abandoned write, then a retry that succeeded: it may have happened twice",
	"non_retryable_retry":      "retried after 400/401/403/404/422",
	"over_cap":                 "attempts beyond the policy cap",
	"synchronised":             "retries in lockstep, within 3 ms of the same gap: no jitter",
	"reused_key":               "a request key sent on more than one request: linked by client, method and URI instead",
	"attempt_number_mismatch":  "attempt numbers that repeat (a stuck header): counted by their place in the request",
}

// parts are the report's sections besides its tables, in the order a postmortem reads
// them.
type parts struct {
	summary, incidents, alerts, loops, findings, backoff, notes []string
}

// parts renders the sections; esc makes log-derived text (examples, routes) safe for the
// output format.
func (r *Report) parts(esc func(string) string) parts {
	var p parts
	m := r.Summary
	l := r.Linking
	if m.Requests == 0 {
		// a range after (or before) the log: nothing was carried, whatever the headers
		p.summary = append(p.summary, "verdict: nothing to judge: no request in the range (--since and --until are the range; 'retrylens report' without them covers every row).")
		p.notes = r.Health.Warnings(true)
		return p
	}
	p.summary = append(p.summary, fmt.Sprintf("verdict: %s. What the business saw: %d logical requests, effective success %s. %s: %d requests%s, actual success %s, amplification %s, extra load %s.",
		m.Verdict, l.Strong()+l.Heuristic+l.Inferred, pct(m.EffectiveSuccess), r.carried(), m.Requests, r.unseen(), pct(m.ActualSuccess), ratio(m.Amplification), pct(m.ExtraLoad)))
	if gatewayRetried(m) {
		p.summary = append(p.summary, fmt.Sprintf("What the upstream carried: %s tries per logical request (the client's attempts × the gateway's own tries, proxy amplification %s).",
			ratio(m.UpstreamLoad), ratio(m.ProxyAmplification)))
	}
	for _, in := range r.Incidents {
		b, d, a := in.Before, in.During, in.After
		p.incidents = append(p.incidents, fmt.Sprintf("incident %s, before → during → after: amplification %s → %s → %s, retry rate %s → %s → %s, retry success %s → %s → %s, effective success %s → %s → %s",
			r.span(in.Start, in.End),
			ratio(b.Amplification), ratio(d.Amplification), ratio(a.Amplification),
			pct(b.RetryRate), pct(d.RetryRate), pct(a.RetryRate),
			pct(b.RetrySuccessRate), pct(d.RetrySuccessRate), pct(a.RetrySuccessRate),
			pct(b.EffectiveSuccess), pct(d.EffectiveSuccess), pct(a.EffectiveSuccess)))
	}
	for _, a := range r.Alerts {
		p.alerts = append(p.alerts, fmt.Sprintf("alert %s (%s): %s, peak %s", a.Rule, a.Severity, r.span(a.Start, a.End), alertValue(a)))
	}
	lp := r.Loops
	if lp.Loops > 0 || lp.PrematureRetries > 0 || lp.BlindRetries > 0 || lp.UnparsableRetryAfter > 0 {
		line := fmt.Sprintf("429 loops: %d (longest %d), premature retries: %d, blind retries after 429: %d, 429s answering retries: %s",
			lp.Loops, lp.MaxLength, lp.PrematureRetries, lp.BlindRetries, pct(lp.Retry429Share))
		if lp.UnparsableRetryAfter > 0 {
			line += fmt.Sprintf(", retries after a Retry-After neither seconds nor an HTTP-date: %d", lp.UnparsableRetryAfter)
		}
		if len(lp.Worst) > 0 {
			worst := make([]string, len(lp.Worst))
			for i, w := range lp.Worst {
				worst[i] = fmt.Sprintf("%s on %s at %s (%d)", esc(w.Request), esc(w.Route), w.Start.In(r.loc()).Format("15:04:05"), w.Length)
			}
			line += "; longest: " + strings.Join(worst, ", ")
		}
		p.loops = append(p.loops, line)
	}
	for _, f := range r.Findings {
		ex := make([]string, len(f.Examples))
		for i, e := range f.Examples {
			ex[i] = esc(e)
		}
		p.findings = append(p.findings, fmt.Sprintf("finding %s: %s, %s (%s), e.g. %s",
			f.Kind, plural(f.Count, "request"), plural(f.Attempts, "attempt"), findingText[f.Kind], strings.Join(ex, ", ")))
	}
	for _, n := range r.NotJudged {
		p.findings = append(p.findings, notJudgedLine(n))
	}
	for _, s := range r.Sustained {
		p.incidents = append(p.incidents, fmt.Sprintf("retry-sustained overload %s–%s (%s): success collapsed while first attempts kept their baseline "+
			"and the service took on more attempts than they bring; shedding the retries (%.3g attempts/s beyond first attempts) would end it",
			s.Start.In(r.loc()).Format(r.clock()), s.End.In(r.loc()).Format(r.clock()), plural(int64(s.Windows), "window"), s.Shed))
	}
	if h := r.Hedging; h.Hedges > 0 || h.Cancelled > 0 {
		line := fmt.Sprintf("hedged: %s (%s sent while another attempt was in flight, %d of them won), %s cancelled because another attempt won",
			plural(h.Requests, "request"), plural(h.Hedges, "attempt"), h.Wins, plural(h.Cancelled, "attempt"))
		if h.P50 != nil {
			line += fmt.Sprintf("; hedge delay p10/p50/p90 %.0f/%.0f/%.0f ms", *h.P10, *h.P50, *h.P90)
		}
		p.backoff = append(p.backoff, line)
	}
	for _, b := range r.Backoff {
		line := fmt.Sprintf("backoff before attempt %d: %s, p10/p50/p90 %.0f/%.0f/%.0f ms, %d within 3 ms of the median",
			b.Attempt, plural(b.Count, "gap"), b.P10, b.P50, b.P90, b.NearMedian)
		if b.Within != nil {
			line += fmt.Sprintf("; policy %.0f–%.0f ms: %d within", b.Min, b.Max, *b.Within)
		}
		if b.BeyondRetry {
			line += "; beyond the policy's retries"
		}
		p.backoff = append(p.backoff, line)
	}
	if l.Strong()+l.Heuristic+l.Inferred > 0 {
		line := fmt.Sprintf("logical requests: %d linked by a key the client sent (idempotency key %d, invocation id %d, request id %d), %d by client, method and URI",
			l.Strong(), l.IdempotencyKey, l.InvocationID, l.RequestID, l.Heuristic)
		if l.Inferred > 0 {
			line += fmt.Sprintf(", %d with inferred attempt numbers", l.Inferred)
		}
		if l.UntaggedFirsts > 0 {
			line += fmt.Sprintf("; %s logged without the attempt header, numbered 0 by their key's retries", plural(l.UntaggedFirsts, "first attempt"))
		}
		if l.After2xx > 0 {
			retries := "retries"
			if l.After2xx == 1 {
				retries = "retry"
			}
			line += fmt.Sprintf("; %d %s linked after an attempt logged 2xx (the client gave up on that answer: a timeout race)", l.After2xx, retries)
		}
		if l.Orphans > 0 {
			retries := "retries"
			if l.Orphans == 1 {
				retries = "retry"
			}
			line += fmt.Sprintf("; %d %s with no earlier attempt to link to", l.Orphans, retries)
		}
		p.notes = append(p.notes, line)
		if share := l.HeuristicShare(); share > 0.1 {
			p.notes = append(p.notes, fmt.Sprintf("warning: %.0f%% of the retries (%d of %d) were linked by client, method and URI, not by a key the client sent: recovered, exhausted and effective success are estimates (send X-Request-Id or Idempotency-Key)",
				100*share, l.HeuristicRetries, l.Retries))
		}
	}
	p.notes = append(p.notes, r.layers()...)
	p.notes = append(p.notes, r.coverage()...)
	p.notes = append(p.notes, r.Health.Warnings(true)...)
	return p
}

// carried is what the requests are: what the gateway carried, unless attempts read from
// traces are among them that no gateway line matched (traces alone, or a client the
// gateway's log does not cover): then what was sent.
func (r *Report) carried() string {
	if r.Layers.Spans > r.Layers.Matched {
		return "What was sent"
	}
	return "What the gateway carried"
}

// unseen says how many of the requests no gateway line saw, where some were not.
func (r *Report) unseen() string {
	if n := r.Layers.Spans - r.Layers.Matched; n > 0 {
		return fmt.Sprintf(" (%d read from traces that no gateway line matched)", n)
	}
	return ""
}

// notJudgedLine is how the text formats say a finding the log could not judge.
func notJudgedLine(n query.NotJudged) string {
	return fmt.Sprintf("not judged %s: %d %s (%s); log %s", n.Kind, n.Count, n.Unit, n.Why, n.Log)
}

// layers are the lines on each retry layer: the logical requests' fates, where a
// gateway's own tries are known (its lines record them, or traces were joined with its
// lines) or a client was denied a retry, and the join's match.
func (r *Report) layers() []string {
	var out []string
	l, f := r.Layers, r.Summary.Fates()
	if (r.Summary.ProxyAmplification != nil || l.Spans > 0 || f.BudgetDenied > 0) && f.Logical > 0 {
		line := fmt.Sprintf("fates of %s: %d first try, %d recovered by the gateway, %d recovered by the client, %d exhausted, ",
			plural(f.Logical, "logical request"), f.FirstTry, f.Gateway, f.Client, f.Exhausted)
		if f.BudgetDenied > 0 {
			line += fmt.Sprintf("%d denied a retry below their client's cap (budget, quota or deadline), ", f.BudgetDenied)
		}
		out = append(out, line+fmt.Sprintf("%d failed without a retry", f.NotRetried))
	}
	if l.Spans > 0 {
		line := fmt.Sprintf("layers: %s from traces, %d matched to the gateway's line of the same attempt by its span (%.1f%%)",
			plural(l.Spans, "client attempt"), l.Matched, 100*float64(l.Matched)/float64(l.Spans))
		if l.UnmatchedLines > 0 {
			line += fmt.Sprintf("; %s logged a span no trace holds", plural(l.UnmatchedLines, "gateway line"))
		}
		out = append(out, line)
	}
	return out
}

// notes are every section's lines, in order, for formats without sections (tsv).
func (r *Report) notes(esc func(string) string) []string {
	p := r.parts(esc)
	var out []string
	for _, s := range [][]string{p.summary, p.incidents, p.alerts, p.loops, p.findings, p.backoff, p.notes} {
		out = append(out, s...)
	}
	return out
}

// coverage warns when lines carry no attempt number (they count as requests but are in
// no ratio, so a log without the header can look quiet when it is not) and when windows
// had too little traffic to judge.
func (r *Report) coverage() []string {
	m := r.Summary
	var notes []string
	switch {
	case m.Requests > 0 && m.FirstAttempts+m.Retries == 0:
		notes = append(notes, fmt.Sprintf("note: none of the %d lines carries an attempt number, so retries cannot be told from first attempts: no attempt data. Log the attempt header (the README's gateway snippets) or try --infer-attempts.", m.Requests))
	case m.Inferred > 0:
		notes = append(notes, fmt.Sprintf("note: %d of %d lines (%.1f%%) carry no attempt header; their attempt numbers are inferred (--infer-attempts).",
			m.Inferred, m.Requests, 100*float64(m.Inferred)/float64(m.Requests)))
	case m.Untagged > 0:
		notes = append(notes, fmt.Sprintf("note: %d of %d lines (%.1f%%) carry no attempt header; they are left out of every ratio.",
			m.Untagged, m.Requests, 100*float64(m.Untagged)/float64(m.Requests)))
	}
	thin := 0
	for _, w := range r.Windows {
		if w.Verdict == judge.Insufficient {
			thin++
		}
	}
	if thin > 0 && m.FirstAttempts+m.Retries > 0 {
		notes = append(notes, fmt.Sprintf("note: %d of %d windows had too little evidence to judge (%s: fewer first attempts than the rules' min_first_attempts, or a threshold crossed without an alert).",
			thin, len(r.Windows), judge.Insufficient))
	}
	return notes
}

// Markdown writes the report as a Markdown document for a postmortem or a PR comment, in
// the order of Table, with a heading per section that has something to say.
func Markdown(w io.Writer, r *Report) error {
	esc := func(s string) string { return markdownEscape(Shown(s)) }
	p := r.parts(esc)
	var b strings.Builder
	flush := func() error {
		_, err := io.WriteString(w, b.String())
		b.Reset()
		return err
	}
	list := func(title string, ls []string) {
		if len(ls) == 0 {
			return
		}
		if title != "" {
			fmt.Fprintf(&b, "### %s\n\n", title)
		}
		for _, l := range ls {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "## %s\n\n", r.title())
	list("", p.summary)
	list("Incident windows", p.incidents)
	b.WriteString("### Timeline\n\n")
	if err := flush(); err != nil {
		return err
	}
	if err := render(newTable(w, tablewriter.WithRenderer(renderer.NewMarkdown())), r); err != nil {
		return err
	}
	b.WriteString("\n")
	list("", p.alerts)
	eps, _ := r.retriedEndpoints()
	tables := []struct {
		title, label string
		gs           []query.Group
	}{{"Endpoints with retries" + r.endpointsCut(), "endpoint", eps}, {"By " + r.By, r.By, r.Groups}}
	for i, t := range tables {
		if len(t.gs) == 0 || (i == 0 && r.By == "route") {
			continue
		}
		fmt.Fprintf(&b, "### %s\n\n", t.title)
		if err := flush(); err != nil {
			return err
		}
		if err := renderGroupTable(newTable(w, tablewriter.WithRenderer(renderer.NewMarkdown())), t.label, t.gs, esc); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	list("429 feedback loops", p.loops)
	list("Findings", p.findings)
	list("Backoff profile", p.backoff)
	list("Notes", p.notes)
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

func render(t *tablewriter.Table, r *Report) error {
	t.Header(header("window"))
	if err := t.Bulk(r.rows()); err != nil {
		return err
	}
	if err := t.Append(r.colored(cells("all", r.Summary))); err != nil {
		return err
	}
	return t.Render()
}

// fit renders a table of the shown columns (after one named label) on w, leaving out
// columns in dropOrder until its widest line fits r.Columns (0: no limit), and then says
// which it left out. A long label (an endpoint) is cut with "…" to a quarter of the
// terminal first, and further if the table still does not fit without every column it
// may leave out.
func (r *Report) fit(w io.Writer, label string, rows [][]string) error {
	hdr := header(label)
	if r.Columns > 0 {
		rows = cutLabels(rows, max(labelFloor, r.Columns/4))
	}
	var drop []int
	for k := 0; ; k++ {
		keep := make([]int, 0, len(hdr))
		for i := range hdr {
			if !slices.Contains(drop, i) {
				keep = append(keep, i)
			}
		}
		pick := func(row []string) []string {
			out := make([]string, len(keep))
			for j, i := range keep {
				out[j] = row[i]
			}
			return out
		}
		align := make([]tw.Align, len(keep))
		for j, i := range keep {
			align[j] = columnAlign[i]
		}
		var buf strings.Builder
		t := newTable(&buf, tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight, PerColumn: align}))
		t.Header(pick(hdr))
		for _, row := range rows {
			if err := t.Append(pick(row)); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		if over := widest(buf.String()) - r.Columns; r.Columns > 0 && over > 0 && k == len(dropOrder) {
			if cut := labelWidth(rows) - over; cut >= labelFloor && labelWidth(rows) > labelFloor {
				rows = cutLabels(rows, cut)
				k-- // the same columns again, with the labels cut
				continue
			}
		}
		if r.Columns <= 0 || widest(buf.String()) <= r.Columns || k == len(dropOrder) {
			if len(drop) > 0 {
				names := make([]string, len(drop))
				for j, i := range drop {
					names[j] = hdr[i]
				}
				fmt.Fprintf(&buf, "(left out to fit %d columns: %s; --wide shows every column)\n", r.Columns, strings.Join(names, ", "))
			}
			_, err := io.WriteString(w, buf.String())
			return err
		}
		drop = append(drop, dropOrder[k])
	}
}

// labelFloor is the fewest runes a table's label column is cut to.
const labelFloor = 16

// cutLabels returns rows whose first cell is at most n runes, cut with "…".
func cutLabels(rows [][]string, n int) [][]string {
	out := make([][]string, len(rows))
	for i, row := range rows {
		out[i] = row
		if l := []rune(ansi.ReplaceAllString(row[0], "")); len(l) > n {
			out[i] = append([]string{string(l[:n-1]) + "…"}, row[1:]...)
		}
	}
	return out
}

// labelWidth is the widest first cell of rows, in runes.
func labelWidth(rows [][]string) int {
	n := 0
	for _, row := range rows {
		n = max(n, utf8.RuneCountInString(ansi.ReplaceAllString(row[0], "")))
	}
	return n
}

// widest is the widest line of s in terminal cells, colour escapes left out.
func widest(s string) int {
	n := 0
	for _, l := range strings.Split(ansi.ReplaceAllString(s, ""), "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func renderGroupTable(t *tablewriter.Table, label string, gs []query.Group, esc func(string) string) error {
	t.Header(header(label))
	if err := t.Bulk(groupRows(gs, esc)); err != nil {
		return err
	}
	return t.Render()
}

// groupRows are the cells of a grouping's rows; esc makes the log-derived keys safe.
func groupRows(gs []query.Group, esc func(string) string) [][]string {
	rows := make([][]string, len(gs))
	for i, g := range gs {
		rows[i] = cells(esc(g.Key), g.Metrics)
	}
	return rows
}

// Write renders r in the named format.
func Write(w io.Writer, format Format, r *Report) error {
	switch format {
	case FormatJSON:
		return JSON(w, r)
	case FormatMarkdown:
		return Markdown(w, r)
	case FormatHTML:
		return HTML(w, r)
	case FormatTable:
		return Table(w, r)
	case FormatTSV:
		return TSV(w, r)
	case FormatCSV:
		section := r.Section
		if section == "" {
			section = "windows"
		}
		return CSV(w, r, section)
	}
	return CheckFormat(string(format))
}

// markdownEscape keeps log-derived text from turning into Markdown or HTML.
func markdownEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune("\\`*_{}[]<>()#+!|~", c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// alertValue shows an alert's peak the way the table shows its metric.
func alertValue(a judge.Alert) string {
	if a.Rule == "retry_storm" {
		return ratio(&a.Peak)
	}
	return pct(&a.Peak)
}

// Check writes what retrylens check found: the alerts that fired; in JSON also the
// findings and what the check failed on.
func Check(w io.Writer, format Format, c postmortem.Check, loc *time.Location) error {
	switch format {
	case FormatJSON:
		failed := make([]jsonFailure, 0, len(c.FailedOn))
		for _, f := range c.FailedOn {
			failed = append(failed, jsonFailure{Kind: f.Kind, Rule: f.Rule, Severity: f.Severity, Count: f.Count,
				Start: rfc3339(f.Start), End: rfc3339(f.End)})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			FailOn   string        `json:"fail_on"`
			Failing  int           `json:"failing"`
			FailedOn []jsonFailure `json:"failed_on"`
			Alerts   []jsonAlert   `json:"alerts"`
			Findings []jsonFinding `json:"findings"`
		}{c.FailOn, c.Failing, failed, toJSONAlerts(c.Alerts), toJSONFindings(c.Findings)})
	case FormatTSV:
		return alertsTSV(w, c.Alerts)
	case FormatMarkdown:
		return checkMarkdown(w, c.FailOn, c.Failing, c.Alerts, c.Findings, loc)
	}
	return alerts(w, c.Alerts, loc)
}

// CheckSays is what check says after its output, a line each: why it fails (failed), or
// why it had nothing to judge (noData: no rows, or none tagged; a CI job pointed at the
// wrong file must not pass); nothing when it passes.
func CheckSays(c postmortem.Check, loc *time.Location) (lines []string, failed, noData bool) {
	var found []string
	for _, f := range c.FailedOn {
		switch {
		case f.Kind == judge.SustainedFinding:
			found = append(found, fmt.Sprintf("%s (%s to %s)", f.Kind, f.Start.In(loc).Format("15:04:05"), f.End.In(loc).Format("15:04:05")))
		case f.Count > 0:
			found = append(found, fmt.Sprintf("%s (%d requests)", f.Kind, f.Count))
		}
	}
	if c.Failing > 0 {
		alerts := "alerts"
		if c.Failing == 1 {
			alerts = "alert"
		}
		lines = append(lines, fmt.Sprintf("%d %s at or above %s", c.Failing, alerts, c.FailOn))
	}
	if len(found) > 0 {
		lines = append(lines, "findings present: "+strings.Join(found, ", "))
	}
	if len(lines) > 0 {
		return lines, true, false
	}
	switch m := c.Summary; {
	case m.Requests == 0:
		return []string{"no rows in the range: nothing to judge"}, false, true
	case m.FirstAttempts+m.Retries == 0:
		return []string{fmt.Sprintf("none of the %d lines carries an attempt number: nothing to judge (log the attempt header, see the README, or try --infer-attempts)", m.Requests)}, false, true
	}
	return nil, false, false
}

// jsonFailure is one reason a check failed (postmortem.Failure).
type jsonFailure struct {
	Kind     string  `json:"kind"`
	Rule     string  `json:"rule,omitempty"`
	Severity string  `json:"severity,omitempty"`
	Count    int64   `json:"count,omitempty"`
	Start    *string `json:"start,omitempty"`
	End      *string `json:"end,omitempty"`
}

// checkMarkdown is check's block for a pull request comment: a heading that says whether
// it passes, the alerts as a table, the findings as a list.
func checkMarkdown(w io.Writer, failOn string, failing int, as []judge.Alert, fs []query.Finding, loc *time.Location) error {
	var b strings.Builder
	status := "passes"
	if failing > 0 {
		status = fmt.Sprintf("fails: %s at or above %s", plural(int64(failing), "alert"), failOn)
	}
	fmt.Fprintf(&b, "### retrylens check %s\n\n", status)
	if len(as) == 0 {
		b.WriteString("No alert fired.\n")
	} else {
		b.WriteString("| severity | rule | start | end (excluded) | peak |\n| --- | --- | --- | --- | --- |\n")
		for _, a := range as {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", a.Severity, a.Rule, a.Start.In(loc).Format("2006-01-02 15:04"),
				a.End.In(loc).Format("2006-01-02 15:04"), alertValue(a))
		}
	}
	if len(fs) > 0 {
		b.WriteString("\nFindings:\n\n")
		for _, f := range fs {
			fmt.Fprintf(&b, "- `%s`: %s, %s (%s)\n", f.Kind, plural(f.Count, "request"), plural(f.Attempts, "attempt"), findingText[f.Kind])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// alerts writes the alerts that fired, one per line; "no alerts" when none.
func alerts(w io.Writer, as []judge.Alert, loc *time.Location) error {
	if len(as) == 0 {
		_, err := fmt.Fprintln(w, "no alerts")
		return err
	}
	t := newTable(w, tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignLeft}))
	t.Header([]string{"severity", "rule", "start", "end (excluded)", "peak"})
	for _, a := range as {
		if err := t.Append([]string{a.Severity, a.Rule, a.Start.In(loc).Format("2006-01-02 15:04"), a.End.In(loc).Format("2006-01-02 15:04"), alertValue(a)}); err != nil {
			return err
		}
	}
	return t.Render()
}

// alertsTSV writes the alerts tab-separated with a header, times RFC 3339, for pipes and
// scripts (check's output when stdout is not a terminal).
func alertsTSV(w io.Writer, as []judge.Alert) error {
	var b strings.Builder
	b.WriteString("severity\trule\tstart\tend\tpeak\n")
	for _, a := range as {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%g\n", a.Severity, a.Rule, a.Start.UTC().Format(time.RFC3339), a.End.UTC().Format(time.RFC3339), a.Peak)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// NumberRows writes a table whose first text columns are left-aligned and the rest, numbers,
// right-aligned, as the report's tables are. The cells must already be safe to print.
func NumberRows(w io.Writer, header []string, rows [][]string, text int) error {
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignRight
		if i < text {
			align[i] = tw.AlignLeft
		}
	}
	t := newTable(w, tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

// Rows writes any result as a left-aligned table, for retrylens query. The cells must
// already be safe to print.
func Rows(w io.Writer, header []string, rows [][]string) error {
	t := newTable(w, tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignLeft}))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}
