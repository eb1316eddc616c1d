package query

// Verdicts of a window, as docs/metrics.md defines them.
const (
	Fuelling = "fuelling"
	Rescuing = "rescuing"
	Quiet    = "quiet"
)

// QuietRetryRate is the retry rate under which retries cannot be said to rescue anything.
const QuietRetryRate = 0.01

// Verdict says whether retries fuelled or rescued: fuelling when one of the alert rules'
// conditions holds over the whole set (the rules of --rules, or DefaultRules: one model of
// thresholds for alerts and verdicts), rescuing when retries recovered requests without
// that, quiet when retries stayed under 1 % of first attempts or none succeeded. It looks
// at the set as a whole; MarkFuelling adds the rules evaluated per minute with their
// sustain times.
func Verdict(m Metrics, rules []Rule) string {
	for _, r := range rules {
		if ok, _ := r.holds(m); ok {
			return Fuelling
		}
	}
	if val(m.RetryRate) >= QuietRetryRate && m.Recovered > 0 {
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
