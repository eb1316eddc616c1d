package query

// Verdicts of a window, as docs/metrics.md defines them.
const (
	Fuelling = "fuelling"
	Rescuing = "rescuing"
	Quiet    = "quiet"
)

// Thresholds of the alert rules (docs/metrics.md), applied to a window as a whole.
const (
	StormAmplification  = 1.5
	HighRetryRate       = 0.15
	HelpfulRetrySuccess = 0.40
	NotHelpingRetryRate = 0.05
	QuietRetryRate      = 0.01
)

// Verdict says whether retries fuelled or rescued: fuelling when a rule's condition holds
// over the whole set (retry storm, high retry rate, retries not helping), rescuing when
// retries recovered requests without that, quiet when retries stayed under 1 % of first
// attempts or none succeeded. It looks at the set as a whole; alert rules evaluated per
// minute with their sustain times are a later, finer tool.
func Verdict(m Metrics) string {
	rate := val(m.RetryRate)
	switch {
	case val(m.Amplification) > StormAmplification,
		rate > HighRetryRate,
		m.RetrySuccessRate != nil && *m.RetrySuccessRate < HelpfulRetrySuccess && rate > NotHelpingRetryRate:
		return Fuelling
	case rate >= QuietRetryRate && m.Recovered > 0:
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
