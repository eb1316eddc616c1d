package judge

// Verdicts of a slice, as docs/metrics.md defines them.
const (
	Fuelling      = "fuelling"
	Rescuing      = "rescuing"
	Quiet         = "quiet"
	Insufficient  = "insufficient data" // too few requests, or a threshold crossed without an alert's evidence
	NoAttemptData = "no attempt data"   // no line carries an attempt number
)

// Verdict is the one verdict of every slice of rows: the range, a window, an endpoint, a
// --by group, the live gauges. It reads the slice's pooled counts and the alert rules
// that fired in its own minutes (m.Fired; see Alerts, MarkFuelling, query's Set.Groups), never
// anything else, so that a slice gets the same verdict whichever surface shows it:
//
//   - no attempt data: no line of the slice carries an attempt number;
//   - fuelling: an alert rule fired in the slice (its evidence, confidence and sustain
//     met minute by minute). Nothing else makes a slice fuelling: pooled figures that
//     cross a threshold are not an alert;
//   - insufficient data: the slice has fewer first attempts than the alert rules' least
//     evidence (a handful of requests says nothing), or its pooled figures cross an alert
//     rule's threshold without an alert having fired;
//   - rescuing: the rescuing rule holds (retries at 1 % of first attempts or more
//     recovered requests);
//   - quiet otherwise.
func Verdict(m Metrics, rules []Rule) string {
	if m.FirstAttempts+m.Retries == 0 {
		return NoAttemptData
	}
	if len(m.Fired) > 0 {
		return Fuelling
	}
	if m.FirstAttempts < leastFirstAttempts(rules) {
		return Insufficient
	}
	rescued := false
	for _, r := range rules {
		switch {
		case r.Name == sustainedRule:
			// a finding over windows, not a verdict (RetrySustained)
		case r.alert():
			if crossed, _ := r.condition(m); crossed {
				return Insufficient
			}
		default:
			ok, _ := r.holds(m)
			rescued = rescued || ok
		}
	}
	if rescued {
		return Rescuing
	}
	return Quiet
}

// leastFirstAttempts is the fewest first attempts any alert rule looks at: a slice with
// fewer cannot show an alert, nor its absence.
func leastFirstAttempts(rules []Rule) int64 {
	first, _ := LeastEvidence(rules)
	return max(first, 0)
}

// Judged returns m with the alert rules that fired in it (fired, in the order they
// fired) and the verdict they give it.
func Judged(m Metrics, fired []string, rules []Rule) Metrics {
	m.Fired = fired
	m.Verdict = Verdict(m, rules)
	return m
}

func val(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
