package judge

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
		return Window{Start: t0.Add(time.Duration(i) * time.Minute), Metrics: Metrics{Amplification: f(amp), RetryRate: f(rate), RetrySuccessRate: f(success),
			FirstAttempts: 100, Retries: 50}}
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
	// the figures as they are: this test is about runs, gaps and sustain (TestEvidence)
	rules := DefaultRules()
	for i := range rules {
		rules[i].Confidence, rules[i].MinFirstAttempts, rules[i].MinRetries = 0, 0, 0
	}
	got := Alerts(minutes, rules)
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
		`[{"rule": "rescuing", "severity": "P2"}]`, `[{"rule": "rescuing", "sustain": "2m"}]`,
		`[{"rule": "retry_storm", "confidence": 1.5}]`, `[{"rule": "retry_storm", "min_retries": -1}]`} {
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

// Evidence before alarm: a minute whose figures cross a threshold without the evidence to
// say so neither fires the rule nor breaks its sustain. Four retries of which one
// succeeded, in a minute of 3 first attempts: retry success 25 %, but the 95 % interval of
// 1 in 4 reaches 0.68 (worked out: Wilson, z = 1.645), so no retries_not_helping (the
// healthy log's false alarm); a thin minute (retry rate 0.2 on 10 first attempts: its
// interval reaches down to 0.06) between two minutes of 0.2 on 1,000 (down to 0.18):
// retry_rate_high still sustained over the three.
func TestEvidence(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	at := func(i int, first, retries int64, rate, success float64) Window {
		return Window{Start: t0.Add(time.Duration(i) * time.Minute), Metrics: Metrics{FirstAttempts: first, Retries: retries,
			Amplification: f(1 + float64(retries)/float64(first)), RetryRate: f(rate), RetrySuccessRate: f(success)}}
	}
	if as := Alerts([]Window{at(0, 3, 4, 0.33, 0.25)}, DefaultRules()); len(as) != 0 {
		t.Errorf("thin minute: %+v, want no alert", as)
	}
	as := Alerts([]Window{at(0, 1000, 200, 0.2, 0.9), at(1, 10, 2, 0.2, 0.9), at(2, 1000, 200, 0.2, 0.9)}, DefaultRules())
	want := []Alert{{Rule: "retry_rate_high", Severity: "P2", Start: t0, End: t0.Add(3 * time.Minute), Peak: 0.2}}
	if diff := cmp.Diff(want, as); diff != "" {
		t.Errorf("thin minute inside a run (-want +got):\n%s", diff)
	}
	// The same four retries as a whole slice: too little to judge; nothing tagged: no data.
	if v := Verdict(at(0, 3, 4, 0.33, 0.25).Metrics, DefaultRules()); v != Insufficient {
		t.Errorf("verdict of 3 first attempts: %s, want %s", v, Insufficient)
	}
	if v := Verdict(Metrics{Requests: 10, Untagged: 10}, DefaultRules()); v != NoAttemptData {
		t.Errorf("verdict of untagged lines: %s, want %s", v, NoAttemptData)
	}
	rules, err := ReadRules(strings.NewReader(`[{"rule": "retries_not_helping", "min_first_attempts": 0, "min_retries": 0, "confidence": 0}]`))
	if err != nil {
		t.Fatal(err)
	}
	if as := Alerts([]Window{at(0, 3, 4, 0.33, 0.25)}, rules); len(as) != 1 || as[0].Rule != "retries_not_helping" {
		t.Errorf("rules without a minimum sample: %+v, want retries_not_helping", as)
	}
}
