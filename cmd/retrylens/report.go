package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/report"
)

type reportOptions struct {
	db      string
	formats formatFlags
	window  string
	since   string
	until   string
	format  string
	output  string
	maxAtt  int
}

func (e *env) reportCmd() *cobra.Command {
	var o reportOptions
	c := &cobra.Command{
		Use:   "report [flags] [FILE...]",
		Short: "Print retry metrics per time window and for the whole range",
		Long: `Print, per time window and for the whole range: requests, untagged lines,
first attempts, retries, amplification (tagged lines / first attempts), retry rate
(second attempts / first attempts), retry success rate (retries answered 2xx / retries),
recovered and exhausted requests, 5xx and 429 answers split first+retry, and a verdict:
fuelling, rescuing or quiet. Under the table: 429 feedback loops (premature and blind
retries) and policy findings (retried writes without an idempotency key, false
successes, retries of non-retryable answers, attempts over --max-attempts).

Attempts are linked into logical requests by Idempotency-Key, amz-sdk-invocation-id or
X-Request-Id; a line with none of them counts as a request of its own.

Without FILE it reads the database; with FILEs it loads them into a temporary in-memory
database first (the input-format flags apply), for a quick look or a CI step.

Times are UTC. --since and --until take RFC 3339 (2026-11-29T10:00:00Z) or
"2026-11-29 10:00[:05]" (UTC); the range is [since, until).`,
		Example: `  retrylens report --window 1h
  retrylens report --window 1m --since '2026-11-29 10:00' --until '2026-11-29 10:30'
  retrylens report --format json -o report.json
  retrylens report --format markdown --log-format retry access.log`,
		RunE: func(c *cobra.Command, args []string) error { return e.runReport(c, &o, args) },
	}
	c.Flags().StringVar(&o.db, "db", "", "database file (default $RETRYLENS_DB or ./retrylens.duckdb)")
	o.formats.register(c)
	c.Flags().StringVarP(&o.window, "window", "w", "1h", "window width: 1m, 5m, 1h, 1d or any Go duration such as 15m")
	c.Flags().StringVar(&o.since, "since", "", "first time included (UTC unless the value has a zone)")
	c.Flags().StringVar(&o.until, "until", "", "first time excluded")
	c.Flags().StringVarP(&o.format, "format", "f", "table", "output format: table, markdown or json")
	c.Flags().StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout")
	c.Flags().IntVar(&o.maxAtt, "max-attempts", query.DefaultMaxAttempts, "the retry policy's cap on attempts per request, first included (for the over_cap finding)")
	return c
}

func (e *env) runReport(c *cobra.Command, o *reportOptions, files []string) error {
	if err := report.CheckFormat(o.format); err != nil {
		return usagef("--format: %v", err)
	}
	if o.maxAtt < 1 {
		return usagef("--max-attempts must be at least 1")
	}
	width, err := parseWindow(o.window)
	if err != nil {
		return usagef("--window: %v", err)
	}
	var rg query.Range
	if rg.Since, err = parseTime(o.since); err != nil {
		return usagef("--since: %v", err)
	}
	if rg.Until, err = parseTime(o.until); err != nil {
		return usagef("--until: %v", err)
	}
	if !rg.Since.IsZero() && !rg.Until.IsZero() && !rg.Since.Before(rg.Until) {
		return usagef("--since %s is not before --until %s", o.since, o.until)
	}
	ctx := c.Context()
	var db *sql.DB
	if len(files) > 0 {
		if c.Flags().Changed("db") {
			return usagef("--db and FILE arguments are exclusive: FILEs are read into a temporary database")
		}
		format, err := o.formats.format(c)
		if err != nil {
			return err
		}
		if db, err = ingest.Open(ctx, ""); err != nil {
			return err
		}
		defer db.Close()
		res, err := ingest.Load(ctx, db, files, ingest.Options{Format: format, Stdin: e.stdin, Now: e.now})
		if err != nil {
			report.Ingest(e.stderr, &res)
			return fmt.Errorf("some input was not loaded:\n%w", err)
		}
		if t := res.Totals(); t.Rejected > 0 {
			report.Ingest(e.stderr, &res)
		}
	} else {
		path := e.dbPath(o.db)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s: run 'retrylens ingest FILE…' first, or give log files to report", path)
		}
		if db, err = ingest.Open(ctx, path); err != nil {
			return err
		}
		defer db.Close()
	}
	r := report.Report{GeneratedAt: e.now(), Window: o.window}
	if r.From, r.To, err = query.Span(ctx, db, rg); err != nil {
		return err
	}
	if r.Summary, err = query.Summary(ctx, db, rg); err != nil {
		return err
	}
	if r.Windows, err = query.Windows(ctx, db, width, rg); err != nil {
		return err
	}
	r.Summary.Verdict = query.Worst(r.Summary, r.Windows)
	if r.Loops, err = query.Loops(ctx, db, rg); err != nil {
		return err
	}
	if r.Findings, err = query.Findings(ctx, db, rg, o.maxAtt); err != nil {
		return err
	}
	return e.writeOutput(o.output, func(w io.Writer) error { return report.Write(w, o.format, &r) })
}

// writeOutput writes to path, or stdout when path is "" or "-". A file is written whole
// or not at all: a failed render leaves no half file behind.
func (e *env) writeOutput(path string, render func(io.Writer) error) error {
	if path == "" || path == "-" {
		return render(e.stdout)
	}
	var b strings.Builder
	if err := render(&b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// parseWindow reads 1m, 5m, 1h, 1d, or a Go duration of whole seconds.
func parseWindow(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		d, err := time.ParseDuration(n + "h")
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration like 1m, 5m, 1h or 1d", s)
		}
		return d * 24, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a duration like 1m, 5m, 1h or 1d (whole seconds, at least 1s)", s)
	}
	return d, nil
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime reads --since/--until; "" is an open bound.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2026-11-29T10:00:00Z or '2026-11-29 10:00'", s)
}
