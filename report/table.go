package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/retrylens/retrylens/query"
)

var header = []string{"window", "requests", "untagged", "first", "retries", "amplification", "retry rate", "retry success", "5xx (first+retry)", "429 (first+retry)", "verdict"}

// columnAlign puts the window label and the verdict left, numbers right.
var columnAlign = []tw.Align{tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
	tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}

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
		split(m.Status5xx),
		split(m.Status429),
		m.Verdict,
	}
}

func (r *Report) rows() [][]string {
	layout := "2006-01-02 15:04"
	rows := make([][]string, 0, len(r.Windows)+1)
	for _, w := range r.Windows {
		rows = append(rows, cells(w.Start.UTC().Format(layout), w.Metrics))
	}
	return rows
}

func (r *Report) title() string {
	if r.From.IsZero() {
		return "retrylens report: no requests in range"
	}
	return fmt.Sprintf("retrylens report, %s windows, %s to %s (UTC)", r.Window,
		r.From.UTC().Format("2006-01-02 15:04:05"), r.To.UTC().Format("2006-01-02 15:04:05"))
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
// as the footer.
func Table(w io.Writer, r *Report) error {
	if _, err := fmt.Fprintln(w, r.title()); err != nil {
		return err
	}
	t := newTable(w)
	if err := render(t, r); err != nil {
		return err
	}
	if note := r.coverage(); note != "" {
		_, err := fmt.Fprintln(w, note)
		return err
	}
	return nil
}

// coverage warns when lines carry no attempt number: they count as requests but are in
// no ratio, so a log without the header can look quiet when it is not.
func (r *Report) coverage() string {
	m := r.Summary
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
	if _, err := fmt.Fprintf(w, "\nVerdict for the whole range: **%s**.\n", r.Summary.Verdict); err != nil {
		return err
	}
	if note := r.coverage(); note != "" {
		_, err := fmt.Fprintf(w, "\n_%s_\n", note)
		return err
	}
	return nil
}

func render(t *tablewriter.Table, r *Report) error {
	t.Header(header)
	if err := t.Bulk(r.rows()); err != nil {
		return err
	}
	if err := t.Append(cells("all", r.Summary)); err != nil {
		return err
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
	}
	return CheckFormat(format)
}
