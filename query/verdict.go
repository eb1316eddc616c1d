package query

// Verdicts of a window, as docs/metrics.md defines them.
const (
	Fuelling = "fuelling"
	Rescuing = "rescuing"
	Quiet    = "quiet"
)

// Verdict says whether retries fuelled or rescued, from the rules (those of --rules, or
// DefaultRules: one model of thresholds for alerts and verdicts): fuelling when an alert
// rule's condition holds over the whole set, rescuing when the rescuing rule's does
// (retries at 1 % of first attempts or more recovered requests), quiet otherwise. It
// looks at the set as a whole; MarkFuelling adds the rules evaluated per minute with
// their sustain times.
func Verdict(m Metrics, rules []Rule) string {
	rescued := false
	for _, r := range rules {
		ok, _ := r.holds(m)
		if ok && r.alert() {
			return Fuelling
		}
		rescued = rescued || ok && !r.alert()
	}
	if rescued {
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
	rank := map[string]int{Quiet: 0, Rescuing: 1, Fuelling: 2}
	v := summary.Verdict
	for _, w := range windows {
		if rank[w.Verdict] > rank[v] {
			v = w.Verdict
		}
	}
	return v
}
