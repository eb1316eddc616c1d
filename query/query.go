// Package query computes retrylens's metrics from the database with SQL. It is, with
// ingest, the only code that talks to DuckDB; the SQL lives in the .sql files beside it.
package query

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"text/template"
	"time"
)

//go:embed metrics.sql
var metricsSQL string

var metricsTmpl = template.Must(template.New("metrics").Parse(metricsSQL))

// Range bounds the rows a query reads to [Since, Until); a zero bound is open.
type Range struct {
	Since, Until time.Time
}

func (r Range) args() []any {
	return []any{nullTime(r.Since), nullTime(r.Until)}
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// Metrics are the SPEC's metrics for a set of rows. Ratios are nil when their
// denominator is zero.
type Metrics struct {
	Requests         int64
	Untagged         int64
	FirstAttempts    int64
	Retries          int64
	Amplification    *float64
	RetryRate        *float64
	RetrySuccessRate *float64
	ExtraLoad        *float64
	ActualSuccess    *float64
	Status5xx        Split
	Status429        Split
	Status499        Split
	Verdict          string // see Verdict
}

// Split is a count split between first attempts and retries.
type Split struct {
	First, Retry int64
}

// Total is First + Retry.
func (s Split) Total() int64 { return s.First + s.Retry }

// Window is the metrics of one time bucket.
type Window struct {
	Start time.Time
	Metrics
}

// Summary returns the metrics over the whole range.
func Summary(ctx context.Context, db *sql.DB, rg Range) (Metrics, error) {
	m := Metrics{Verdict: Quiet}
	err := metrics(ctx, db, "NULL::INTEGER", rg, func(rows *sql.Rows) error {
		var k sql.NullInt64
		return scanMetrics(rows, &k, &m)
	})
	return m, err
}

// Windows returns the metrics per time bucket of the given width, for the buckets that
// have rows, oldest first. Buckets of widths that divide a day start on whole multiples
// of the width since midnight UTC.
func Windows(ctx context.Context, db *sql.DB, width time.Duration, rg Range) ([]Window, error) {
	if width < time.Second || width%time.Second != 0 {
		return nil, fmt.Errorf("window %v: want a whole number of seconds", width)
	}
	key := fmt.Sprintf("time_bucket(to_seconds(%d), ts)", int64(width/time.Second))
	var ws []Window
	err := metrics(ctx, db, key, rg, func(rows *sql.Rows) error {
		var w Window
		var start sql.NullTime
		if err := scanMetrics(rows, &start, &w.Metrics); err != nil {
			return err
		}
		if !start.Valid {
			return nil // rows without a time belong to no window
		}
		w.Start = start.Time.UTC()
		ws = append(ws, w)
		return nil
	})
	return ws, err
}

// Span returns the first and last request time in the range.
func Span(ctx context.Context, db *sql.DB, rg Range) (from, to time.Time, err error) {
	var f, t sql.NullTime
	err = db.QueryRowContext(ctx, `SELECT min(ts), max(ts) FROM requests
		WHERE ($1::TIMESTAMP IS NULL OR ts >= $1::TIMESTAMP) AND ($2::TIMESTAMP IS NULL OR ts < $2::TIMESTAMP)`,
		rg.args()...).Scan(&f, &t)
	if err != nil {
		return from, to, fmt.Errorf("span: %w", err)
	}
	return f.Time.UTC(), t.Time.UTC(), nil
}

func metrics(ctx context.Context, db *sql.DB, key string, rg Range, each func(*sql.Rows) error) error {
	var q bytes.Buffer
	if err := metricsTmpl.Execute(&q, struct{ Key string }{key}); err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, q.String(), rg.args()...)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func scanMetrics(rows *sql.Rows, key any, m *Metrics) error {
	var amp, rr, rsr, el, as sql.NullFloat64
	err := rows.Scan(key, &m.Requests, &m.Untagged, &m.FirstAttempts, &m.Retries,
		&amp, &rr, &rsr, &el, &as,
		&m.Status5xx.First, &m.Status5xx.Retry, &m.Status429.First, &m.Status429.Retry,
		&m.Status499.First, &m.Status499.Retry)
	m.Amplification, m.RetryRate, m.RetrySuccessRate = ptr(amp), ptr(rr), ptr(rsr)
	m.ExtraLoad, m.ActualSuccess = ptr(el), ptr(as)
	m.Verdict = Verdict(*m)
	return err
}

func ptr(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}
