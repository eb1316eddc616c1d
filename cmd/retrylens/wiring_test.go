package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
)

// errStop ends a command at the fake store, before anything would need rows.
var errStop = errors.New("stop here")

// fakeStore records what a command asked of it, and says what it is told to say; Rows,
// Run and Verify stop the command. It tests the wiring from flags to the store without
// a database.
type fakeStore struct {
	location string
	mode     backend.Mode
	health   backend.Health
	qo       *query.Options
	every    bool
	mu       sync.Mutex // a report asks for its health and its rows at once
	asked    []string
}

func (f *fakeStore) ask(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, what)
}

func (f *fakeStore) Ingest(context.Context, []string, ingest.Options, backend.Events) (backend.Ingested, error) {
	f.ask("ingest")
	return backend.Ingested{}, errStop
}
func (f *fakeStore) Health(context.Context) backend.Health {
	f.ask("health")
	return f.health
}
func (f *fakeStore) Rows(_ context.Context, qo *query.Options, _ func(string) string, every bool) (*sql.DB, error) {
	f.ask("rows")
	q := *qo
	f.qo, f.every = &q, every
	return nil, errStop
}
func (f *fakeStore) Verify(context.Context, bool) (backend.Verified, error) {
	f.ask("verify")
	return backend.Verified{}, errStop
}
func (f *fakeStore) Run(context.Context, string) ([]string, [][]any, error) {
	f.ask("run")
	return nil, nil, errStop
}
func (f *fakeStore) Close() error   { return nil }
func (f *fakeStore) String() string { return f.location }

// withFake runs retrylens with a fake store (and $RETRYLENS_DB set to env.duckdb).
func withFake(t *testing.T, health backend.Health, args ...string) (*fakeStore, string) {
	t.Helper()
	f := &fakeStore{health: health}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, now: func() time.Time { return fixedNow },
		getenv: func(k string) string {
			if k == "RETRYLENS_DB" {
				return "env.duckdb"
			}
			return ""
		},
		open: func(_ context.Context, location string, o backend.Options) (backend.Store, error) {
			f.location, f.mode = location, o.Mode
			return f, nil
		},
	}
	if code := e.run(args); code != exitError || !strings.Contains(errb.String(), errStop.Error()) {
		t.Fatalf("%v: exit %d, want %d from the fake store: %s", args, code, exitError, errb.String())
	}
	return f, errb.String()
}

// Each command opens the store --db (else $RETRYLENS_DB) names, in the mode it needs, and
// asks it for what it should (a report its health and its rows at once, in no order).
func TestCommandsOpenTheStore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args     []string
		location string
		mode     backend.Mode
		asked    []string
	}{
		{[]string{"report"}, "env.duckdb", backend.ReadOnly, []string{"health", "rows"}},
		{[]string{"check", "--db", "x.duckdb"}, "x.duckdb", backend.ReadOnly, []string{"health", "rows"}},
		{[]string{"budget", "--db", "clickhouse://h:9000/d?cluster=c"}, "clickhouse://h:9000/d?cluster=c", backend.ReadOnly, []string{"health", "rows"}},
		{[]string{"query", "SELECT 1"}, "env.duckdb", backend.ReadOnly, []string{"run"}},
		{[]string{"query", "--write", "DELETE FROM rejects"}, "env.duckdb", backend.ReadWrite, []string{"run"}},
		{[]string{"verify"}, "env.duckdb", backend.ReadOnly, []string{"verify"}},
		{[]string{"verify", "--repair"}, "env.duckdb", backend.ReadWrite, []string{"verify"}},
		{[]string{"ingest", "--db", "y.duckdb", "../../testdata/quiet-hour/access.log"}, "y.duckdb", backend.Create, []string{"ingest"}},
	} {
		f, _ := withFake(t, backend.Health{}, c.args...)
		if f.location != c.location || f.mode != c.mode || !slices.Equal(slices.Sorted(slices.Values(f.asked)), c.asked) {
			t.Errorf("%v: opened %q in mode %d, asked %v; want %q, mode %d, %v", c.args, f.location, f.mode, f.asked, c.location, c.mode, c.asked)
		}
	}
}

// The row flags of report, check and budget reach the store as the rows to select.
func TestRowFlagsReachTheStore(t *testing.T) {
	t.Parallel()
	f, _ := withFake(t, backend.Health{}, "report", "--since", "2026-11-29 10:00", "--until", "29/Nov/2026:11:30:00 +0100",
		"--tz", "Europe/Paris", "--endpoint", "GET /api/orders/:id", "--max-gap", "5s", "--infer-attempts", "--throttle-status", "429,503")
	want := query.Options{Since: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC),
		Route: "GET /api/orders/:id", MaxGap: 5 * time.Second, InferAttempts: true, Throttle: []int{429, 503}}
	got := *f.qo
	got.Rules = nil // the defaults: TestRulesDriveVerdicts reads them
	if !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) || got.Route != want.Route || got.MaxGap != want.MaxGap ||
		!got.InferAttempts || !slices.Equal(got.Throttle, want.Throttle) || f.every {
		t.Errorf("report's rows: %+v, every %v; want %+v", got, f.every, want)
	}
	if f, _ := withFake(t, backend.Health{}, "budget", "--max-gap", "2s"); f.qo.MaxGap != 2*time.Second || !f.every {
		t.Errorf("budget: max gap %v, every row %v; want 2s, every row (a replay)", f.qo.MaxGap, f.every)
	}
}

// What the store says of itself is said beside the figures, on stderr.
func TestHealthIsSaid(t *testing.T) {
	t.Parallel()
	_, stderr := withFake(t, backend.Health{Rejected: 5, Lines: 40, Kept: 5, Repeats: 3, Mismatch: "1 unregistered load"}, "check")
	for _, want := range []string{
		"ingest rejected 5 of the 40 lines loaded (12.5%)",
		"'SELECT * FROM reject_counts', the 5 kept in full with file and line: 'SELECT * FROM rejects'",
		"3 rows repeat rows of another load",
		"do not match its registry (1 unregistered load)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %q in:\n%s", want, stderr)
		}
	}
	if _, stderr := withFake(t, backend.Health{Lines: 40}, "check"); strings.Contains(stderr, "warning") || strings.Contains(stderr, "note") {
		t.Errorf("a healthy store gets a word:\n%s", stderr)
	}
	// a few rejected lines are the postmortem's note, not every check's and budget's
	few := backend.Health{Rejected: 1, Lines: 1000, Kept: 1}
	for _, cmd := range []string{"check", "budget"} {
		if _, stderr := withFake(t, few, cmd); strings.Contains(stderr, "note") {
			t.Errorf("%s: 0.1%% rejected gets a note:\n%s", cmd, stderr)
		}
	}
	if _, stderr := withFake(t, few, "report"); !strings.Contains(stderr, "ingest rejected 1 of the 1000 lines loaded (0.1%)") {
		t.Errorf("report: no note of the rejected line:\n%s", stderr)
	}
}
