package query

// Verdicts of a window, as docs/metrics.md defines them.
const (
	Fuelling      = "fuelling"
	Rescuing      = "rescuing"
	Quiet         = "quiet"
	Insufficient  = "insufficient data" // a threshold crossed without the evidence to say so
	NoAttemptData = "no attempt data"   // no line carries an attempt number
)

// Verdict says whether retries fuelled or rescued a slice of rows (a range, window, route,
// group), from its counts and the rules (those of --rules, or DefaultRules: one model of
// thresholds for alerts and verdicts): no attempt data when nothing is tagged; fuelling
// when an alert rule fires on the slice's figures (see Rule.judge); insufficient data when
// a rule's threshold is crossed without the evidence to say so, or there are fewer first
// attempts than the alert rules look at; rescuing when the rescuing rule holds (retries at
// 1 % of first attempts or more recovered requests); quiet otherwise. Slices in which an
// alert fired are fuelling too (MarkFuelling, Set.Groups): the same alerts on the rows of
// each slice.
func Verdict(m Metrics, rules []Rule) string {
	if m.FirstAttempts+m.Retries == 0 {
		return NoAttemptData
	}
	rescued, unsure, few := false, false, true
	for _, r := range rules {
		if !r.alert() {
			ok, _ := r.holds(m)
			rescued = rescued || ok
			continue
		}
		switch state, _ := r.judge(m); state {
		case firing:
			return Fuelling
		case thin:
			unsure = true
		}
		few = few && m.FirstAttempts < r.MinFirstAttempts
	}
	switch {
	case unsure || few:
		return Insufficient
	case rescued:
		return Rescuing
	}
	return Quiet
}

func val(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// Worst returns the most alarming verdict of a range's summary and its windows: a range
// in which one hour fuelled an incident fuelled it, however calm the rest.
func Worst(summary Metrics, windows []Window) string {
	rank := map[string]int{NoAttemptData: -2, Insufficient: -1, Quiet: 0, Rescuing: 1, Fuelling: 2}
	v := summary.Verdict
	for _, w := range windows {
		if rank[w.Verdict] > rank[v] {
			v = w.Verdict
		}
	}
	return v
}
