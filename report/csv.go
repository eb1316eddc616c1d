package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

// Sections are the tables --format csv can write, one per run (--section).
var Sections = []string{"windows", "summary", "endpoints", "groups", "findings", "not_judged", "alerts", "input"}

// CheckSection validates a --section name up front.
func CheckSection(name string) error {
	for _, s := range Sections {
		if s == name {
			return nil
		}
	}
	return fmt.Errorf("unknown section %q: want one of %s", name, strings.Join(Sections, ", "))
}

// CSV writes one section of the report as CSV with a header row. Rates are fractions,
// times RFC 3339. Cells that a spreadsheet would read as a formula are defused.
func CSV(w io.Writer, r *Report, section string) error {
	cw := csv.NewWriter(w)
	write := func(rec []string) {
		for i, c := range rec {
			rec[i] = safeCell(c)
		}
		cw.Write(rec)
	}
	switch section {
	case "summary":
		write(append([]string{"from", "to"}, machineHeader...))
		write(append([]string{*orEmpty(rfc3339(r.From)), *orEmpty(rfc3339(r.To))}, machineCells(r.Summary)...))
	case "windows":
		write(append([]string{"start"}, machineHeader...))
		for _, win := range r.Windows {
			write(append([]string{*rfc3339(win.Start)}, machineCells(win.Metrics)...))
		}
	case "endpoints":
		write(append([]string{"method", "route"}, machineHeader...))
		for _, g := range r.Endpoints {
			method, route, _ := strings.Cut(g.Key, " ")
			write(append([]string{method, route}, machineCells(g.Metrics)...))
		}
	case "groups":
		write(append([]string{r.By}, machineHeader...))
		for _, g := range r.Groups {
			write(append([]string{g.Key}, machineCells(g.Metrics)...))
		}
	case "findings":
		write([]string{"kind", "count", "attempts", "examples"})
		for _, f := range r.Findings {
			write([]string{f.Kind, strconv.FormatInt(f.Count, 10), strconv.FormatInt(f.Attempts, 10), strings.Join(f.Examples, " ")})
		}
	case "not_judged":
		write([]string{"kind", "count", "unit", "log", "why"})
		for _, n := range r.NotJudged {
			write([]string{n.Kind, strconv.FormatInt(n.Count, 10), n.Unit, n.Log, n.Why})
		}
	case "input":
		h := r.Health
		write([]string{"lines", "rejected", "rejected_kept", "repeated_rows", "registry_mismatch"})
		write([]string{strconv.FormatInt(h.Lines, 10), strconv.FormatInt(h.Rejected, 10), strconv.FormatInt(h.Kept, 10),
			strconv.FormatInt(h.Repeats, 10), h.Mismatch})
	case "alerts":
		write([]string{"rule", "severity", "start", "end", "peak"})
		for _, a := range r.Alerts {
			write([]string{a.Rule, a.Severity, *rfc3339(a.Start), *rfc3339(a.End), strconv.FormatFloat(a.Peak, 'f', -1, 64)})
		}
	default:
		return CheckSection(section)
	}
	cw.Flush()
	return cw.Error()
}

func orEmpty(s *string) *string {
	if s == nil {
		e := ""
		return &e
	}
	return s
}

// SafeCell is safeCell for other CSV writers (retrylens query).
func SafeCell(s string) string { return safeCell(s) }

// safeCell escapes control characters as Clean does (a CSV file is read in terminals and
// editors too) and defuses cells a spreadsheet would evaluate (=, +, -, @ first) with a
// leading quote, as OWASP advises, unless the cell is a plain number.
func safeCell(s string) string {
	s = Clean(s)
	if s == "" || !strings.ContainsAny(s[:1], "=+-@") {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

// TSV writes the windows as tab-separated lines with a header, for pipes and scripts
// (what the table format becomes when stdout is not a terminal), the endpoints and the
// --by breakdown as tables of their own after a blank line, then the notes as lines
// starting with "# ".
func TSV(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString(strings.Join(append([]string{"window"}, machineHeader...), "\t"))
	b.WriteByte('\n')
	row := func(label string, m judge.Metrics) {
		b.WriteString(strings.Join(append([]string{label}, machineCells(m)...), "\t"))
		b.WriteByte('\n')
	}
	for _, win := range r.Windows {
		row(*rfc3339(win.Start), win.Metrics)
	}
	row("all", r.Summary)
	// Then, after a blank line each, every endpoint and the --by breakdown, with the same
	// columns: what the table shows, whole, for scripts.
	tables := []struct {
		label string
		gs    []query.Group
	}{{"endpoint", r.Endpoints}, {r.By, r.Groups}}
	for i, t := range tables {
		if len(t.gs) == 0 || (i == 0 && r.By == "route") {
			continue
		}
		b.WriteString("\n" + strings.Join(append([]string{t.label}, machineHeader...), "\t") + "\n")
		for _, g := range t.gs {
			row(Clean(g.Key), g.Metrics)
		}
	}
	for _, n := range r.notes(Clean) {
		b.WriteString("# " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
