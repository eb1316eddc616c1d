package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/retrylens/retrylens/query"
)

var header = []string{"window", "requests", "untagged", "first", "retries", "amplification", "retry rate", "retry success", "recovered", "exhausted", "5xx (first+retry)", "429 (first+retry)", "verdict"}

// columnAlign puts the window label and the verdict left, numbers right.
var columnAlign = []tw.Align{tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
	tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}

func cells(label string, m query.Metrics) []string {
	return []string{
		label,
		strconv.FormatInt(m.Requests, 10),
		strconv.FormatInt(m.Untagged, 10),
		strconv.FormatInt(m.FirstAttempts, 10),
		strconv.FormatInt(m.Retries, 10),
		ratio(m.Amplification),
		pct(m.RetryRate),
		pct(m.RetrySuccessRate),
		strconv.FormatInt(m.Recovered, 10),
		strconv.FormatInt(m.Exhausted, 10),
		split(m.Status5xx),
		split(m.Status429),
		m.Verdict,
	}
}

func (r *Report) rows() [][]string {
	layout := "2006-01-02 15:04"
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
	case query.Fuelling:
		c[len(c)-1] = "\x1b[1;31m" + v + "\x1b[0m"
	case query.Rescuing:
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
	return fmt.Sprintf("retrylens report%s, %s windows, %s to %s (%s)", what, r.Window,
		r.From.In(r.loc()).Format("2006-01-02 15:04:05"), r.To.In(r.loc()).Format("2006-01-02 15:04:05"), zone)
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

// Table writes the report as a terminal table: one row per window and the whole range
// as the last row; with --by, a second table of the groups.
func Table(w io.Writer, r *Report) error {
	if _, err := fmt.Fprintln(w, r.title()); err != nil {
		return err
	}
	if err := render(newTable(w), r); err != nil {
		return err
	}
	if r.By != "" {
		if _, err := fmt.Fprintf(w, "by %s:\n", r.By); err != nil {
			return err
		}
		if err := renderGroups(newTable(w), r, Clean); err != nil {
			return err
		}
	}
	for _, line := range r.notes(Clean) {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// findingText says what each finding kind means, for people.
var findingText = map[string]string{
	"duplicate_write_risk": "retried POST/PATCH without an idempotency key",
	"false_success":        "abandoned write, then a retry that succeeded: it may have happened twice",
	"non_retryable_retry":  "retried after 400/401/403/404/422",
	"over_cap":             "attempts beyond the policy cap",
	"synchronised":         "retries in lockstep, within 3 ms of the same gap: no jitter",
}

// notes are the lines under the table: 429 loops, policy findings, coverage. esc makes
// log-derived text (the examples) safe for the output format.
func (r *Report) notes(esc func(string) string) []string {
	var out []string
	for _, in := range r.Incidents {
		b, d, a := in.Before, in.During, in.After
		out = append(out, fmt.Sprintf("incident %s to %s, before → during → after: amplification %s → %s → %s, retry rate %s → %s → %s, retry success %s → %s → %s, effective success %s → %s → %s",
			in.Start.In(r.loc()).Format("2006-01-02 15:04"), in.End.In(r.loc()).Format("15:04"),
			ratio(b.Amplification), ratio(d.Amplification), ratio(a.Amplification),
			pct(b.RetryRate), pct(d.RetryRate), pct(a.RetryRate),
			pct(b.RetrySuccessRate), pct(d.RetrySuccessRate), pct(a.RetrySuccessRate),
			pct(b.EffectiveSuccess), pct(d.EffectiveSuccess), pct(a.EffectiveSuccess)))
	}
	for _, a := range r.Alerts {
		out = append(out, fmt.Sprintf("alert %s (%s): %s to %s, peak %s", a.Rule, a.Severity,
			a.Start.In(r.loc()).Format("2006-01-02 15:04"), a.End.In(r.loc()).Format("15:04"), alertValue(a)))
	}
	l := r.Loops
	if l.Loops > 0 || l.PrematureRetries > 0 || l.BlindRetries > 0 {
		line := fmt.Sprintf("429 loops: %d (longest %d), premature retries: %d, blind retries after 429: %d, 429s answering retries: %s",
			l.Loops, l.MaxLength, l.PrematureRetries, l.BlindRetries, pct(l.Retry429Share))
		if len(l.Worst) > 0 {
			worst := make([]string, len(l.Worst))
			for i, w := range l.Worst {
				worst[i] = fmt.Sprintf("%s on %s at %s (%d)", esc(w.Request), esc(w.Route), w.Start.In(r.loc()).Format("15:04:05"), w.Length)
			}
			line += "; longest: " + strings.Join(worst, ", ")
		}
		out = append(out, line)
	}
	for _, f := range r.Findings {
		ex := make([]string, len(f.Examples))
		for i, e := range f.Examples {
			ex[i] = esc(e)
		}
		out = append(out, fmt.Sprintf("finding %s: %d requests, %d attempts (%s), e.g. %s",
			f.Kind, f.Count, f.Attempts, findingText[f.Kind], strings.Join(ex, ", ")))
	}
	for _, b := range r.Backoff {
		line := fmt.Sprintf("backoff before attempt %d: %d gaps, p10/p50/p90 %.0f/%.0f/%.0f ms, %d within 3 ms of the median",
			b.Attempt, b.Count, b.P10, b.P50, b.P90, b.NearMedian)
		if b.Within != nil {
			line += fmt.Sprintf("; policy %.0f–%.0f ms: %d within", b.Min, b.Max, *b.Within)
		}
		if b.BeyondRetry {
			line += "; beyond the policy's retries"
		}
		out = append(out, line)
	}
	if l := r.Linking; l.Strong()+l.Heuristic+l.Inferred > 0 {
		line := fmt.Sprintf("logical requests: %d linked by a key the client sent (idempotency key %d, invocation id %d, request id %d), %d by client, method and URI",
			l.Strong(), l.IdempotencyKey, l.InvocationID, l.RequestID, l.Heuristic)
		if l.Inferred > 0 {
			line += fmt.Sprintf(", %d with inferred attempt numbers", l.Inferred)
		}
		out = append(out, line)
	}
	if note := r.coverage(); note != "" {
		out = append(out, note)
	}
	return out
}

// coverage warns when lines carry no attempt number: they count as requests but are in
// no ratio, so a log without the header can look quiet when it is not.
func (r *Report) coverage() string {
	m := r.Summary
	if m.Inferred > 0 {
		return fmt.Sprintf("note: %d of %d lines (%.1f%%) carry no attempt header; their attempt numbers are inferred (--infer-attempts).",
			m.Inferred, m.Requests, 100*float64(m.Inferred)/float64(m.Requests))
	}
	if m.Untagged == 0 {
		return ""
	}
	return fmt.Sprintf("note: %d of %d lines (%.1f%%) carry no attempt header; they are left out of every ratio.",
		m.Untagged, m.Requests, 100*float64(m.Untagged)/float64(m.Requests))
}

// Markdown writes the report as a Markdown section with a GitHub table, for PR comments.
func Markdown(w io.Writer, r *Report) error {
	if _, err := fmt.Fprintf(w, "## %s\n\n", r.title()); err != nil {
		return err
	}
	t := newTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()))
	if err := render(t, r); err != nil {
		return err
	}
	if r.By != "" {
		if _, err := fmt.Fprintf(w, "\n### By %s\n\n", r.By); err != nil {
			return err
		}
		mdCell := func(s string) string { return markdownEscape(Clean(s)) }
		if err := renderGroups(newTable(w, tablewriter.WithRenderer(renderer.NewMarkdown())), r, mdCell); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "\nVerdict for the whole range: **%s**.\n", r.Summary.Verdict); err != nil {
		return err
	}
	if notes := r.notes(func(s string) string { return markdownEscape(Clean(s)) }); len(notes) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		for _, n := range notes {
			if _, err := fmt.Fprintf(w, "- %s\n", n); err != nil {
				return err
			}
		}
	}
	return nil
}

