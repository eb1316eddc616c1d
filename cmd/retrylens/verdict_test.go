package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// verdictReport is what the verdict tests read of a JSON report.
type verdictReport struct {
	Summary   verdictRow   `json:"summary"`
	Windows   []verdictRow `json:"windows"`
	Endpoints []verdictRow `json:"endpoints"`
	Alerts    []struct {
		Rule  string `json:"rule"`
		Start string `json:"start"`
		End   string `json:"end"`
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

// stormLog writes a log of perSecond requests a second for seconds from 14:00:00 on
// 2026-11-29 to route, the k-th of second s answered statuses(s, k) in turn (its attempts
// 100 ms apart within the second; nil: one 200), and returns its path.
func stormLog(t *testing.T, route string, seconds, perSecond int, statuses func(s, k int) []int) string {
	t.Helper()
	var b strings.Builder
	id := 0
	for s := range seconds {
		for k := range perSecond {
			id++
			st := statuses(s, k)
			if st == nil {
				st = []int{200}
			}
			for attempt, status := range st {
				ms := min(k*1000/perSecond+100*attempt, 999) // within its second
				fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:%02d:%02d +0000] "GET %s HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="r%d" ik="-" retry_after="-" msec=%d.%03d`+"\n",
					s/60, s%60, route, status, status, attempt, id, 1795960800+s, ms)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "storm.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A finer width never contradicts a coarser one with the same evidence, on every sample
// and two storms made here (widthsAgree). The 40 s storm: two requests a second for two
// minutes, those of seconds 10–49 failing twice before a 200 (80 of the first minute's
// 120 requests, 160 retries, amplification 2.33x: retry_storm fires on that minute). The
// straddling one, a minute of storm across two minutes that neither minute fires
// retry_storm on: ten requests a second, eight in ten of seconds 30–89 retried once;
// each storm window of 10 s holds 100 first attempts and 80 retries (1.8x) for six
// windows (a minute, retry_storm's sustain), each minute 600 and 240 (1.4x): at 10s
// retry_storm fires on the windows alone, and the endpoint's row must say so as
// --endpoint does.
func TestWidthsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("20 reports")
	}
	t.Parallel()
	storm := stormLog(t, "/api/x", 120, 2, func(s, _ int) []int {
		if s >= 10 && s < 50 {
			return []int{503, 503, 200}
		}
		return nil
	})
	straddle := stormLog(t, "/api/y", 120, 10, func(s, k int) []int {
		if s >= 30 && s < 90 && k < 8 {
			return []int{503, 200}
		}
		return nil
	})
	logs := map[string]string{"storm40": storm, "straddle": straddle}
	for _, name := range []string{"incident-hour", "quiet-hour", "keys-that-lie", "untagged-firsts", "overlapping-attempts"} {
		logs[name] = scenario(name)
	}
	for name, log := range logs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			at := widthsAgree(t, log, "retry")
			if name == "storm40" && len(at["1m"].Alerts) == 0 {
				t.Fatal("the 40 s storm fires nothing at 1m")
			}
			if name == "straddle" {
				var rules []string
				for _, a := range at["10s"].Alerts {
					rules = append(rules, a.Rule)
				}
				if !slices.Contains(rules, "retry_storm") {
					t.Fatalf("the straddling storm: alerts at 10s %v, want retry_storm", rules)
				}
				for _, a := range at["1m"].Alerts {
					if a.Rule == "retry_storm" {
						t.Fatalf("the straddling storm fires retry_storm at 1m: %+v", a)
					}
				}
			}
		})
	}
}

// widthsAgree reports log (in format) at 1h, 1m, 10s and 1s and checks that a finer
// width never contradicts a coarser one with the same evidence: each alert at 1m is met
// by an alert of the same rule overlapping it at 10s and at 1s; a range fuelling at 1h or
// 1m is fuelling at 10s and 1s; and every endpoint row reads, at 1m, 10s and 1s, what
// --endpoint reads of its range at that width. It returns the reports by width.
func widthsAgree(t *testing.T, log, format string) map[string]verdictReport {
	t.Helper()
	at := map[string]verdictReport{}
	for _, width := range []string{"1h", "1m", "10s", "1s"} {
		at[width] = verdictJSON(t, "--log-format", format, "--window", width, log)
	}
	for _, a := range at["1m"].Alerts {
		for _, fine := range []string{"10s", "1s"} {
			met := false
			for _, f := range at[fine].Alerts {
				met = met || (f.Rule == a.Rule && f.Start < a.End && f.End > a.Start)
			}
			if !met {
				t.Errorf("%s [%s, %s) at 1m has no alert overlapping it at %s: %+v", a.Rule, a.Start, a.End, fine, at[fine].Alerts)
			}
		}
	}
	for _, coarse := range []string{"1h", "1m"} {
		for _, fine := range []string{"10s", "1s"} {
			if at[coarse].Summary.Verdict == "fuelling" && at[fine].Summary.Verdict != "fuelling" {
				t.Errorf("fuelling at %s, %q at %s", coarse, at[fine].Summary.Verdict, fine)
			}
		}
	}
	for _, width := range []string{"1m", "10s", "1s"} {
		for _, e := range at[width].Endpoints {
			ep := verdictJSON(t, "--log-format", format, "--window", width, "--endpoint", e.Method+" "+e.Route, log)
			if ep.Summary.Verdict != e.Verdict || !slices.Equal(ep.Summary.Fired, e.Fired) {
				t.Errorf("--window %s: the row of %s %s reads %q %v, --endpoint %q %v", width, e.Method, e.Route, e.Verdict, e.Fired, ep.Summary.Verdict, ep.Summary.Fired)
			}
		}
	}
	return at
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
