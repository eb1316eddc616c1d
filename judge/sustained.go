package judge

import (
	"math"
	"slices"
	"time"
)

// sustainedRule is the rule of the retry-sustained overload finding (RetrySustained): its
// thresholds and evidence bounds live in the rules file beside the alerts'. check's
// --fail-on-finding takes its name.
const sustainedRule = "retry_sustained"

// SustainedFinding is the retry-sustained overload's name where findings are named.
const SustainedFinding = sustainedRule

// baselineShare is how close to their baseline (the range's median window) first
// attempts must stay for a window to read retry-sustained: the clients still arrive as
// before, the load beyond them is retries.
const baselineShare = 0.5

// sustainedWindows is how many windows that read retry-sustained a stretch needs, under a
// minute (RetrySustained).
const sustainedWindows = 2

// Sustained is a stretch of consecutive windows in which the overload was kept up by
// retries (RetrySustained).
type Sustained struct {
	Start, End    time.Time
	Windows       int
	FirstAttempts int64
	Attempts      int64 // tagged lines: first attempts and retries
	// Shed is the attempts beyond first attempts a second: the load that shedding the
	// retries would take off the service. Over windows of a minute or less, the
	// stretch's own rate; over wider windows, that of its busiest minute (PeakShed): an
	// hour's window would otherwise spread a two-minute storm over the hour.
	Shed float64
}

// RetrySustained finds the windows (of width, oldest first) of a retry-sustained
// overload (docs/metrics.md): success has collapsed (actual success at most the rule's
// max_success) while first attempts stay at their baseline (at least half the range's
// median window's), the attempts are a multiple of the first attempts (amplification at
// least the rule's threshold), and the service takes on more work than the first
// attempts bring: more attempts answered 2xx or abandoned by a client that waited for
// them (0, 499) than first attempts. A service that is simply broken answers at once
// (5xx, 429, 503) and takes on less; one kept down by retries is busy with attempts whose
// client has left. Each window needs the rule's evidence (first attempts and retries);
// consecutive windows make one stretch.
func RetrySustained(ws []Window, width time.Duration, rules []Rule) []Sustained {
	i := slices.IndexFunc(rules, func(r Rule) bool { return r.Name == sustainedRule })
	if i < 0 || len(ws) == 0 {
		return nil
	}
	r := rules[i]
	var firsts []float64
	for _, w := range ws {
		if w.FirstAttempts+w.Retries > 0 {
			firsts = append(firsts, float64(w.FirstAttempts))
		}
	}
	if len(firsts) == 0 {
		return nil // no attempt data
	}
	baseline := median(firsts)
	hot := func(m Metrics) bool {
		tagged := m.FirstAttempts + m.Retries
		taken := int64(math.Round(val(m.ActualSuccess)*float64(tagged))) + m.Abandoned.Total()
		return m.FirstAttempts >= max(r.MinFirstAttempts, 1) && m.Retries >= r.MinRetries &&
			float64(m.FirstAttempts) >= baselineShare*baseline && val(m.Amplification) >= r.Threshold &&
			m.ActualSuccess != nil && *m.ActualSuccess <= r.MaxSuccess && taken > m.FirstAttempts
	}
	// Hot windows at most one window apart make one stretch, the window between them
	// included (a log can leave one second short of the evidence); a stretch needs
	// sustainedWindows hot windows, or a minute's worth when windows are wider (one
	// second at the start of a trigger is no overload kept up by retries).
	need := min(sustainedWindows, max(1, int((time.Minute+width-1)/width)))
	var out []Sustained
	var hots []int      // hot windows per stretch of out
	var pending *Window // a window after the last stretch's end, not hot
	for i := range ws {
		w := &ws[i]
		m := w.Metrics
		n := len(out)
		if !hot(m) {
			if n > 0 && out[n-1].End.Equal(w.Start) && pending == nil {
				pending = w
			} else {
				pending = nil
			}
			continue
		}
		last := n > 0 && (out[n-1].End.Equal(w.Start) || out[n-1].End.Add(width).Equal(w.Start))
		if last {
			if pending != nil && pending.Start.Equal(out[n-1].End) {
				out[n-1].FirstAttempts += pending.FirstAttempts
				out[n-1].Attempts += pending.FirstAttempts + pending.Retries
			}
			out[n-1].End = w.Start.Add(width)
			out[n-1].Windows = int(out[n-1].End.Sub(out[n-1].Start) / width)
			out[n-1].FirstAttempts += m.FirstAttempts
			out[n-1].Attempts += m.FirstAttempts + m.Retries
			hots[n-1]++
		} else {
			out = append(out, Sustained{Start: w.Start, End: w.Start.Add(width), Windows: 1, FirstAttempts: m.FirstAttempts, Attempts: m.FirstAttempts + m.Retries})
			hots = append(hots, 1)
		}
		pending = nil
	}
	kept := out[:0]
	for k, st := range out {
		if hots[k] >= need {
			kept = append(kept, st)
		}
	}
	out = kept
	for k := range out {
		out[k].Shed = float64(out[k].Attempts-out[k].FirstAttempts) / out[k].End.Sub(out[k].Start).Seconds()
	}
	return out
}

// PeakShed sets the Shed of stretches found on windows wider than a minute to the rate of
// their busiest minute (minutes: the same rows' one-minute windows, oldest first): the
// attempts beyond first attempts in that minute, a second.
func PeakShed(stretches []Sustained, width time.Duration, minutes []Window) {
	if width <= time.Minute {
		return
	}
	for k := range stretches {
		peak := 0.0
		for _, m := range minutes {
			if m.Start.Before(stretches[k].Start) || !m.Start.Before(stretches[k].End) {
				continue
			}
			peak = math.Max(peak, float64(m.Retries)/time.Minute.Seconds())
		}
		if peak > 0 {
			stretches[k].Shed = peak
		}
	}
}
