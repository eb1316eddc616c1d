package main

// backend's tests live in this test binary, which links DuckDB and the cluster's driver
// anyway: a package of their own would link DuckDB once more on every run of the suite
// (about five CPU seconds).

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/watch"
)

// conformanceLogs are the lab's logs: every sample under testdata (each worked out by
// hand in its EXPECTED.md, from the lab's traffic shapes) and the generator's, in the
// formats it writes.
func conformanceLogs(t *testing.T) map[string]string {
	logs := map[string]string{}
	samples, err := filepath.Glob("../../testdata/*/access.log")
	if err != nil || len(samples) == 0 {
		t.Fatalf("no sample logs: %v", err)
	}
	for _, p := range samples {
		logs[filepath.Base(filepath.Dir(p))] = p
	}
	for _, format := range []string{"retry", "caddy"} { // a text and a JSON format (nginx-json: TestLab)
		pf, err := parse.Preset(format)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), format+".log")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = lab.Generate(f, pf, 6000, 11)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		logs["generated-"+format] = path
	}
	return logs
}

// Every backend's stage one gives the same count tables for the same log, whichever rows
// it counted where: a DuckDB file (from its report cache, and linked afresh for a range),
// a database in memory with no cache (as 'report FILE' loads one) and a two-shard ClickHouse cluster
// (counted on the shards, the rest linked here). The tables are compared summed by their
// keys (query.Set.Counts), for the whole log, a range that cuts requests, and with
// --infer-attempts. The cluster joins in the end-to-end tier (go test ./... compares it with
// a file through every report command: TestClusterSameReports); -short compares one log.
func TestConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// into loads path into a store of its own, ready for reports.
	type into func(t *testing.T, path string) (backend.Store, error)
	ingested := func(location func(t *testing.T) string) into {
		return func(t *testing.T, path string) (backend.Store, error) {
			st, err := backend.Open(ctx, location(t), backend.Options{Mode: backend.Create})
			if err == nil {
				_, err = st.Ingest(ctx, []string{path}, ingest.Options{}, backend.Events{})
			}
			return st, err
		}
	}
	stores := []struct {
		name string
		load into
		few  bool // two logs only: keys that lie across shards, and volume
	}{
		{"duckdb", ingested(func(t *testing.T) string { return filepath.Join(t.TempDir(), "rows.duckdb") }), false},
		// What 'report FILE' reads: no cache, every table linked from the rows.
		{"memory", func(t *testing.T, path string) (backend.Store, error) {
			st, _, err := backend.Temp(ctx, []string{path}, ingest.Options{})
			return st, err
		}, false},
	}
	if testmain.EndToEnd {
		stores = append(stores, []struct {
			name string
			load into
			few  bool
		}{
			{"clickhouse", ingested(func(t *testing.T) string { return testmain.ClusterURL(t) }), false},
			// Two loaders given the log at once: one loads it, the other waits and finds
			// it loaded.
			{"clickhouse, two loaders", func(t *testing.T, path string) (backend.Store, error) {
				url := testmain.ClusterURL(t)
				errs := make(chan error, 2)
				for range 2 {
					go func() {
						st, err := backend.Open(ctx, url, backend.Options{Mode: backend.Create, Wait: time.Minute})
						if err == nil {
							_, err = st.Ingest(ctx, []string{path}, ingest.Options{}, backend.Events{})
							st.Close()
						}
						errs <- err
					}()
				}
				if err := errors.Join(<-errs, <-errs); err != nil {
					return nil, err
				}
				return backend.Open(ctx, url, backend.Options{})
			}, true},
			// A watch's batch (no stored answers: reports read the shards).
			{"clickhouse, watch", func(t *testing.T, path string) (backend.Store, error) {
				url := testmain.ClusterURL(t)
				w, err := watch.New(watch.Options{Location: url, Args: []string{path}, Width: time.Minute})
				if err == nil {
					err = w.Batch(ctx)
				}
				if err != nil {
					return nil, err
				}
				return backend.Open(ctx, url, backend.Options{})
			}, true},
		}...)
	}
	for name, path := range conformanceLogs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && name != "keys-that-lie" {
				t.Skip("-short compares one log")
			}
			var opened []backend.Store
			var names []string
			for _, s := range stores {
				if s.few && name != "keys-that-lie" && name != "generated-retry" {
					continue
				}
				names = append(names, s.name)
				st, err := s.load(t, path)
				if st != nil {
					t.Cleanup(func() { st.Close() })
				}
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				opened = append(opened, st)
			}
			first, last := span(t, opened[0])
			mid := first.Add(last.Sub(first) / 2).Truncate(time.Second).Add(7 * time.Second)
			for _, qo := range []query.Options{
				{},
				{Since: first.Add(last.Sub(first) / 4).Truncate(time.Second).Add(13 * time.Second), Until: mid},
				{InferAttempts: true},
			} {
				want := counts(t, opened[0], qo)
				for i, st := range opened[1:] {
					got := counts(t, st, qo)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%s [%v, %v) infer=%v: count tables differ from %s's (-%[5]s +%[1]s):\n%[6]s",
							names[i+1], qo.Since, qo.Until, qo.InferAttempts, names[0], diff)
					}
				}
			}
		})
	}
}

// span is the first and last time of a store's rows.
func span(t *testing.T, st backend.Store) (first, last time.Time) {
	t.Helper()
	_, rows, err := st.Run(context.Background(), "SELECT min(ts), max(ts) FROM requests")
	if err != nil || len(rows) != 1 {
		t.Fatalf("span: %v", err)
	}
	return rows[0][0].(time.Time), rows[0][1].(time.Time)
}

// counts are the count tables a report of qo reads from st (Counts).
func counts(t *testing.T, st backend.Store, qo query.Options) map[string][][]any {
	t.Helper()
	c, err := backend.Counts(context.Background(), st, qo)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
