package judge

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
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
	// The evidence an alert rule needs in a minute (or a slice, for its verdict): below
	// it the rule neither fires nor breaks a sustain (docs/metrics.md).
	MinFirstAttempts int64 `json:"min_first_attempts,omitempty"`
	MinRetries       int64 `json:"min_retries,omitempty"`
	// Confidence is how sure the figures must make it that the threshold is crossed (one
	// sided, of the ratio's Wilson interval); 0.5 or less takes the figures as they are.
	Confidence float64 `json:"confidence,omitempty"`
	// MaxSuccess is retry_sustained's: the actual success at or under which success has
	// collapsed.
	MaxSuccess float64 `json:"max_success,omitempty"`
}

// DefaultRules are the thresholds of docs/metrics.md: alerts for a retry rate above 15 %
// for two minutes, retry success under 40 % while over 5 % of requests retry,
// amplification above 1.5, each on at least 3 first attempts and 3 retries and with 95 %
// confidence (see judge); and rescuing from a retry rate of 1 %. They drive the verdicts
// too (see Verdict).
func DefaultRules() []Rule {
	return []Rule{
		{Name: "retry_rate_high", Severity: "P2", Threshold: 0.15, Sustain: 2 * time.Minute, MinFirstAttempts: 3, MinRetries: 3, Confidence: 0.95},
		{Name: "retries_not_helping", Severity: "P2", Threshold: 0.40, MinRetryRate: 0.05, Sustain: time.Minute, MinFirstAttempts: 3, MinRetries: 3, Confidence: 0.95},
		{Name: "retry_storm", Severity: "P1", Threshold: 1.5, Sustain: time.Minute, MinFirstAttempts: 3, MinRetries: 3, Confidence: 0.95},
		{Name: rescuingRule, Threshold: 0.01},
		{Name: sustainedRule, Threshold: 2, MaxSuccess: 0.2, MinFirstAttempts: 3, MinRetries: 3},
	}
}

// rescuingRule is the rule that is not an alert: retries at this retry rate or more that
// recovered requests rescued them.
const rescuingRule = "rescuing"

// alert reports whether r is an alert rule.
func (r Rule) alert() bool { return r.Severity != "" }

// LeastEvidence returns the fewest first attempts and retries any alert rule looks at in
// a minute (-1 when rules has no alert rule): a slice with fewer can fire nothing.
func LeastEvidence(rules []Rule) (first, retries int64) {
	first, retries = -1, -1
	for _, r := range rules {
		if r.alert() {
			first, retries = least(first, r.MinFirstAttempts), least(retries, r.MinRetries)
		}
	}
	return first, retries
}

// least is the smaller of a and b, where a < 0 is none yet.
func least(a, b int64) int64 {
	if a < 0 || b < a {
		return b
	}
	return a
}

// enough reports whether m has the least evidence the rule looks at.
func (r Rule) enough(m Metrics) bool {
	return m.FirstAttempts >= r.MinFirstAttempts && r.retries(m) >= r.MinRetries
}

// retries are the retries the rule's ratio counts: retry success leaves out those the
// client cancelled because another attempt won (its denominator, Metrics.RetrySuccessRate).
func (r Rule) retries(m Metrics) int64 {
	if r.CountsDecided() {
		return m.Retries - m.Cancelled.Retry
	}
	return m.Retries
}

// CountsDecided reports whether the retries the rule's evidence counts are those not
// cancelled (retry success's denominator) rather than every retry.
func (r Rule) CountsDecided() bool { return r.Name == "retries_not_helping" }

// Figure returns the key of the figure (Figures) an alert rule watches, and whether it
// fires below its threshold rather than above; "" for a rule that watches none.
func (r Rule) Figure() (key string, below bool) {
	switch r.Name {
	case "retry_rate_high":
		return "retry_rate", false
	case "retries_not_helping":
		return "retry_success_rate", true
	case "retry_storm":
		return "amplification", false
	}
	return "", false
}

