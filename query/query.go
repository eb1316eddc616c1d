// Package query computes retrylens's metrics from the database with SQL. It is, with
// ingest, the only code that talks to DuckDB; the SQL lives in the .sql files beside it.
package query

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"text/template"
	"time"
)

//go:embed *.sql
var sqlFiles embed.FS

// sqlTmpl holds every statement; {{.Key}} is a grouping expression chosen by the program.
var sqlTmpl = template.Must(template.ParseFS(sqlFiles, "*.sql"))

func statement(name, key string) (string, error) {
	var q bytes.Buffer
	if err := sqlTmpl.ExecuteTemplate(&q, name, struct{ Key string }{key}); err != nil {
		return "", err
	}
	return q.String(), nil
}

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
	Recovered        int64    // logical requests whose first attempt failed and a retry succeeded
	Exhausted        int64    // logical requests that retried and never got 2xx
	EffectiveSuccess *float64 // 2xx share of logical requests' final attempts
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
	m := Metrics{}
	found := false
	err := metrics(ctx, db, "metrics.sql", "NULL::INTEGER", rg, func(rows *sql.Rows) error {
		var k sql.NullInt64
		found = true
		return scanMetrics(rows, &k, &m)
	})
	if err != nil {
		return m, err
	}
	err = metrics(ctx, db, "logical.sql", "NULL::INTEGER", rg, func(rows *sql.Rows) error {
		var k sql.NullInt64
		return scanLogical(rows, &k, &m)
	})
	if !found {
		m.Verdict = Quiet
	} else {
		m.Verdict = Verdict(m)
	}
	return m, err
}

// bucket is the grouping expression for windows of width over a time column.
func bucket(width time.Duration, col string) string {
	return fmt.Sprintf("time_bucket(to_seconds(%d), %s)", int64(width/time.Second), col)
}

// Windows returns the metrics per time bucket of the given width, for the buckets that
// have rows, oldest first. Buckets of widths that divide a day start on whole multiples
// of the width since midnight UTC. A logical request belongs to the window of its first
// attempt.
func Windows(ctx context.Context, db *sql.DB, width time.Duration, rg Range) ([]Window, error) {
	if width < time.Second || width%time.Second != 0 {
		return nil, fmt.Errorf("window %v: want a whole number of seconds", width)
	}
	var ws []Window
	index := map[time.Time]int{}
	err := metrics(ctx, db, "metrics.sql", bucket(width, "ts"), rg, func(rows *sql.Rows) error {
		var w Window
		var start sql.NullTime
		if err := scanMetrics(rows, &start, &w.Metrics); err != nil {
			return err
		}
		if !start.Valid {
			return nil // rows without a time belong to no window
		}
		w.Start = start.Time.UTC()
		index[w.Start] = len(ws)
		ws = append(ws, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = metrics(ctx, db, "logical.sql", bucket(width, "first_ts"), rg, func(rows *sql.Rows) error {
		var start sql.NullTime
		var m Metrics
		if err := scanLogical(rows, &start, &m); err != nil || !start.Valid {
			return err
		}
		if i, ok := index[start.Time.UTC()]; ok {
			ws[i].Recovered, ws[i].Exhausted, ws[i].EffectiveSuccess = m.Recovered, m.Exhausted, m.EffectiveSuccess
		}
		return nil
	})
	for i := range ws {
		ws[i].Verdict = Verdict(ws[i].Metrics)
	}
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

func metrics(ctx context.Context, db *sql.DB, name, key string, rg Range, each func(*sql.Rows) error) error {
	q, err := statement(name, key)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, q, rg.args()...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func scanLogical(rows *sql.Rows, key any, m *Metrics) error {
	var es sql.NullFloat64
	err := rows.Scan(key, &m.Recovered, &m.Exhausted, &es)
	m.EffectiveSuccess = ptr(es)
	return err
}

func scanMetrics(rows *sql.Rows, key any, m *Metrics) error {
	var amp, rr, rsr, el, as sql.NullFloat64
	err := rows.Scan(key, &m.Requests, &m.Untagged, &m.FirstAttempts, &m.Retries,
		&amp, &rr, &rsr, &el, &as,
		&m.Status5xx.First, &m.Status5xx.Retry, &m.Status429.First, &m.Status429.Retry,
		&m.Status499.First, &m.Status499.Retry)
	m.Amplification, m.RetryRate, m.RetrySuccessRate = ptr(amp), ptr(rr), ptr(rsr)
	m.ExtraLoad, m.ActualSuccess = ptr(el), ptr(as)
	return err
}

func ptr(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}
