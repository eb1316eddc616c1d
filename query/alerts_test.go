package query

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAlerts(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	min := func(i int, amp, rate, success float64) Window {
		return Window{Start: t0.Add(time.Duration(i) * time.Minute), Metrics: Metrics{Amplification: f(amp), RetryRate: f(rate), RetrySuccessRate: f(success)}}
	}
	minutes := []Window{
		min(0, 1.0, 0.00, 1.0),
		min(1, 1.2, 0.20, 0.9), // retry rate high, one minute: not sustained
		min(2, 1.0, 0.01, 1.0),
		min(3, 1.6, 0.30, 0.5), // storm 3..4, rate high 3..5 (sustained)
		min(4, 2.4, 0.50, 0.3), // not helping at 4 (0.3 < 0.4 with rate 0.5)
		min(5, 1.4, 0.40, 0.6),
		min(7, 1.0, 0.30, 0.9), // a gap at 6: rate high alone at 7, not sustained
	}
	got := Alerts(minutes, DefaultRules())
	want := []Alert{
		{Rule: "retry_rate_high", Severity: "P2", Start: t0.Add(3 * time.Minute), End: t0.Add(6 * time.Minute), Peak: 0.5},
		{Rule: "retries_not_helping", Severity: "P2", Start: t0.Add(4 * time.Minute), End: t0.Add(5 * time.Minute), Peak: 0.3},
		{Rule: "retry_storm", Severity: "P1", Start: t0.Add(3 * time.Minute), End: t0.Add(5 * time.Minute), Peak: 2.4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Alerts (-want +got):\n%s", diff)
	}
}

func TestReadRules(t *testing.T) {
	rules, err := ReadRules(strings.NewReader(`[{"rule": "retry_storm", "threshold": 2.0, "sustain": "3m"}, {"rule": "retry_rate_high", "severity": "P1"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if rules[2].Threshold != 2 || rules[2].Sustain != 3*time.Minute || rules[0].Severity != "P1" || rules[1].Threshold != 0.40 {
		t.Errorf("rules: %+v", rules)
	}
	for _, bad := range []string{`[{"rule": "x"}]`, `[{"rule": "retry_storm", "sustain": "30s"}]`, `[{"rule": "retry_storm", "severity": "P0"}]`, `{`, `[{"rule": "retry_storm", "typo": 1}]`,
		`[{"rule": "rescuing", "severity": "P2"}]`, `[{"rule": "rescuing", "sustain": "2m"}]`} {
		if _, err := ReadRules(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadRules(%s) accepted", bad)
		}
	}
}

// The rescuing threshold is a rule like the others: a rules file moves it, and it never
// fires as an alert. 2 retries of 100 first attempts recovered 2 requests: rescuing at the
// default 1 %, quiet from 5 %.
func TestRescuingRule(t *testing.T) {
	rate := 0.02
	m := Metrics{FirstAttempts: 100, Retries: 2, RetryRate: &rate, Recovered: 2}
	if v := Verdict(m, DefaultRules()); v != Rescuing {
		t.Errorf("default rules: %s, want %s", v, Rescuing)
	}
	rules, err := ReadRules(strings.NewReader(`[{"rule": "rescuing", "threshold": 0.05}]`))
	if err != nil {
		t.Fatal(err)
	}
	if v := Verdict(m, rules); v != Quiet {
		t.Errorf("rescuing from 5 %%: %s, want %s", v, Quiet)
	}
	w := Window{Start: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Metrics: m}
	if as := Alerts([]Window{w, {Start: w.Start.Add(time.Minute), Metrics: m}}, DefaultRules()); len(as) != 0 {
		t.Errorf("alerts: %+v, want none", as)
	}
}
