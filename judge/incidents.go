package judge

import (
	"sort"
	"time"
)

// Span is a stretch of time, [Start, End).
type Span struct {
	Start, End time.Time
}

// Incidents finds the stretches of one-minute windows (oldest first) where amplification,
// retry rate or the share of failed lines (5xx, 429, abandoned) rose well above the range's baseline,
// its median minute: amplification above max(1.2, baseline + 0.3), or a rate above
// max(5 %, 3 × baseline), with at least 3 retries or 3 failed lines in the minute: the
// detector's minimum sample (one retry in a quiet minute is no incident), and the evidence
// an alert needs: at least the alert rules' least minimum of first attempts (one request
// tried three times is no incident). Hot minutes at most one quiet minute apart make one
// incident.
func Incidents(minutes []Window, rules []Rule) []Span {
	return IncidentsAt(minutes, time.Minute, rules)
}

// IncidentsAt is Incidents on windows of any width (a report's under a minute): an
// incident starts where its evidence starts, in the first hot window, not at its minute.
func IncidentsAt(minutes []Window, width time.Duration, rules []Rule) []Span {
	if len(minutes) == 0 {
		return nil
	}
	var amps, rates, fails []float64
	for _, m := range minutes {
		amps = append(amps, val(m.Amplification))
		rates = append(rates, val(m.RetryRate))
		fails = append(fails, failShare(m.Metrics))
	}
	ampLimit := max(1.2, median(amps)+0.3)
	rateLimit := max(0.05, 3*median(rates))
	failLimit := max(0.05, 3*median(fails))
	minFirst, _ := LeastEvidence(rules)
	var out []Span
	for _, m := range minutes {
		hot := val(m.Amplification) > ampLimit || val(m.RetryRate) > rateLimit || failShare(m.Metrics) > failLimit
		if !hot || m.Retries < 3 && failed(m.Metrics) < 3 || m.FirstAttempts < minFirst {
			continue
		}
		end := m.Start.Add(width)
		if n := len(out); n > 0 && !m.Start.After(out[n-1].End.Add(width)) {
			out[n-1].End = end
			continue
		}
		out = append(out, Span{Start: m.Start, End: end})
	}
	return out
}

// failed is the lines with a retryable failure the metrics count apart (5xx, 429,
// abandoned; see RetryableFailure), but for those abandoned because another attempt won.
func failed(m Metrics) int64 {
	return m.Status5xx.Total() + m.Status429.Total() + m.Abandoned.Total() - m.Cancelled.Total()
}

// failShare is the share of lines that failed.
func failShare(m Metrics) float64 {
	if m.Requests == 0 {
		return 0
	}
	return float64(failed(m)) / float64(m.Requests)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
