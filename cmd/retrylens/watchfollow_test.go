package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/watch"
)

// The watch package's own tests, through what it exports (watch.New, Batch, its
// collector): they live in this test binary, which links DuckDB anyway, so that
// package watch has none and a test run links DuckDB once fewer.

// slug is n written in letters, which no route rule templates: a path of its own.
func slug(n int) string {
	var b []byte
	for {
		b = append(b, byte('a'+n%26))
		n /= 26
		if n == 0 {
			return string(b)
		}
	}
}

// 100,000 distinct endpoints with MaxEndpoints 100: /metrics keeps 100 and "other", the
// overflow is counted, and the series still add up to every attempt.
func TestEndpointCap(t *testing.T) {
	testmain.Long(t, "100,000 lines watched")
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "access.log")
	const n = 100_000
	var b strings.Builder
	for i := range n {
		// every tenth a retry of the one before, on the same path
		attempt, path := 0, i
		if i%10 == 9 {
			attempt, path = 1, i-1
		}
		fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:%02d:%02d +0000] "GET /p/%s HTTP/1.1" 502 2 "-" "c/1" rt=0.012 urt="0.012" us="502" ra="%d" rr="-" rid="r%d" ik="-" retry_after="-" msec=-`+"\n",
			i*59/n, i%60, slug(path), attempt, path)
	}
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := watch.New(watch.Options{Location: filepath.Join(dir, "w.duckdb"), Args: []string{log}, MaxEndpoints: 100, Width: time.Minute,
		Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Batch(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	endpoints := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "retrylens_attempts_total" {
				endpoints[labels["method"]+" "+labels["route"]] = true
				got["attempts "+labels["attempt"]] += m.GetCounter().GetValue()
			}
			if f.GetName() == "retrylens_endpoints_overflow_total" {
				got["overflow"] = m.GetCounter().GetValue()
			}
			if f.GetName() == "retrylens_lines_total" {
				got["lines"] = m.GetCounter().GetValue()
			}
		}
	}
	// the paths: n - n/10 distinct ones, the retries repeating their first attempt's
	want := map[string]float64{"attempts first": n - n/10, "attempts retry": n / 10, "attempts untagged": 0, "overflow": n - n/10 - 100, "lines": n}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if len(endpoints) != 101 || !endpoints["other other"] {
		t.Errorf("%d endpoints in the series, want 100 and other", len(endpoints))
	}
}

// Following a file by its name alone: renamed away by logrotate (to a name no argument
// matches), the file is found again by its inode and read to its end, then the new file
// is; truncated in place (copytruncate), it is read again from its start. Every line
// once: what the batches count is what was written.
func TestFollowByName(t *testing.T) {
	testmain.Long(t, "a log followed through renames in real time")
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "access.log")
	written := 0
	write := func(path string, n int) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for range n {
			fmt.Fprintf(f, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "GET /a/%d HTTP/1.1" 200 2 "-" "c/1" rt=0.01 urt="0.01" us="200" ra="0" rr="-" rid="r%d" ik="-" retry_after="-" msec=-`+"\n",
				written%60, written, written)
			written++
		}
	}
	var said strings.Builder
	w, err := watch.New(watch.Options{Location: filepath.Join(dir, "w.duckdb"), Args: []string{log, filepath.Join(dir, "typo.log")}, MaxEndpoints: 10,
		Width: time.Minute, Log: &said, Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(want int, rotations int64) {
		t.Helper()
		if err := w.Batch(context.Background()); err != nil {
			t.Fatal(err)
		}
		lines, seen := counter(t, w, "retrylens_lines_total"), counter(t, w, "retrylens_rotations_total")
		if lines != float64(want) || seen != float64(rotations) {
			t.Fatalf("%v lines loaded, %v rotations seen; want %d, %d", lines, seen, want, rotations)
		}
	}
	write(log, 10)
	batch(10, 0)
	batch(10, 0) // nothing new
	// nginx writes on to the renamed file until it reopens its log.
	write(log, 5)
	if err := os.Rename(log, filepath.Join(dir, "old-access")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "old-access"), 2)
	write(log, 3)
	batch(20, 1)
	// Truncated in place (copytruncate; the copy is no argument's): the file starts again.
	os.Truncate(log, 0)
	write(log, 6)
	batch(26, 2)
	// The argument that names nothing is said once, not at every batch; each rotation
	// once; and, the lines being older than what the first batch counted, the lines of
	// the later batches as late (5 + 2 + 3 + 6 rows).
	if n := strings.Count(said.String(), "typo.log names no file yet"); n != 1 {
		t.Errorf("the missing argument said %d times, want once:\n%s", n, said.String())
	}
	for _, want := range []string{"rotation: " + log + " (renamed)", "rotation: " + log + " (truncated)"} {
		if n := strings.Count(said.String(), want); n != 1 {
			t.Errorf("%q said %d times, want once:\n%s", want, n, said.String())
		}
	}
	if late := counter(t, w, "retrylens_late_rows_total"); late != 16 || strings.Count(said.String(), "late lines: ") != 2 {
		t.Errorf("%v late rows, want 16 in two batches:\n%s", late, said.String())
	}
}

// served is what w serves on /metrics, by family name.
func served(t *testing.T, w *watch.Watcher) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	page := map[string]*dto.MetricFamily{}
	for _, mf := range families {
		page[mf.GetName()] = mf
	}
	return page
}

// counter is the value of an unlabelled counter w serves.
func counter(t *testing.T, w *watch.Watcher, name string) float64 {
	t.Helper()
	if f := served(t, w)[name]; f != nil && len(f.GetMetric()) == 1 {
		return f.GetMetric()[0].GetCounter().GetValue()
	}
	t.Fatalf("%s not served", name)
	return 0
}

// watch --once runs one batch and says what it did: the incident hour's 126 lines from
// one file, its 80 first attempts and 42 retries final (EXPECTED.md), up to when.
func TestWatchOnceSays(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "once.duckdb")
	_, stderr, code := retrylens(t, nil, "watch", "--once", "--db", db, scenario("incident-hour"))
	if code != 0 || !strings.Contains(stderr, "retrylens watch: loaded 126 lines from 1 file in ") ||
		!strings.Contains(stderr, "; 80 first attempts and 42 retries final, up to ") {
		t.Errorf("watch --once: exit %d:\n%s", code, stderr)
	}
}