// The states of a rule's condition in a minute or a slice (see judge).
const (
	clear  = iota // it does not hold
	thin          // it holds on the figures, without the evidence to say so
	firing        // it holds, with that evidence
)

// wilson returns the Wilson score interval of k successes in n trials whose one-sided
// bounds hold with confidence c: a ratio rule fires when its threshold lies outside it, on
// the alarming side.
func wilson(k, n, c float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	// A ratio may pass 1 (retry rate: second attempts whose first attempt fell in the
	// window before): the evidence is then that of a share of 1, not NaN.
	k = math.Max(0, math.Min(k, n))
	z := math.Sqrt2 * math.Erfinv(2*c-1) // the normal quantile of c
	p, z2 := k/n, z*z
	d := 1 + z2/n
	mid := (p + z2/(2*n)) / d
	h := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / d
	return mid - h, mid + h
}

// judge says whether the rule's condition holds for m, and the value it watches: clear
// when it does not; thin when it does on the figures but m has fewer first attempts or
// retries than the rule needs, or the threshold lies within the interval (Confidence) of the
// ratio (four retries of which one succeeded do not show that retries are not helping);
// firing otherwise.
func (r Rule) judge(m Metrics) (int, float64) {
	ok, v := r.condition(m)
	if !ok {
		return clear, v
	}
	if !r.enough(m) {
		return thin, v
	}
	first, retries, c := float64(m.FirstAttempts), float64(r.retries(m)), r.Confidence
	sure := true
	switch {
	case c <= 0.5: // the figures as they are
	case r.Name == "retry_rate_high": // first attempts retried, of first attempts
		lo, _ := wilson(val(m.RetryRate)*first, first, c)
		sure = lo > r.Threshold
	case r.Name == "retries_not_helping": // retries answered 2xx, of retries
		_, hi := wilson(val(m.RetrySuccessRate)*retries, retries, c)
		sure = hi < r.Threshold
	case r.Name == "retry_storm": // retries of tagged lines: amplification a is a share of (a-1)/a
		lo, _ := wilson(retries, first+retries, c)
		sure = r.Threshold <= 1 || lo > (r.Threshold-1)/r.Threshold
	}
	if !sure {
		return thin, v
	}
	return firing, v
}

// holds reports whether the rule fires on m (see judge), and the value it watches.
func (r Rule) holds(m Metrics) (bool, float64) {
	state, v := r.judge(m)
	return state == firing, v
}

