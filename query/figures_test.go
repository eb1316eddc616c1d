package query

import (
	"testing"

	"github.com/retrylens/retrylens/judge"
)

// Every figure's counts are in the catalogue of counts, and Sums computes what Metrics
// holds: the surfaces that serve counts give the report's ratios.
func TestFiguresSums(t *testing.T) {
	t.Parallel()
	var c counts
	for i, col := range countColumns {
		*col.place(&c) = int64(1000 - 7*i) // every denominator positive
	}
	m := c.metrics(judge.DefaultRules())
	for _, f := range judge.Figures {
		num, den := f.Sums(m.Counts)
		typed := map[string]*float64{"amplification": m.Amplification, "retry_rate": m.RetryRate, "retry_success_rate": m.RetrySuccessRate,
			"extra_load": m.ExtraLoad, "actual_success": m.ActualSuccess, "effective_success": m.EffectiveSuccess,
			"proxy_amplification": m.ProxyAmplification}
		got, ok := typed[f.Key]
		if !ok { // a figure without a field of its own: the JSON's (Metrics.Figure)
			got = m.Figure(f.Key)
		}
		if got == nil || den <= 0 || *got != float64(num)/float64(den) {
			t.Errorf("%s: judge.Metrics %v, Sums %d / %d", f.Key, got, num, den)
		}
	}
}
