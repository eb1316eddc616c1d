package query

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Rule is a threshold of docs/metrics.md. An alert rule (with a severity) fires when its
// condition holds on Sustain consecutive one-minute buckets, and makes a verdict
// fuelling; the rescuing rule (no severity) says from which retry rate recovered requests
// make a verdict rescuing.
type Rule struct {
	Name      string        `json:"rule"`
	Severity  string        `json:"severity"` // P1 or P2; "" for the rescuing rule
	Threshold float64       `json:"threshold"`
	Sustain   time.Duration `json:"-"`
	// MinRetryRate is the second condition of retries_not_helping.
	MinRetryRate float64 `json:"min_retry_rate,omitempty"`
}

// DefaultRules are the thresholds of docs/metrics.md: alerts for a retry rate above 15 %
// for two minutes, retry success under 40 % while over 5 % of requests retry,
// amplification above 1.5; and rescuing from a retry rate of 1 %. They drive the verdicts
// too (see Verdict).
func DefaultRules() []Rule {
	return []Rule{
		{Name: "retry_rate_high", Severity: "P2", Threshold: 0.15, Sustain: 2 * time.Minute},
		{Name: "retries_not_helping", Severity: "P2", Threshold: 0.40, MinRetryRate: 0.05, Sustain: time.Minute},
		{Name: "retry_storm", Severity: "P1", Threshold: 1.5, Sustain: time.Minute},
		{Name: rescuingRule, Threshold: 0.01},
	}
}

// rescuingRule is the rule that is not an alert: retries at this retry rate or more that
// recovered requests rescued them.
const rescuingRule = "rescuing"

// alert reports whether r is an alert rule.
func (r Rule) alert() bool { return r.Severity != "" }

// holds reports whether the rule's condition holds for m, and the value it watches.
func (r Rule) holds(m Metrics) (bool, float64) {
	switch r.Name {
	case "retry_rate_high":
		v := val(m.RetryRate)
		return m.RetryRate != nil && v > r.Threshold, v
	case "retries_not_helping":
		v := val(m.RetrySuccessRate)
		return m.RetrySuccessRate != nil && v < r.Threshold && val(m.RetryRate) > r.MinRetryRate, v
	case "retry_storm":
		v := val(m.Amplification)
		return m.Amplification != nil && v > r.Threshold, v
	case rescuingRule:
		v := val(m.RetryRate)
		return v >= r.Threshold && m.Recovered > 0, v
	}
	return false, 0
}

// worse reports whether a is a worse value than b for the rule (success: lower is worse).
func (r Rule) worse(a, b float64) bool {
	if r.Name == "retries_not_helping" {
		return a < b
	}
	return a > b
}

// Alert is a rule that fired: from Start to End, with the worst value seen.
type Alert struct {
	Rule     string
	Severity string
	Start    time.Time
	End      time.Time
	Peak     float64
}

// Alerts evaluates rules on one-minute windows (Set.Windows with a one-minute width,
// oldest first). A minute without traffic breaks a run.
func Alerts(minutes []Window, rules []Rule) []Alert {
	var out []Alert
	for _, r := range rules {
		if !r.alert() {
			continue
		}
		need := int(r.Sustain / time.Minute)
		if need < 1 {
			need = 1
		}
		var run []Window
		var peak float64
		flush := func() {
			if len(run) >= need {
				out = append(out, Alert{Rule: r.Name, Severity: r.Severity, Start: run[0].Start,
					End: run[len(run)-1].Start.Add(time.Minute), Peak: peak})
			}
			run = run[:0]
		}
		for _, w := range minutes {
			ok, v := r.holds(w.Metrics)
			if ok && len(run) > 0 && !w.Start.Equal(run[len(run)-1].Start.Add(time.Minute)) {
				flush()
			}
			if !ok {
				flush()
				continue
			}
			if len(run) == 0 || r.worse(v, peak) {
				peak = v
			}
			run = append(run, w)
		}
		flush()
	}
	return out
}

// ruleFile is the JSON a --rules file holds: a list of rules overriding the defaults by
// name, e.g. [{"rule": "retry_storm", "threshold": 2.0, "sustain": "3m", "severity": "P1"}].
type ruleFile struct {
	Rule         string   `json:"rule"`
	Severity     string   `json:"severity"`
	Threshold    *float64 `json:"threshold"`
	Sustain      string   `json:"sustain"`
	MinRetryRate *float64 `json:"min_retry_rate"`
}

// ReadRules reads a rules file and applies it to the default rules.
func ReadRules(r io.Reader) ([]Rule, error) {
	var in []ruleFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	rules := DefaultRules()
	for _, f := range in {
		i := -1
		for k := range rules {
			if rules[k].Name == f.Rule {
				i = k
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("rules: unknown rule %q: want retry_rate_high, retries_not_helping, retry_storm or rescuing", f.Rule)
		}
		if f.Rule == rescuingRule && (f.Severity != "" || f.Sustain != "" || f.MinRetryRate != nil) {
			return nil, fmt.Errorf("rules: rescuing is not an alert: it takes a threshold only (the retry rate from which recovered requests make a verdict rescuing)")
		}
		if f.Severity != "" {
			if f.Severity != "P1" && f.Severity != "P2" {
				return nil, fmt.Errorf("rules: %s: severity %q: want P1 or P2", f.Rule, f.Severity)
			}
			rules[i].Severity = f.Severity
		}
		if f.Threshold != nil {
			rules[i].Threshold = *f.Threshold
		}
		if f.MinRetryRate != nil {
			rules[i].MinRetryRate = *f.MinRetryRate
		}
		if f.Sustain != "" {
			d, err := time.ParseDuration(f.Sustain)
			if err != nil || d < time.Minute || d%time.Minute != 0 {
				return nil, fmt.Errorf("rules: %s: sustain %q: want whole minutes such as 2m", f.Rule, f.Sustain)
			}
			rules[i].Sustain = d
		}
	}
	return rules, nil
}

// AtLeast reports whether severity s is at or above min (P1 is above P2).
func AtLeast(s, min string) bool {
	return s == "P1" || s == min
}

// MarkFuelling sets the verdict of every window of the given width that an alert
// overlaps to fuelling (docs/metrics.md: a window's verdict is fuelling when a P1 or P2 rule fired in
// it).
func MarkFuelling(ws []Window, width time.Duration, alerts []Alert) {
	for i := range ws {
		end := ws[i].Start.Add(width)
		for _, a := range alerts {
			if a.Start.Before(end) && a.End.After(ws[i].Start) {
				ws[i].Verdict = Fuelling
			}
		}
	}
}
