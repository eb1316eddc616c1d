package query_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
)

// bench10M opens (building it once, into the temp dir) a database of 10M requests over
// a day: 12-row blocks of ten single-attempt requests and one 502 → 200 retry pair, one
// block in 20 with a 429 and Retry-After instead, 40 routes, a request id on every line.
func bench10M(b *testing.B) *sql.DB {
	ctx := context.Background()
	if path := os.Getenv("RETRYLENS_BENCH_DB"); path != "" { // a database ingest wrote
		db, err := ingest.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		return db
	}
	path := filepath.Join(os.TempDir(), "retrylens-bench-10m-v4.duckdb")
	_, statErr := os.Stat(path)
	db, err := ingest.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	if statErr == nil {
		return db
	}
	b.Log("building ", path, " (once)")
	_, err = db.ExecContext(ctx, `
INSERT INTO requests (file_id, line, ts, remote_addr, user_agent, method, uri, route, status, request_time,
                      attempt, attempt_source, request_id_hash, retry_after, key_text)
SELECT 1, i + 1,
       TIMESTAMP '2026-11-29 00:00:00' + to_microseconds(i * 8640),
       '10.0.' || (i % 200) || '.' || (i % 250), 'client/1.0', 'GET',
       '/api/r' || (i % 40) || '/' || (i // 12), '/api/r' || (i % 40) || '/:id',
       CASE WHEN i % 12 = 10 THEN (CASE WHEN (i // 12) % 20 = 0 THEN 429 ELSE 502 END) ELSE 200 END,
       0.012,
       CASE WHEN i % 12 = 11 THEN 1 ELSE 0 END, 'x-retry-attempt',
       retrylens_key('r' || (i // 12) || '-' || least(i % 12, 10)),
       CASE WHEN i % 12 = 10 AND (i // 12) % 20 = 0 THEN '1' END,
       CASE WHEN i % 12 = 11 THEN 'r' || (i // 12) || '-10' END -- as ingest.KeyText: not on first attempts
FROM range(10000000) t(i)`)
	if err != nil {
		os.Remove(path)
		b.Fatal(err)
	}
	return db
}

// BenchmarkReport10M is one whole report over 10M rows, step by step as retrylens
// report runs them: prepare, span, summary, hourly and minute windows, endpoints, 429 loops,
// findings, linking, backoff. Each step's mean time is reported as <step>-ms. The
// "cached" report reads the cache ingest stores (query.Refresh, timed once as
// refresh-ms); "linked" links the rows again, as a report with --endpoint does. "hour" is
// a one-hour --since/--until report (12:00 to 13:00), cut from the cache; "hour-linked"
// the same hour linked again with its context.
//
//	go test ./query -run '^$' -bench Report10M -benchtime 3x
func BenchmarkReport10M(b *testing.B) {
	db := bench10M(b)
	defer db.Close()
	ctx := context.Background()
	t0 := time.Now()
	how, err := query.Refresh(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	refresh := time.Since(t0)
	b.Run("cached", func(b *testing.B) {
		if how != query.CacheFresh {
			b.ReportMetric(float64(refresh.Milliseconds()), "refresh-ms")
		}
		benchReport(b, db, query.Options{}, true, 10_000_000)
	})
	b.Run("linked", func(b *testing.B) { benchReport(b, db, query.Options{NoCache: true}, false, 10_000_000) })
	// 10M rows 8.64 ms apart: rows 5,000,000 to 5,416,666 are 12:00 to 13:00
	hour := query.Options{Since: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)}
	b.Run("hour", func(b *testing.B) { benchReport(b, db, hour, true, 416_667) })
	hour.NoCache = true
	b.Run("hour-linked", func(b *testing.B) { benchReport(b, db, hour, false, 416_667) })
}

// benchReport times the steps of a report with o; cached says whether it must read the
// cache, requests how many rows it must count (unchecked with RETRYLENS_BENCH_DB).
func benchReport(b *testing.B, db *sql.DB, o query.Options, cached bool, requests int64) {
	ctx := context.Background()
	steps := map[string]time.Duration{}
	var order []string
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		lap := func(name string, err error) {
			if err != nil {
				b.Fatal(name, ": ", err)
			}
			if _, ok := steps[name]; !ok {
				order = append(order, name)
			}
			steps[name] += time.Since(t)
			t = time.Now()
		}
		set, err := query.Open(ctx, db, o)
		lap("open", err)
		if set.Cached() != cached {
			b.Fatalf("cached %v, want %v", set.Cached(), cached)
		}
		_, _, err = set.Span(ctx)
		lap("span", err)
		m, err := set.Summary(ctx)
		lap("summary", err)
		if m.Requests != requests && os.Getenv("RETRYLENS_BENCH_DB") == "" {
			b.Fatalf("%d requests, want %d", m.Requests, requests)
		}
		_, err = set.Windows(ctx, time.Hour, 0)
		lap("hours", err)
		_, err = set.Windows(ctx, time.Minute, 0)
		lap("minutes", err)
		_, err = set.Groups(ctx, "route")
		lap("routes", err)
		_, err = set.Loops(ctx)
		lap("loops", err)
		_, err = set.Findings(ctx, query.DefaultMaxAttempts)
		lap("findings", err)
		_, err = set.Linking(ctx)
		lap("linking", err)
		_, err = set.Backoff(ctx, 0, 0)
		lap("backoff", err)
		lap("close", set.Close())
	}
	for _, name := range order {
		b.ReportMetric(float64(steps[name].Milliseconds())/float64(b.N), name+"-ms")
	}
}
