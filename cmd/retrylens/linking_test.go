package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/retrylens/retrylens/internal/testmain"
)

// linkingReport is the part of the JSON report the hand-worked linking logs check.
type linkingReport struct {
	Summary metrics `json:"summary"`
	Linking struct {
		IdempotencyKey   int64 `json:"idempotency_key"`
		RequestID        int64 `json:"request_id"`
		Heuristic        int64 `json:"heuristic"`
		Retries          int64 `json:"retries"`
		Orphans          int64 `json:"orphans"`
		HeuristicRetries int64 `json:"heuristic_retries"`
		UntaggedFirsts   int64 `json:"untagged_firsts"`
	} `json:"linking"`
	Findings []findingCount `json:"findings"`
}

// findingCount is a finding's kind and counts.
type findingCount struct {
	Kind     string `json:"kind"`
	Count    int64  `json:"count"`
	Attempts int64  `json:"attempts"`
}

// reportJSON runs report --format json with args and decodes it.
func reportJSON(t *testing.T, args ...string) linkingReport {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("report %v: exit %d: %s", args, code, stderr)
	}
	var r linkingReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout)
	}
	r.Summary.Verdict = "" // the verdicts have tests of their own
	return r
}

// Lines without the attempt header whose key a tagged retry carries are first attempts
// (testdata/untagged-firsts/EXPECTED.md, worked out by hand), whether the retries arrive in
// the same load or a later one (the cache's update renumbers the old lines).
func TestUntaggedFirstAttempts(t *testing.T) {
	testmain.Long(t, "loads a log in parts")
	t.Parallel()
	var want linkingReport
	want.Summary = metrics{
		Requests: 15, Untagged: 2, FirstAttempts: 8, Retries: 5,
		Amplification: f(13.0 / 8), RetryRate: f(4.0 / 8), RetrySuccessRate: f(3.0 / 5),
		ExtraLoad: f(5.0 / 13), ActualSuccess: f(7.0 / 13),
		Recovered: 3, Exhausted: 1, EffectiveSuccess: f(7.0 / 8),
		Status5xxFirst: 4, Status5xxRetry: 2,
	}
	want.Linking.RequestID, want.Linking.IdempotencyKey = 7, 1
	want.Linking.Retries, want.Linking.UntaggedFirsts = 5, 3

	log := scenario("untagged-firsts")
	if diff := cmp.Diff(want, reportJSON(t, log), approx, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("one file (-want +got):\n%s", diff)
	}
	// The untagged lines first, the tagged ones in a second load.
	twoLoads(t, log, want, func(l string) bool { return strings.Contains(l, ` ra="-" `) })
}

