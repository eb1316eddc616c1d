package budget

import (
	"errors"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/retrylens/retrylens/query"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// at is an attempt: key, number, start and end in ms, status, Retry-After.
func at(key string, n, start, end, status int, retryAfter string) query.Attempt {
	return query.Attempt{Key: key, N: n, Start: ms(start), End: ms(end), Status: status, RetryAfter: retryAfter}
}

func trace(as ...query.Attempt) []query.Attempt {
	sort.SliceStable(as, func(i, j int) bool { return as[i].Start.Before(as[j].Start) })
	return as
}

// Each trace's expected figures are worked out in its comments.
func TestModels(t *testing.T) {
	tests := []struct {
		name          string
		model         Model
		attempts      []query.Attempt
		allow, denied int
		lost          int
	}{
		{
			// a: 502, 502, 200. A cap of 2 attempts denies the third, the one that rescued a.
			name: "cap", model: &Cap{Max: 2},
			attempts: trace(at("a", 0, 0, 10, 502, ""), at("a", 1, 20, 30, 502, ""), at("a", 2, 40, 50, 200, "")),
			allow:    1, denied: 1, lost: 1,
		},
		{
			// b: 429 with Retry-After 1 (ends at 100 ms), retried at 500 ms: denied, and b's
			// next attempt is then not sent either. c: retried at 1200 ms, after 1100: allowed.
			name: "retry-after", model: RetryAfter{},
			attempts: trace(at("b", 0, 0, 100, 429, "1"), at("b", 1, 500, 510, 429, ""), at("b", 2, 2000, 2010, 200, ""),
				at("c", 0, 0, 100, 429, "1"), at("c", 1, 1200, 1210, 200, "")),
			allow: 1, denied: 2, lost: 1,
		},
		{
			// Ratio 0.5, no floor, 10 s: first attempts at 0, 1, 2, 3 s, retries half a second
			// later, each withdrawing a whole one. 0.5 s: 0 + 1 ≤ 0.5 × 1: no. 1.5 s: 1 ≤ 1.0:
			// yes. 2.5 s: 2 ≤ 1.5: no. 3.5 s: 2 ≤ 2: yes. At 20 s the window holds r5 alone:
			// 1 ≤ 0.5: no.
			name: "ratio with ttl", model: &Ratio{Label: "ratio", Ratio: 0.5, TTL: 10 * time.Second},
			attempts: trace(
				at("r1", 0, 0, 10, 502, ""), at("r1", 1, 500, 510, 200, ""),
				at("r2", 0, 1000, 1010, 502, ""), at("r2", 1, 1500, 1510, 200, ""),
				at("r3", 0, 2000, 2010, 502, ""), at("r3", 1, 2500, 2510, 200, ""),
				at("r4", 0, 3000, 3010, 502, ""), at("r4", 1, 3500, 3510, 200, ""),
				at("r5", 0, 20000, 20010, 502, ""), at("r5", 1, 20500, 20510, 200, "")),
			allow: 2, denied: 3, lost: 3,
		},
		{
			// Tokens 4, +0.5 a success, retries while > 2. By 100 ms: x0 and y0 failed, w0
			// succeeded: 4 − 2 + 0.5 = 2.5 > 2, x1 goes; it fails at 150: 1.5, y1 at 200 does not.
			name: "grpc", model: &GRPC{MaxTokens: 4, TokenRatio: 0.5},
			attempts: trace(at("x", 0, 0, 10, 502, ""), at("y", 0, 0, 20, 502, ""), at("w", 0, 0, 30, 200, ""),
				at("x", 1, 100, 150, 502, ""), at("y", 1, 200, 210, 200, "")),
			allow: 1, denied: 1, lost: 1,
		},
		{
			// Quota 10, retry 5, after a timeout 10, success refunds the retry or adds 1.
			// p1 costs 5 and is refunded (10). q1 follows a timeout: 10 (0 left), fails.
			// r1 needs 5: denied. s0 succeeds: 1.
			name: "aws", model: &AWS{Quota: 10, Cost: 5, TimeoutCost: 10},
			attempts: trace(at("p", 0, 0, 10, 502, ""), at("p", 1, 20, 30, 200, ""),
				at("q", 0, 0, 40, 0, ""), at("q", 1, 50, 60, 502, ""),
				at("r", 0, 0, 70, 502, ""), at("r", 1, 80, 90, 200, ""), at("s", 0, 85, 90, 200, "")),
			allow: 2, denied: 1, lost: 1,
		},
		{
			// Retries in flight < max(1, 0.5 × requests in flight). f1 at 20: e0 in flight,
			// 0 < max(1, 0.5): yes. g1 at 50: e0 and f1 in flight, 1 < max(1, 1): no.
			name: "envoy", model: &Envoy{Percent: 0.5, MinConcurrent: 1},
			attempts: trace(at("e", 0, 0, 1000, 200, ""), at("f", 0, 0, 10, 502, ""), at("f", 1, 20, 1000, 200, ""),
				at("g", 0, 30, 40, 502, ""), at("g", 1, 50, 60, 200, "")),
			allow: 1, denied: 1, lost: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Replay(tt.attempts, tt.model, 0)
			if r.Allowed != tt.allow || r.Denied != tt.denied || r.LostRecoveries != tt.lost {
				t.Errorf("allowed %d, denied %d, lost %d; want %d, %d, %d (%+v)", r.Allowed, r.Denied, r.LostRecoveries, tt.allow, tt.denied, tt.lost, r)
			}
			if want := float64(r.FirstAttempts+r.Allowed) / float64(r.FirstAttempts); r.AmplificationAfter != want {
				t.Errorf("amplification after %v, want %v", r.AmplificationAfter, want)
			}
		})
	}
}