func render(t *tablewriter.Table, r *Report) error {
	t.Header(header)
	if err := t.Bulk(r.rows()); err != nil {
		return err
	}
	if err := t.Append(r.colored(cells("all", r.Summary))); err != nil {
		return err
	}
	return t.Render()
}

// renderGroups writes the --by table; esc makes the log-derived group keys safe.
func renderGroups(t *tablewriter.Table, r *Report, esc func(string) string) error {
	h := append([]string{r.By}, header[1:]...)
	t.Header(h)
	for _, g := range r.Groups {
		if err := t.Append(cells(esc(g.Key), g.Metrics)); err != nil {
			return err
		}
	}
	return t.Render()
}

// Write renders r in the named format.
func Write(w io.Writer, format string, r *Report) error {
	switch format {
	case "json":
		return JSON(w, r)
	case "markdown":
		return Markdown(w, r)
	case "table":
		return Table(w, r)
	case "tsv":
		return TSV(w, r)
	case "csv":
		section := r.Section
		if section == "" {
			section = "windows"
		}
		return CSV(w, r, section)
	}
	return CheckFormat(format)
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
func alertValue(a query.Alert) string {
	if a.Rule == "retry_storm" {
		return ratio(&a.Peak)
	}
	return pct(&a.Peak)
}

// Alerts writes the alerts that fired, one per line, for check; "no alerts" when none.
func Alerts(w io.Writer, as []query.Alert, loc *time.Location) error {
	if len(as) == 0 {
		_, err := fmt.Fprintln(w, "no alerts")
		return err
	}
	t := newTable(w, tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignLeft}))
	t.Header([]string{"severity", "rule", "start", "end", "peak"})
	for _, a := range as {
		if err := t.Append([]string{a.Severity, a.Rule, a.Start.In(loc).Format("2006-01-02 15:04"), a.End.In(loc).Format("2006-01-02 15:04"), alertValue(a)}); err != nil {
			return err
		}
	}
	return t.Render()
}
