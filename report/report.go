// Package report renders computed results as a table, Markdown or JSON on an io.Writer.
// It runs no SQL: it takes what package query computed.
package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
)

// Report is a postmortem (computed by package postmortem) and how to render it.
type Report struct {
	postmortem.Result
	// Health is what the store holds beside the figures: lines ingest rejected, rows
	// loaded twice; every format says it.
	Health      backend.Health
	GeneratedAt time.Time
	Window      string // width label, e.g. "1h"
	Endpoint    string // the endpoint the report is limited to, as given, if any
	Section     string // for csv: which table (see Sections)
	// Top is how many endpoints with retries the table, Markdown and HTML show: 0 means
	// the default, ten; a negative number all of them. JSON and CSV carry all.
	Top   int
	Color bool // colour verdicts (a terminal that wants colour)
	// Columns is the terminal's width: the table format leaves columns out to fit it
	// (see dropOrder); 0 for no limit.
	Columns int
}

func (r *Report) loc() *time.Location {
	if r.Location == nil {
		return time.UTC
	}
	return r.Location
}

// Format is an output format.
type Format string

// The output formats.
const (
	FormatTable    Format = "table"
	FormatTSV      Format = "tsv"
	FormatMarkdown Format = "markdown"
	FormatJSON     Format = "json"
	FormatCSV      Format = "csv"
	FormatHTML     Format = "html"
)

// Formats are the output formats Write accepts.
var Formats = []Format{FormatTable, FormatTSV, FormatMarkdown, FormatJSON, FormatCSV, FormatHTML}

// ParseFormat reads an output format's name: any of Formats, or of allowed when given
// (a command that writes fewer).
func ParseFormat(name string, allowed ...Format) (Format, error) {
	if len(allowed) == 0 {
		allowed = Formats
	}
	names := make([]string, len(allowed))
	for i, f := range allowed {
		if string(f) == name {
			return f, nil
		}
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown format %q: want %s", name, strings.Join(names, ", "))
}

// CheckFormat validates an output format name up front.
func CheckFormat(name string) error {
	_, err := ParseFormat(name)
	return err
}

// OutputFormat is the format to write: the one given, else the one an output file's
// extension names (.html, .json, .csv, .md, .tsv), else a table on a terminal (or into a
// file) and tab-separated values in a pipe.
func OutputFormat(given, file string, toTerminal bool) string {
	if given != "" {
		return given
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".html", ".htm":
		return string(FormatHTML)
	case ".json":
		return string(FormatJSON)
	case ".csv":
		return string(FormatCSV)
	case ".md", ".markdown":
		return string(FormatMarkdown)
	case ".tsv":
		return string(FormatTSV)
	}
	if toTerminal || file != "" {
		return string(FormatTable)
	}
	return string(FormatTSV)
}

func pct(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *p*100)
}

// Ratio is how the tables show an amplification: 1.52x, or "-" for nil.
func Ratio(p *float64) string { return ratio(p) }

func ratio(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *p)
}

func split(s judge.Split) string {
	if s.Total() == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d+%d)", s.Total(), s.First, s.Retry)
}