// Windows split the figures by start time: the ratio trace in 2 s windows holds r1 and
// r2 (two first attempts, two retries, one denied: r1's at 0.5 s) then r3 and r4 (the
// same), then r5 alone (denied: alone in its 10 s, it has earned half a retry).
func TestWindows(t *testing.T) {
	attempts := trace(
		at("r1", 0, 0, 10, 502, ""), at("r1", 1, 500, 510, 200, ""),
		at("r2", 0, 1000, 1010, 502, ""), at("r2", 1, 1500, 1510, 200, ""),
		at("r3", 0, 2000, 2010, 502, ""), at("r3", 1, 2500, 2510, 200, ""),
		at("r4", 0, 3000, 3010, 502, ""), at("r4", 1, 3500, 3510, 200, ""),
		at("r5", 0, 20000, 20010, 502, ""), at("r5", 1, 20500, 20510, 200, ""))
	r := Replay(attempts, &Ratio{Label: "ratio", Ratio: 0.5, TTL: 10 * time.Second}, 2*time.Second)
	want := []Window{
		{Start: ms(0), FirstAttempts: 2, Retries: 2, Allowed: 1, Denied: 1},
		{Start: ms(2000), FirstAttempts: 2, Retries: 2, Allowed: 1, Denied: 1},
		{Start: ms(20000), FirstAttempts: 1, Retries: 1, Denied: 1},
	}
	if len(r.Windows) != len(want) {
		t.Fatalf("windows %+v", r.Windows)
	}
	for i := range want {
		if r.Windows[i] != want[i] {
			t.Errorf("window %d: %+v, want %+v", i, r.Windows[i], want[i])
		}
	}
}

// The defaults are the published ones and pass; each parameter out of its range is named
// by its flag.
func TestParamsValidate(t *testing.T) {
	if err := DefaultParams.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if n := len(DefaultParams.Models()); n != len(Names) {
		t.Fatalf("%d models for %d names", n, len(Names))
	}
	for _, tc := range []struct {
		flag string
		set  func(p *Params)
	}{
		{"ttl", func(p *Params) { p.TTL = 0 }},
		{"max-tokens", func(p *Params) { p.MaxTokens = 0 }},
		{"max-attempts", func(p *Params) { p.Attempts = 0 }},
		{"envoy-percent", func(p *Params) { p.EnvoyPct = 1.5 }},
		{"ratio", func(p *Params) { p.Ratio = math.NaN() }},
		{"min-per-sec", func(p *Params) { p.MinPerSec = math.Inf(1) }},
		{"aws-cost", func(p *Params) { p.AWSCost = -1 }},
		{"envoy-min", func(p *Params) { p.EnvoyMin = -3 }},
	} {
		p := DefaultParams
		tc.set(&p)
		var pe *ParamError
		if err := p.Validate(); !errors.As(err, &pe) || pe.Flag != tc.flag {
			t.Errorf("%s out of range: %v, want a ParamError naming it", tc.flag, err)
		}
	}
}
