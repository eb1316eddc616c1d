package ingest

import (
	"context"
	"os"
	"testing"
)

// BenchmarkCheck times the registry check every ingest runs before loading, on the
// database RETRYLENS_BENCH_DB names (for instance one ingest wrote from 10M lines of
// bench/genlog); without it, on a 200,000-line one built here.
//
//	RETRYLENS_BENCH_DB=/tmp/10m.duckdb go test ./ingest -run '^$' -bench Check -benchtime 5x
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	path := os.Getenv("RETRYLENS_BENCH_DB")
	if path == "" {
		path = b.TempDir() + "/check.duckdb"
	}
	db, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if os.Getenv("RETRYLENS_BENCH_DB") == "" {
		if _, err := db.ExecContext(ctx, `INSERT INTO files SELECT 1, 'x', '', 0, 1, 1, 200000, 'retry', 200000, 200000, 0, NULL, NULL, now(), 20000100000, NULL;
			INSERT INTO requests (file_id, line) SELECT 1, i FROM range(1, 200001) t(i)`); err != nil {
			b.Fatal(err)
		}
	}
	var rows int64
	db.QueryRowContext(ctx, "SELECT count(*) FROM requests").Scan(&rows)
	for _, full := range []bool{false, true} {
		name := "ingest" // what every ingest runs
		if full {
			name = "verify" // distinct lines counted too
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				d, err := Check(ctx, db, full)
				if err != nil || !d.OK() {
					b.Fatal(err, d.Problems())
				}
			}
			b.ReportMetric(float64(rows), "rows")
		})
	}
}
