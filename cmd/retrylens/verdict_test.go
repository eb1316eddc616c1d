package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// verdictReport is what the verdict tests read of a JSON report.
type verdictReport struct {
	Summary   verdictRow   `json:"summary"`
	Windows   []verdictRow `json:"windows"`
	Endpoints []verdictRow `json:"endpoints"`
	Alerts    []struct {
		Rule string `json:"rule"`
	} `json:"alerts"`
}

type verdictRow struct {
	Start         string   `json:"start"`
	Method        string   `json:"method"`
	Route         string   `json:"route"`
	Requests      int64    `json:"requests"`
	FirstAttempts int64    `json:"first_attempts"`
	Retries       int64    `json:"retries"`
	Verdict       string   `json:"verdict"`
	Fired         []string `json:"alerts"`
}

func verdictJSON(t *testing.T, args ...string) verdictReport {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json"}, args...)...)
	var r verdictReport
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report %v: exit %d: %s", args, code, stderr)
	}
	return r
}

// checkRow holds a row to docs/metrics.md's verdict, written out here: fuelling exactly
// when an alert rule fired in it; with fewer than 3 first attempts (the default rules'
// least evidence), insufficient data or no attempt data, never quiet, rescuing or
// fuelling by its figures.
func checkRow(t *testing.T, what string, r verdictRow) {
	t.Helper()
	if (r.Verdict == "fuelling") != (len(r.Fired) > 0) {
		t.Errorf("%s: verdict %q with alerts %v", what, r.Verdict, r.Fired)
	}
	if r.FirstAttempts < 3 && len(r.Fired) == 0 && r.Verdict != "insufficient data" && r.Verdict != "no attempt data" {
		t.Errorf("%s: %d first attempts and %d retries read %q", what, r.FirstAttempts, r.Retries, r.Verdict)
	}
}

// One verdict rule at every level, for every sample and window width: the range is
// fuelling exactly when one of its windows is, and when an alert fired; every row follows
// checkRow.
func TestRangeAndWindowVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("30 reports")
	}
	t.Parallel()
	for _, name := range []string{"incident-hour", "quiet-hour", "keys-that-lie", "untagged-firsts", "overlapping-attempts"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := ingested(t, name)
			for _, width := range []string{"10s", "1m", "5m", "10m", "1h", "24h"} {
				r := verdictJSON(t, "--db", db, "--window", width)
				fuelling := false
				for _, w := range r.Windows {
					checkRow(t, "--window "+width+" window "+w.Start, w)
					fuelling = fuelling || w.Verdict == "fuelling"
				}
				checkRow(t, "--window "+width+" range", r.Summary)
				if (r.Summary.Verdict == "fuelling") != fuelling || fuelling != (len(r.Alerts) > 0) {
					t.Errorf("--window %s: the range reads %q, %d alerts, a window fuelling: %v", width, r.Summary.Verdict, len(r.Alerts), fuelling)
				}
				for _, e := range r.Endpoints {
					checkRow(t, "--window "+width+" endpoint "+e.Method+" "+e.Route, e)
				}
			}
		})
	}
}

// An endpoint's row and the range of --endpoint are the same rows: the same counts, the
// same verdict, on a generated log of many routes (lab.Generate, as bench/genlog writes
// it). Every endpoint row is checked against checkRow; the range of --endpoint is asked
// for up to three endpoints of each verdict.
func TestEndpointRowIsItsRange(t *testing.T) {
	if testing.Short() {
		t.Skip("a generated log and a report per endpoint")
	}
	t.Parallel()
	log := generated(t, 30000, 3)
	db := filepath.Join(t.TempDir(), "g.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db, "--log-format", "retry", log); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	all := verdictJSON(t, "--db", db)
	asked := map[string]int{}
	for _, e := range all.Endpoints {
		key := e.Method + " " + e.Route
		checkRow(t, "endpoint "+key, e)
		if asked[e.Verdict] == 3 {
			continue
		}
		asked[e.Verdict]++
		r := verdictJSON(t, "--db", db, "--endpoint", key)
		got := r.Summary
		got.Method, got.Route = e.Method, e.Route
		if got.Requests != e.Requests || got.FirstAttempts != e.FirstAttempts || got.Retries != e.Retries || got.Verdict != e.Verdict {
			t.Errorf("endpoint %s: its row %+v, its range %+v", key, e, got)
		}
	}
	if len(asked) < 3 {
		t.Errorf("the generated log's endpoints have verdicts %v: want at least three kinds", asked)
	}
	t.Logf("%d endpoints, ranges asked: %v", len(all.Endpoints), asked)
}
