package ingest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// BenchmarkParquet1M measures issue #20's Parquet alternative against the table, on the
// 1M-line log, each op both ways in turn: "table" loads into a fresh DuckDB file as
// retrylens ingest does (LoadTuned); "parquet" writes the same rows with DuckDB's Parquet
// writer fed from retrylens_rows (one file for the log, as one chunk would be), in no
// particular order as a load inserts but without the load's 128 MB memory limit (under
// which the writer took twice as long), and makes requests a view over it in a fresh
// DuckDB file. Then, on each, what a first report needs: the report cache
// (query.Refresh), a whole report from it, and an hour linked again (--since/--until that
// cut a minute). Times per op, as <way>-<step>-ms.
//
//	go test ./ingest -run '^$' -bench Parquet1M -benchtime 3x
func BenchmarkParquet1M(b *testing.B) {
	if _, err := os.Stat(benchLog); err != nil {
		b.Skipf("no %s: go run ./bench/genlog -n 1000000 > %[1]s", benchLog)
	}
	ctx := context.Background()
	format, _ := parse.Preset("retry")
	times := map[string]time.Duration{}
	lap := func(name string, start time.Time) { times[name] += time.Since(start) }
	for range b.N {
		for _, way := range []string{"table", "parquet"} {
			dir := b.TempDir()
			db, err := Open(ctx, filepath.Join(dir, "r.duckdb"))
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if way == "table" {
				if _, err := LoadTuned(ctx, db, []string{benchLog}, Options{Format: format}); err != nil {
					b.Fatal(err)
				}
			} else {
				if _, err := db.ExecContext(ctx, "SET preserve_insertion_order = false"); err != nil {
					b.Fatal(err)
				}
				writeParquet(b, db, format, filepath.Join(dir, "chunk-1.parquet"))
			}
			lap(way+"-load", start)
			start = time.Now()
			if _, err := query.RefreshAfterLoad(ctx, db, true); err != nil {
				b.Fatal(err)
			}
			lap(way+"-cache", start)
			for _, r := range []struct {
				name string
				o    query.Options
			}{
				{"report", query.Options{}},
				{"hour", query.Options{Since: time.Date(2026, 11, 29, 0, 10, 30, 0, time.UTC), Until: time.Date(2026, 11, 29, 1, 10, 30, 0, time.UTC)}},
			} {
				start = time.Now()
				benchSteps(b, db, r.o)
				lap(way+"-"+r.name, start)
			}
			db.Close()
		}
	}
	for name, d := range times {
		b.ReportMetric(float64(d.Milliseconds())/float64(b.N), name+"-ms")
	}
}

// writeParquet writes the benchmark log's rows as one Parquet file and makes requests a
// view over it, with a registry entry as a load would write.
func writeParquet(b *testing.B, db *sql.DB, format *parse.Format, path string) {
	ctx := context.Background()
	f, err := os.Open(benchLog)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	batches, free := make(chan *batch, 4), make(chan *batch, 8)
	id, drop := newRowSource(ctx, batches, free)
	defer drop()
	out := File{Reasons: map[string]int64{}}
	var lineSum int64
	parsed := make(chan error, 1)
	go func() {
		defer close(batches)
		parsed <- readAll(ctx, f, sha256.New(), format, 0, &out, &lineSum, Options{Samples: 20}, batches, free)
	}()
	sel := []string{"1 AS file_id"}
	for _, c := range rowColumns {
		expr := c.name
		if c.sql != "" {
			expr = c.sql
		}
		sel = append(sel, expr+" AS "+c.name)
	}
	q := "COPY (SELECT " + strings.Join(sel, ", ") + " FROM " + rowsFunction + "(" + strconv.FormatInt(id, 10) + ")) TO '" + path + "' (FORMAT parquet)"
	if _, err := db.ExecContext(ctx, q); err != nil {
		b.Fatal(err)
	}
	if err := <-parsed; err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		"DROP TABLE requests",
		"CREATE VIEW requests AS SELECT * FROM read_parquet('" + path + "')",
		`INSERT INTO files (file_id, path, sha256, offset_bytes, bytes, first_line, lines_end, format, lines, rows, rejected, loaded_at)
		 VALUES (1, 'bench', '-', 0, 0, 1, ` + strconv.FormatInt(out.Lines, 10) + `, 'retry', ` + strconv.FormatInt(out.Lines, 10) + `, ` +
			strconv.FormatInt(out.Rows, 10) + `, 0, now())`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(q, ": ", err)
		}
	}
}

// benchSteps runs what retrylens report reads over a Set of o.
func benchSteps(b *testing.B, db *sql.DB, o query.Options) {
	ctx := context.Background()
	set, err := query.Open(ctx, db, o)
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	if _, err := set.Summary(ctx); err != nil {
		b.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := set.Windows(ctx, time.Hour, 0); return err },
		func() error { _, err := set.Groups(ctx, "route"); return err },
		func() error { _, err := set.Loops(ctx); return err },
		func() error { _, err := set.Findings(ctx, query.DefaultMaxAttempts); return err },
		func() error { _, err := set.Linking(ctx); return err },
		func() error { _, err := set.Alerts(ctx); return err },
	} {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
}