// twoLoads loads the lines of log that first picks, then the others, into one database,
// and requires the report to be want (the cache's update links the old lines with the new
// ones) and verify to find the cache equal to the rows.
func twoLoads(t *testing.T, log string, want linkingReport, first func(line string) bool) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var one, two []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if first(l) {
			one = append(one, l)
		} else {
			two = append(two, l)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "r.duckdb")
	for i, part := range [][]string{one, two} {
		path := filepath.Join(dir, fmt.Sprintf("part%d.log", i+1))
		if err := os.WriteFile(path, []byte(strings.Join(part, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, path); code != 0 {
			t.Fatalf("ingest %s: exit %d: %s", path, code, stderr)
		}
	}
	if diff := cmp.Diff(want, reportJSON(t, "--db", db), approx, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("two loads (-want +got):\n%s", diff)
	}
	if stdout, stderr, code := retrylens(t, nil, "verify", "--db", db); code != 0 {
		t.Errorf("verify after the second load: exit %d: %s%s", code, stdout, stderr)
	}
}

// Keys that lie (testdata/keys-that-lie/EXPECTED.md, worked out by hand): a request id
// three requests share links them by client, method and URI, a header stuck at 1 is
// numbered by place, and an idempotency key sent from the second attempt on keeps the
// request whole; the report names the first two.
func TestKeysThatLie(t *testing.T) {
	testmain.Long(t, "loads three logs in parts")
	t.Parallel()
	var want linkingReport
	want.Summary = metrics{
		Requests: 13, FirstAttempts: 8, Retries: 5,
		Amplification: f(13.0 / 8), RetryRate: f(4.0 / 8), RetrySuccessRate: f(3.0 / 5),
		ExtraLoad: f(5.0 / 13), ActualSuccess: f(7.0 / 13),
		Recovered: 3, Exhausted: 1, EffectiveSuccess: f(7.0 / 8),
		Status5xxFirst: 4, Status5xxRetry: 2,
	}
	want.Linking.RequestID, want.Linking.IdempotencyKey, want.Linking.Heuristic = 4, 1, 3
	want.Linking.Retries, want.Linking.HeuristicRetries = 5, 2
	want.Findings = []findingCount{{"attempt_number_mismatch", 1, 1}, {"reused_key", 2, 2}}
	log := scenario("keys-that-lie")
	if diff := cmp.Diff(want, reportJSON(t, log), approx, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// U1, S's first two lines and K's first in one load, the rest in the next: the key
	// turns out reused, S's number repeats and K's key arrives after the cache was built.
	for _, split := range []func(string) bool{
		func(l string) bool {
			return regexp.MustCompile(`/cart/1 |"s1"|rid="k1" ik="-"`).MatchString(l) && !strings.Contains(l, ":33 ")
		},
		func(l string) bool { return strings.Contains(l, "/cart/") },           // the reused key's lines first
		func(l string) bool { return !strings.Contains(l, `rid="k1" ik="-"`) }, // K's keyed retry before its first attempt
	} {
		twoLoads(t, log, want, split)
	}
}

// A key with exactly two first attempts is reused too (keys-that-lie's has three): two
// requests that share the request id dup link by client, method and URI, worked out by
// hand: /x/1 fails and recovers on its retry, /x/2 succeeds at once.
func TestKeyReusedTwice(t *testing.T) {
	t.Parallel()
	const line = `%s - - [30/Nov/2026:12:00:0%d +0000] "GET %s HTTP/1.1" %d 2 "-" "shop-web/3.0" rt=0.020 urt="0.020" us="%[4]d" ra="%d" rr="-" rid="dup" ik="-" retry_after="-" msec=179604000%[2]d.500` + "\n"
	log := filepath.Join(t.TempDir(), "access.log")
	text := fmt.Sprintf(line, "10.3.0.1", 0, "/api/x/1", 503, 0) + fmt.Sprintf(line, "10.3.0.1", 1, "/api/x/1", 200, 1) +
		fmt.Sprintf(line, "10.3.0.2", 5, "/api/x/2", 200, 0)
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var want linkingReport
	want.Summary = metrics{
		Requests: 3, FirstAttempts: 2, Retries: 1,
		Amplification: f(3.0 / 2), RetryRate: f(1.0 / 2), RetrySuccessRate: f(1.0 / 1),
		ExtraLoad: f(1.0 / 3), ActualSuccess: f(2.0 / 3),
		Recovered: 1, EffectiveSuccess: f(2.0 / 2), Status5xxFirst: 1,
	}
	want.Linking.Heuristic, want.Linking.Retries, want.Linking.HeuristicRetries = 2, 1, 1
	want.Findings = []findingCount{{"reused_key", 1, 1}}
	if diff := cmp.Diff(want, reportJSON(t, log), approx, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Concurrent calls of one keyless client to one URI (openai-go's chat completions): the
// heuristic leaves a failure nobody retried alone and gives each retry the chain of the
// call that failed first, as the client did. Worked by hand, one client, POST
// /v1/chat/completions, no key:
//
//	s  404 ending at :00.000, never retried
//	a  429 (Retry-After: 1) ending at :10.000, retried at :11.050 (200)
//	b  429 (Retry-After: 1) ending at :10.500, retried at :11.550 (200)
//
// Three logical requests; no premature retry (each waited its second); no retry of a
// non-retryable answer. The latest open chain would have given a's retry b's chain
// (premature: 11.05 < 10.5 + 1); the oldest, s's 404 (non_retryable_retry).
func TestConcurrentKeylessCalls(t *testing.T) {
	t.Parallel()
	const line = `10.4.0.1 - - [30/Nov/2026:12:00:%02d +0000] "POST /v1/chat/completions HTTP/1.1" %d 2 "-" "OpenAI/Go 3.0" rt=0.010 urt="0.010" us="%[2]d" ra="%d" rr="-" rid="-" ik="-" retry_after="%s" msec=%.3f` + "\n"
	at := func(sec float64) (int, float64) { return int(sec), 1796040000 + sec }
	var b strings.Builder
	for _, l := range []struct {
		end     float64
		status  int
		attempt int
		ra      string
	}{{0, 404, 0, "-"}, {10, 429, 0, "1"}, {10.5, 429, 0, "1"}, {11.06, 200, 1, "-"}, {11.56, 200, 1, "-"}} {
		s, msec := at(l.end)
		fmt.Fprintf(&b, line, s, l.status, l.attempt, l.ra, msec)
	}
	log := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", log)
	var r struct {
		labReport
		Linking struct{ Heuristic int64 } `json:"linking"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	nonRetryable := int64(0)
	for _, f := range r.Findings {
		if f.Kind == "non_retryable_retry" {
			nonRetryable = f.Count
		}
	}
	if r.Linking.Heuristic != 3 || r.Loops429.PrematureRetries != 0 || nonRetryable != 0 || r.Summary.Recovered != 2 {
		t.Errorf("%d logical requests, %d premature, %d non-retryable retries, %d recovered; want 3, 0, 0, 2",
			r.Linking.Heuristic, r.Loops429.PrematureRetries, nonRetryable, r.Summary.Recovered)
	}
}