// condition reports whether the rule's condition holds on m's figures as they are, and the
// value it watches.
func (r Rule) condition(m Metrics) (bool, float64) {
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

// Alerts evaluates rules on one-minute windows (query's Set.Windows with a one-minute width,
// oldest first). A minute without traffic breaks a run; a minute whose figures break the
// threshold without the evidence to say so (see Rule.judge) neither counts towards it nor
// breaks it.
func Alerts(minutes []Window, rules []Rule) []Alert {
	return AlertsIn(minutes, time.Minute, rules, time.Time{}, time.Time{})
}

// WindowAlerts evaluates rules on windows of a width under a minute, as Alerts does on
// minutes, each judged on its own counts with the same evidence bounds: a rule sustained
// for d fires on d/width consecutive windows (at least one). A report at such a width
// says these and the minutes' where the windows bear them out (AlertsAt).
func WindowAlerts(ws []Window, width time.Duration, rules []Rule) []Alert {
	return AlertsIn(ws, width, rules, time.Time{}, time.Time{})
}

// AlertsAt is the alerts of windows of a width under a minute: the runs of the windows
// themselves (WindowAlerts), and every alert the minutes fire (minute: Alerts over the
// same rows) where the windows inside it bear it out. A rule's sustain is a duration, so
// a storm that fires on its minute fires at a finer width too, and never the other way
// round (a 40 s storm is a minute of retry_storm at --window 1m, and four windows at 10s
// that a sustain counted in windows would not fire). A minute's alert becomes the runs of
// its windows whose own counts fire the rule; where none does, the runs of those whose
// figures cross the threshold; where none does either (retries logged in a window after
// their first attempts'), the minute alert itself. A window with too little evidence to
// say either way, or no traffic, bridges a run without extending it: inside the minutes
// that fired only a window that clears the rule with its own evidence breaks one. Alerts
// of one rule that overlap or touch are one.
func AlertsAt(ws []Window, width time.Duration, rules []Rule, minute []Alert) []Alert {
	out := WindowAlerts(ws, width, rules)
	order := map[string]int{}
	byName := map[string]Rule{}
	for i, r := range rules {
		order[r.Name], byName[r.Name] = i, r
	}
	for _, m := range minute {
		r, ok := byName[m.Rule]
		if !ok {
			continue
		}
		var runs []Alert
		for _, bears := range []func(int) bool{
			func(s int) bool { return s == firing },
			func(s int) bool { return s != clear },
		} {
			var cur *Alert
			flush := func() {
				if cur != nil {
					runs = append(runs, *cur)
					cur = nil
				}
			}
			for _, w := range ws {
				if w.Start.Before(m.Start) || !w.Start.Before(m.End) {
					continue
				}
				state, v := r.judge(w.Metrics)
				switch {
				case bears(state):
					if cur == nil {
						cur = &Alert{Rule: r.Name, Severity: r.Severity, Start: w.Start, Peak: v}
					} else if r.worse(v, cur.Peak) {
						cur.Peak = v
					}
					cur.End = w.Start.Add(width)
				case state == thin || !r.enough(w.Metrics):
					// too little to say either way: bridges a run
				default:
					flush()
				}
			}
			flush()
			if len(runs) > 0 {
				break
			}
		}
		if len(runs) == 0 {
			runs = []Alert{m}
		}
		out = append(out, runs...)
	}
	slices.SortStableFunc(out, func(a, b Alert) int {
		if c := order[a.Rule] - order[b.Rule]; c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	var merged []Alert
	for _, a := range out {
		if n := len(merged); n > 0 && merged[n-1].Rule == a.Rule && !a.Start.After(merged[n-1].End) {
			p := &merged[n-1]
			if a.End.After(p.End) {
				p.End = a.End
			}
			if byName[a.Rule].worse(a.Peak, p.Peak) {
				p.Peak = a.Peak
			}
			continue
		}
		merged = append(merged, a)
	}
	return merged
}

// AlertsIn is Alerts on windows of width that reach past a range [since, until) (a zero
// bound is open): each run is judged on all its windows, and reported by those that
// overlap the range (its start, end and peak), so that a range reports what its window of
// a report over every row does.
func AlertsIn(ws []Window, width time.Duration, rules []Rule, since, until time.Time) []Alert {
	in := func(start time.Time) bool { // the window overlaps the range
		return (since.IsZero() || start.Add(width).After(since)) && (until.IsZero() || start.Before(until))
	}
	var out []Alert
	for _, r := range rules {
		if !r.alert() {
			continue
		}
		need := int((r.Sustain + width - 1) / width)
		if need < 1 {
			need = 1
		}
		type window struct {
			start time.Time
			v     float64
		}
		var run []window
		var last time.Time // the run's last window, thin ones included
		flush := func() {
			if len(run) >= need {
				var a *Alert
				for _, m := range run {
					if !in(m.start) {
						continue
					}
					if a == nil {
						a = &Alert{Rule: r.Name, Severity: r.Severity, Start: m.start, Peak: m.v}
					} else if r.worse(m.v, a.Peak) {
						a.Peak = m.v
					}
					a.End = m.start.Add(width)
				}
				if a != nil {
					out = append(out, *a)
				}
			}
			run = run[:0]
		}
		for _, w := range ws {
			if len(run) > 0 && !w.Start.Equal(last.Add(width)) {
				flush() // a window without traffic in between
			}
			state, v := r.judge(w.Metrics)
			if state == thin {
				last = w.Start
				continue
			}
			if state == clear {
				flush()
				continue
			}
			run = append(run, window{w.Start, v})
			last = w.Start
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
	MinFirst     *int64   `json:"min_first_attempts"`
	MinRetries   *int64   `json:"min_retries"`
	Confidence   *float64 `json:"confidence"`
	MaxSuccess   *float64 `json:"max_success"`
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
			return nil, fmt.Errorf("rules: unknown rule %q: want retry_rate_high, retries_not_helping, retry_storm, rescuing or retry_sustained", f.Rule)
		}
		if f.Rule == sustainedRule && (f.Severity != "" || f.Sustain != "" || f.MinRetryRate != nil || f.Confidence != nil) {
			return nil, fmt.Errorf("rules: retry_sustained is a finding: it takes threshold (least amplification), max_success, min_first_attempts and min_retries")
		}
		if f.MaxSuccess != nil {
			if f.Rule != sustainedRule || *f.MaxSuccess < 0 || *f.MaxSuccess > 1 {
				return nil, fmt.Errorf("rules: %s: max_success belongs to retry_sustained, as a share from 0 to 1", f.Rule)
			}
			rules[i].MaxSuccess = *f.MaxSuccess
		}
		if f.Rule == rescuingRule && (f.Severity != "" || f.Sustain != "" || f.MinRetryRate != nil || f.MinFirst != nil || f.MinRetries != nil || f.Confidence != nil) {
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
		if f.Confidence != nil {
			if *f.Confidence < 0 || *f.Confidence >= 1 {
				return nil, fmt.Errorf("rules: %s: confidence %g: want 0 (the figures as they are) to below 1, such as 0.95", f.Rule, *f.Confidence)
			}
			rules[i].Confidence = *f.Confidence
		}
		for _, n := range []struct {
			v   *int64
			dst *int64
		}{{f.MinFirst, &rules[i].MinFirstAttempts}, {f.MinRetries, &rules[i].MinRetries}} {
			if n.v != nil {
				if *n.v < 0 {
					return nil, fmt.Errorf("rules: %s: a minimum sample must not be negative", f.Rule)
				}
				*n.dst = *n.v
			}
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

// MarkFuelling names, in the Fired of every window of the given width that an alert
// overlaps, the alert's rule, which makes the window fuelling (Verdict). Under a minute
// (the alerts are AlertsAt), only the windows whose own figures cross the alert's
// threshold, or, when none of those it overlaps does (its evidence is its minute's), every
// one of them with traffic: a range is fuelling exactly when one of its windows is.
func MarkFuelling(ws []Window, width time.Duration, alerts []Alert, rules []Rule) {
	byName := map[string]Rule{}
	for _, r := range rules {
		byName[r.Name] = r
	}
	for _, a := range alerts {
		var over, crossing []int
		for i := range ws {
			if !a.Start.Before(ws[i].Start.Add(width)) || !a.End.After(ws[i].Start) {
				continue
			}
			over = append(over, i)
			if state, _ := byName[a.Rule].judge(ws[i].Metrics); state != clear {
				crossing = append(crossing, i)
			}
		}
		mark := over
		if width < time.Minute && len(crossing) > 0 {
			mark = crossing
		}
		for _, i := range mark {
			if width < time.Minute && ws[i].FirstAttempts+ws[i].Retries == 0 {
				continue
			}
			ws[i].Metrics = Judged(ws[i].Metrics, fired(ws[i].Fired, a.Rule), rules)
		}
	}
}

// fired adds rule to a list of rules that fired, once.
func fired(rules []string, rule string) []string {
	if slices.Contains(rules, rule) {
		return rules
	}
	return append(rules, rule)
}

// Fired returns the rules of alerts, each once, in the order they fired.
func Fired(alerts []Alert) []string {
	var rules []string
	for _, a := range alerts {
		rules = fired(rules, a.Rule)
	}
	return rules
}
