package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// overlapReport is the part of the JSON report the overlapping-attempts test checks.
type overlapReport struct {
	Summary metrics `json:"summary"`
	Hedging struct {
		Requests, Hedges, Wins, Cancelled int64
		P10                               *float64 `json:"delay_p10_ms"`
		P50                               *float64 `json:"delay_p50_ms"`
		P90                               *float64 `json:"delay_p90_ms"`
	} `json:"hedging"`
	Backoff  []backoffRow   `json:"backoff"`
	Findings []findingCount `json:"findings"`
	Loops429 struct {
		Loops        int64 `json:"loops"`
		MaxLength    int64 `json:"max_length"`
		BlindRetries int64 `json:"blind_retries"`
	} `json:"loops_429"`
}

// backoffRow is one attempt number of the backoff profile.
type backoffRow struct {
	Attempt int     `json:"attempt"`
	Count   int64   `json:"count"`
	P10     float64 `json:"p10_ms"`
	P50     float64 `json:"p50_ms"`
	P90     float64 `json:"p90_ms"`
}

// Hedged, cancelled, sequential and throttled attempts
// (testdata/overlapping-attempts/EXPECTED.md, worked out by hand), on the log as written
// (timed to the millisecond) and on the same lines timed to the second, where overlaps
// shorter than a second cannot show.
func TestOverlappingAttempts(t *testing.T) {
	t.Parallel()
	log := scenario("overlapping-attempts")
	summary := metrics{
		Requests: 27, FirstAttempts: 11, Retries: 16,
		Amplification: f(27.0 / 11), RetryRate: f(1), RetrySuccessRate: f(6.0 / 13),
		ExtraLoad: f(16.0 / 27), ActualSuccess: f(8.0 / 27),
		Recovered: 6, Exhausted: 3, EffectiveSuccess: f(8.0 / 11),
		Status5xxRetry: 2, Status429Retry: 3, Abandoned: 10, CancelledFirst: 3, CancelledRetry: 3,
	}
	var want overlapReport
	want.Summary = summary
	want.Hedging.Requests, want.Hedging.Hedges, want.Hedging.Wins, want.Hedging.Cancelled = 6, 8, 3, 6
	want.Hedging.P10, want.Hedging.P50, want.Hedging.P90 = f(20.9), f(60), f(60)
	want.Backoff = []backoffRow{{1, 5, 8, 20, 20}, {2, 3, 19, 19, 19.8}}
	want.Findings = []findingCount{{"duplicate_write_risk", 2, 4}, {"false_success", 2, 2}, {"non_retryable_retry", 1, 1}, {"possible_duplicate_write", 2, 2}}
	want.Loops429.Loops, want.Loops429.MaxLength, want.Loops429.BlindRetries = 1, 2, 2

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	seconds := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(seconds, regexp.MustCompile(`msec=[0-9.]+`).ReplaceAll(b, []byte("msec=-")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same log a little later, so that h1's winning hedge is logged on a whole second
	// (…201.000): one line in a thousand of a log timed to the millisecond is, and that
	// alone does not make its request's clock the second.
	onSecond := filepath.Join(t.TempDir(), "access.log")
	shifted := regexp.MustCompile(`msec=([0-9]+)\.([0-9]{3})`).ReplaceAllFunc(b, func(m []byte) []byte {
		var sec, ms int64
		if _, err := fmt.Sscanf(string(m), "msec=%d.%d", &sec, &ms); err != nil {
			t.Fatal(err)
		}
		at := sec*1000 + ms + 926
		return fmt.Appendf(nil, "msec=%d.%03d", at/1000, at%1000)
	})
	if !bytes.Contains(shifted, []byte(`rid="h1" ik="-" retry_after="-" msec=1796119201.000`)) {
		t.Fatal("h1's hedge is not on a whole second")
	}
	if err := os.WriteFile(onSecond, shifted, 0o644); err != nil {
		t.Fatal(err)
	}
	wantSeconds := want
	wantSeconds.Summary.RetrySuccessRate = f(6.0 / 16)
	wantSeconds.Summary.CancelledFirst, wantSeconds.Summary.CancelledRetry = 0, 0
	wantSeconds.Hedging.Requests, wantSeconds.Hedging.Hedges, wantSeconds.Hedging.Wins, wantSeconds.Hedging.Cancelled = 0, 0, 0, 0
	wantSeconds.Hedging.P10, wantSeconds.Hedging.P50, wantSeconds.Hedging.P90 = nil, nil, nil
	wantSeconds.Backoff = nil // gaps within the second: not compared
	wantSeconds.Findings = []findingCount{{"duplicate_write_risk", 2, 4}, {"false_success", 2, 2}, {"non_retryable_retry", 2, 2}, {"possible_duplicate_write", 2, 2}}

	for _, tc := range []struct {
		name, path string
		want       overlapReport
	}{{"milliseconds", log, want}, {"a line on a whole second", onSecond, want}, {"seconds", seconds, wantSeconds}} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", tc.path)
			if code != 0 {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			var got overlapReport
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatal(err)
			}
			got.Summary.Verdict = ""
			if tc.want.Backoff == nil {
				got.Backoff = nil
			}
			if diff := cmp.Diff(tc.want, got, approx, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Two whole hedged requests that nginx logged in one event loop pass on a whole second, in
// a log timed to the millisecond (testdata/overlapping-attempts/EXPECTED.md,
// one-millisecond.log, from the lab's hedged run): their hedges are hedges. Read one line
// at a time, such lines were a clock of seconds, and the lab's run failed now and then.
func TestHedgesOnAWholeSecond(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := retrylens(t, nil, "report", "--format", "json",
		filepath.Join(filepath.Dir(scenario("overlapping-attempts")), "one-millisecond.log"))
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var got overlapReport
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	h := got.Hedging
	if h.Requests != 3 || h.Hedges != 5 || h.Wins != 3 || h.Cancelled != 5 {
		t.Errorf("hedging: %d requests, %d hedges, %d won, %d cancelled; want 3, 5, 3, 5", h.Requests, h.Hedges, h.Wins, h.Cancelled)
	}
	if s := got.Summary; s.Requests != 9 || s.FirstAttempts != 4 || s.Retries != 5 || s.EffectiveSuccess == nil || *s.EffectiveSuccess != 1 {
		t.Errorf("summary: %d lines, %d first attempts, %d retries, effective success %v; want 9, 4, 5, 1", s.Requests, s.FirstAttempts, s.Retries, s.EffectiveSuccess)
	}
}
