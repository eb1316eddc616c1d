package query

// Verdicts of a window, as docs/metrics.md defines them.
const (
	Fuelling      = "fuelling"
	Rescuing      = "rescuing"
	Quiet         = "quiet"
	Insufficient  = "insufficient data" // a threshold crossed without the evidence to say so
	NoAttemptData = "no attempt data"   // no line carries an attempt number
)

// Verdict says whether retries fuelled or rescued a slice of rows (a window, route,
// group), from its counts and the rules (those of --rules, or DefaultRules: one model of
// thresholds for alerts and verdicts): no attempt data when nothing is tagged; fuelling
// when an alert rule fires on the slice's figures (see Rule.judge); insufficient data when
// a rule's threshold is crossed without the evidence to say so (no evidence, no alarm);
// rescuing when the rescuing rule holds (retries at 1 % of first attempts or more
// recovered requests); quiet otherwise, however few the rows: nothing crossed a threshold.
// Slices in which an alert fired are fuelling too (MarkFuelling, Set.Groups): the same
// alerts on the rows of each slice. A range's verdict is the worst of its windows' (Worst).
func Verdict(m Metrics, rules []Rule) string {
	if m.FirstAttempts+m.Retries == 0 {
		return NoAttemptData
	}
	rescued, unsure := false, false
	for _, r := range rules {
		if r.Name == sustainedRule {
			continue // a finding over windows, not a verdict (RetrySustained)
		}
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
	}
	switch {
	case unsure:
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

// Worst returns a range's verdict: the most alarming of its windows' (after MarkFuelling),
// so that a range in which one hour fuelled an incident fuelled it, however calm the
// rest, and a range reads no more than its windows show (pooled, windows that each lack
// the evidence could cross a threshold together). With no window, the summary's own.
func Worst(summary Metrics, windows []Window) string {
	if len(windows) == 0 {
		return summary.Verdict
	}
	rank := map[string]int{NoAttemptData: -2, Insufficient: -1, Quiet: 0, Rescuing: 1, Fuelling: 2}
	v := windows[0].Verdict
	for _, w := range windows[1:] {
		if rank[w.Verdict] > rank[v] {
			v = w.Verdict
		}
	}
	return v
}
