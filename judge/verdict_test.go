package judge

import (
	"slices"
	"testing"
	"time"
)

// One verdict for every slice (docs/metrics.md): fuelling exactly when an alert fired in
// it, insufficient data below the rules' least evidence or when pooled figures cross a
// threshold without an alert. Each case is a slice the issue tracker saw misread, its
// counts written by hand.
func TestVerdict(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	slice := func(first, retries, second, retriesOK, recovered int64) Metrics {
		m := Metrics{FirstAttempts: first, Retries: retries, Recovered: recovered}
		if first > 0 {
			m.Amplification, m.RetryRate = f(float64(first+retries)/float64(first)), f(float64(second)/float64(first))
		}
		if retries > 0 {
			m.RetrySuccessRate = f(float64(retriesOK) / float64(retries))
		}
		return m
	}
	rules := DefaultRules()
	for _, c := range []struct {
		name  string
		m     Metrics
		fired []string
		want  string
	}{
		{"nothing tagged", Metrics{Requests: 4, Untagged: 4}, nil, NoAttemptData},
		{"no first attempt, 5 retries", slice(0, 5, 0, 5, 0), nil, Insufficient},
		{"one first attempt, no retry", slice(1, 0, 0, 0, 0), nil, Insufficient},
		{"two first attempts, one retried and recovered", slice(2, 1, 1, 1, 1), nil, Insufficient},
		// an endpoint's row of 3 first attempts each retried once: retry rate 100 %, and
		// no alert fired in its minutes (retry_rate_high needs two in a row)
		{"3 first attempts, 3 retries, no alert", slice(3, 3, 3, 3, 3), nil, Insufficient},
		{"the same with retry_rate_high fired", slice(3, 3, 3, 3, 3), []string{"retry_rate_high"}, Fuelling},
		{"100 first attempts, no retry", slice(100, 0, 0, 0, 0), nil, Quiet},
		{"100 first attempts, 2 retries recovered 2", slice(100, 2, 2, 2, 2), nil, Rescuing},
		{"200 first attempts, 1 retry recovered 1 (under 1 %)", slice(200, 1, 1, 1, 1), nil, Quiet},
		{"a storm pooled over a range without an alert", slice(100, 200, 100, 20, 10), nil, Insufficient},
	} {
		if got := Judged(c.m, c.fired, rules).Verdict; got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A minute's retry rate above 1 (2,182 second attempts on 2,179 first attempts: first
// attempts of the retried requests fell in the minute before) is evidence of a retry rate
// of at least 15 %, not of nothing: retry_rate_high fires on two such minutes.
func TestRatioAboveOne(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	rate, amp := 2182.0/2179, (2179.0+2300)/2179
	m := Metrics{FirstAttempts: 2179, Retries: 2300, RetryRate: &rate, Amplification: &amp}
	as := Alerts([]Window{{Start: t0, Metrics: m}, {Start: t0.Add(time.Minute), Metrics: m}}, DefaultRules())
	if got := Fired(as); !slices.Contains(got, "retry_rate_high") {
		t.Errorf("alerts on two minutes of retry rate %.3f: %v, want retry_rate_high among them", rate, got)
	}
	if lo, _ := wilson(2182, 2179, 0.95); lo != lo || lo < 0.99 {
		t.Errorf("wilson(2182 of 2179): lower bound %v, want that of a share of 1", lo)
	}
}
