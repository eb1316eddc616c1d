package watch

import (
	"maps"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

// snapshot is what the batches computed: the figures of every logical request that
// started before until (final: see query.Closed), per endpoint, and the last closed
// window. A batch adds the figures of the minutes it closed (a range report counts what
// its part of a report over every row counts), so its cost follows what was written
// since, not the database's size; the first batch of a process counts all before.
type snapshot struct {
	until     time.Time
	total     tally
	endpoints map[string]tally // named endpoints, by "METHOD route"
	loops     query.Loops429   // the counts only
	hedging   query.Hedging    // the counts only
	findings  map[string]int64
	gaps      []int64      // per bucket of query.GapEdges, every attempt number
	gapSum    float64      // ms
	window    query.Window // the last closed window (zero figures when it had no request)
}

// tally is the endpoint counters' values: by counter name and label values, joined by
// labelSep.
type tally map[string]int64

const labelSep = "\x00"

func (t tally) add(m query.Metrics) {
	for _, k := range endpointCounters {
		for _, l := range k.values(m) {
			t[k.name+labelSep+strings.Join(l.labels, labelSep)] += l.v
		}
	}
}

// otherEndpoint is the label of the endpoints past MaxEndpoints.
const otherEndpoint = "other"

// add returns s with the figures of pm, the range [s.until, until), added; endpoints get
// series of their own in the order they are first seen until MaxEndpoints have one (w.mu
// held). A nil s is empty.
func (w *Watcher) add(s *snapshot, pm *postmortem.Result, until time.Time) *snapshot {
	next := &snapshot{until: until, total: tally{}, endpoints: map[string]tally{}, findings: map[string]int64{},
		gaps: make([]int64, len(query.GapEdges)+1), window: query.Window{Start: until.Truncate(w.o.Width).Add(-w.o.Width)}}
	next.window.Verdict = query.Quiet
	if s != nil {
		next.loops, next.hedging, next.gapSum = s.loops, s.hedging, s.gapSum
		maps.Copy(next.total, s.total)
		for k, t := range s.endpoints {
			next.endpoints[k] = maps.Clone(t)
		}
		maps.Copy(next.findings, s.findings)
		copy(next.gaps, s.gaps)
	}
	next.total.add(pm.Summary)
	for _, e := range pm.Endpoints {
		if !w.named[e.Key] && len(w.named) < w.o.MaxEndpoints {
			w.named[e.Key] = true
		}
		if !w.named[e.Key] {
			w.ovf[e.Key] = true
			continue
		}
		if next.endpoints[e.Key] == nil {
			next.endpoints[e.Key] = tally{}
		}
		next.endpoints[e.Key].add(e.Metrics)
	}
	next.loops.Loops += pm.Loops.Loops
	next.loops.PrematureRetries += pm.Loops.PrematureRetries
	next.loops.BlindRetries += pm.Loops.BlindRetries
	next.hedging.Requests += pm.Hedging.Requests
	next.hedging.Hedges += pm.Hedging.Hedges
	next.hedging.Wins += pm.Hedging.Wins
	for _, f := range pm.Findings {
		next.findings[f.Kind] += f.Count
	}
	for _, g := range pm.Gaps {
		for i, n := range g.Counts {
			next.gaps[i] += n
		}
		next.gapSum += g.SumMs
	}
	for _, win := range pm.Windows {
		if win.Start.Equal(next.window.Start) {
			next.window = win
		}
	}
	return next
}

// counter is one counted figure of a slice's Metrics, with the labels that split it.
type counter struct {
	name, help string
	labels     []string
	values     func(m query.Metrics) []labelled
}

type labelled struct {
	v      int64
	labels []string
}

func split(s query.Split) []labelled {
	return []labelled{{s.First, []string{"first"}}, {s.Retry, []string{"retry"}}}
}

// endpointCounters are counted per endpoint (method and route labels first).
var endpointCounters = []counter{
	{"retrylens_attempts_total", "Attempts logged, by attempt: first (attempt number 0), retry, or untagged (no attempt number).",
		[]string{"attempt"}, func(m query.Metrics) []labelled {
			return []labelled{{m.FirstAttempts, []string{"first"}}, {m.Retries, []string{"retry"}}, {m.Untagged, []string{"untagged"}}}
		}},
	{"retrylens_attempts_failed_total", "Attempts answered 5xx or 429, by attempt and status class.",
		[]string{"attempt", "status"}, func(m query.Metrics) []labelled {
			var out []labelled
			for class, s := range map[string]query.Split{"5xx": m.Status5xx, "429": m.Status429} {
				for _, l := range split(s) {
					out = append(out, labelled{l.v, append(l.labels, class)})
				}
			}
			return out
		}},
	{"retrylens_attempts_succeeded_total", "Retries answered 2xx, not counting those the client cancelled because another attempt won (retry success's numerator).",
		[]string{"attempt"}, func(m query.Metrics) []labelled {
			// The report keeps the ratio; its numerator is the ratio times its
			// denominator, exactly, rounded.
			return []labelled{{int64(math.Round(ratio0(m.RetrySuccessRate) * float64(m.Retries-m.Cancelled.Retry))), []string{"retry"}}}
		}},
	{"retrylens_attempts_abandoned_total", "Attempts whose answer the client did not wait for (499, or 0), by attempt.",
		[]string{"attempt"}, func(m query.Metrics) []labelled { return split(m.Abandoned) }},
	{"retrylens_attempts_cancelled_total", "Abandoned attempts the client cancelled because another attempt of the request won.",
		[]string{"attempt"}, func(m query.Metrics) []labelled { return split(m.Cancelled) }},
	{"retrylens_requests_total", "Logical requests by final outcome: recovered (first attempt failed, a retry got 2xx), exhausted (retried, never 2xx), first_try (every other: the first attempt's answer stood).",
		[]string{"outcome"}, func(m query.Metrics) []labelled {
			return []labelled{{max(0, m.FirstAttempts-m.Recovered-m.Exhausted), []string{"first_try"}},
				{m.Recovered, []string{"recovered"}}, {m.Exhausted, []string{"exhausted"}}}
		}},
}

// gauge is one figure of the last closed window.
type gauge struct {
	name, help string
	value      func(w query.Window) float64
}

func ratio(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func ratio0(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

var windowGauges = []gauge{
	{"retrylens_window_start_seconds", "Start of the last closed window (Unix time).", func(w query.Window) float64 { return float64(w.Start.Unix()) }},
	{"retrylens_window_first_attempts", "First attempts in the last closed window.", func(w query.Window) float64 { return float64(w.FirstAttempts) }},
	{"retrylens_window_retries", "Retries in the last closed window.", func(w query.Window) float64 { return float64(w.Retries) }},
	{"retrylens_window_amplification", "Attempts per first attempt in the last closed window (NaN without first attempts).", func(w query.Window) float64 { return ratio(w.Amplification) }},
	{"retrylens_window_retry_rate", "Retries per first attempt in the last closed window.", func(w query.Window) float64 { return ratio(w.RetryRate) }},
	{"retrylens_window_retry_success_rate", "Share of retries answered 2xx in the last closed window.", func(w query.Window) float64 { return ratio(w.RetrySuccessRate) }},
	{"retrylens_window_recovered", "Logical requests recovered in the last closed window.", func(w query.Window) float64 { return float64(w.Recovered) }},
	{"retrylens_window_exhausted", "Logical requests exhausted in the last closed window.", func(w query.Window) float64 { return float64(w.Exhausted) }},
}

var verdicts = []string{query.Fuelling, query.Rescuing, query.Quiet, query.Insufficient, query.NoAttemptData}

// maxLabel is the longest label value kept: routes come from the logs.
const maxLabel = 200

// labelValue makes a value from the logs a label: valid UTF-8, no control characters,
// at most maxLabel bytes.
func labelValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, s)
	if len(s) > maxLabel {
		s = strings.ToValidUTF8(s[:maxLabel], "") + "…"
	}
	return s
}

// endpointLabels splits "METHOD route".
func endpointLabels(key string) []string {
	method, route, ok := strings.Cut(key, " ")
	if !ok {
		return []string{"-", labelValue(key)}
	}
	return []string{labelValue(method), labelValue(route)}
}

// Describe sends nothing: the series depend on the endpoints and rules seen, which
// makes the Watcher an unchecked collector.
func (w *Watcher) Describe(chan<- *prometheus.Desc) {}

// Collect sends the figures of the last batch.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	c := func(name, help string, v float64, kind prometheus.ValueType, labels ...string) {
		var keys []string
		for i := 0; i+1 < len(labels); i += 2 {
			keys = append(keys, labels[i])
		}
		var vals []string
		for i := 1; i < len(labels); i += 2 {
			vals = append(vals, labels[i])
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, keys, nil), kind, v, vals...)
	}
	c("retrylens_lines_total", "Lines read from the logs (loaded or rejected), by every load of the database.", float64(st.loadedLines), prometheus.CounterValue)
	c("retrylens_lines_rejected_total", "Lines rejected as malformed (retrylens query 'SELECT * FROM rejects').", float64(st.rejected), prometheus.CounterValue)
	c("retrylens_batches_total", "Batches run.", float64(st.batches), prometheus.CounterValue)
	c("retrylens_batch_failures_total", "Batches that failed (the next one tries again).", float64(st.failed), prometheus.CounterValue)
	c("retrylens_rotations_total", "Rotations seen: a followed name pointing at a new file, or a file that got shorter.", float64(st.rotations), prometheus.CounterValue)
	c("retrylens_last_batch_timestamp_seconds", "When the last batch started (Unix time).", float64(st.lastBatch.UnixMilli())/1000, prometheus.GaugeValue)
	c("retrylens_last_batch_duration_seconds", "How long the last batch took.", st.lastDuration.Seconds(), prometheus.GaugeValue)
	c("retrylens_ingest_lag_bytes", "Bytes the followed files hold beyond what was loaded.", float64(w.follow.lagBytes()), prometheus.GaugeValue)
	c("retrylens_endpoints_overflow_total", "Distinct endpoints counted in the endpoint=\"other\" series, past --max-endpoints.", float64(len(w.ovf)), prometheus.CounterValue)
	s := w.snap
	if s == nil {
		return
	}
	c("retrylens_closed_until_seconds", "Logical requests that started before this time (Unix) are in the counters: their chains can no longer grow.", float64(s.until.Unix()), prometheus.GaugeValue)
	// Per endpoint, and the rest as "other": the total less the named ones. Two endpoints
	// whose labels read the same once made safe share a series.
	for _, k := range endpointCounters {
		desc := prometheus.NewDesc(k.name, k.help, append([]string{"method", "route"}, k.labels...), nil)
		series := map[string]int64{}
		other := otherEndpoint + labelSep + otherEndpoint + labelSep
		for key, v := range s.total {
			if labels, ok := strings.CutPrefix(key, k.name+labelSep); ok {
				series[other+labels] += v
			}
		}
		for ep, t := range s.endpoints {
			named := strings.Join(endpointLabels(ep), labelSep) + labelSep
			for key, v := range t {
				if labels, ok := strings.CutPrefix(key, k.name+labelSep); ok {
					series[other+labels] -= v
					series[named+labels] += v
				}
			}
		}
		for key, v := range series {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(max(0, v)), strings.Split(key, labelSep)...)
		}
	}
	c("retrylens_hedged_requests_total", "Logical requests with a hedge (an attempt sent while another was in flight).", float64(s.hedging.Requests), prometheus.CounterValue)
	c("retrylens_hedges_total", "Hedges: attempts started before an earlier attempt of their request ended.", float64(s.hedging.Hedges), prometheus.CounterValue)
	c("retrylens_hedge_wins_total", "Hedges that were their request's first 2xx.", float64(s.hedging.Wins), prometheus.CounterValue)
	c("retrylens_loops_429_total", "Logical requests with two or more 429s in a row.", float64(s.loops.Loops), prometheus.CounterValue)
	c("retrylens_premature_retries_total", "Retries started before the previous answer's Retry-After had passed.", float64(s.loops.PrematureRetries), prometheus.CounterValue)
	c("retrylens_blind_retries_total", "Retries after a throttling answer that carried no Retry-After.", float64(s.loops.BlindRetries), prometheus.CounterValue)
	for _, kind := range query.FindingKinds {
		c("retrylens_findings_total", "Logical requests with a finding (docs/metrics.md), by kind; possible_duplicate_write: writes that may have gone through twice.",
			float64(s.findings[kind]), prometheus.CounterValue, "kind", kind)
	}
	// The backoff histogram: buckets are [edge before, edge) in ms; Prometheus's le is
	// "at most", which a gap exactly on an edge (to the ms) reads one bucket high.
	buckets := map[float64]uint64{}
	var cum, n uint64
	for i, e := range query.GapEdges {
		cum += uint64(s.gaps[i])
		buckets[e/1000] = cum
	}
	n = cum + uint64(s.gaps[len(s.gaps)-1])
	ch <- prometheus.MustNewConstHistogram(prometheus.NewDesc("retrylens_backoff_seconds",
		"Time from an attempt's end to its retry's start, over retries that waited (hedges left out).", nil, nil),
		n, s.gapSum/1000, buckets)
	for _, g := range windowGauges {
		c(g.name, g.help, g.value(s.window), prometheus.GaugeValue)
	}
	for _, v := range verdicts {
		c("retrylens_window_verdict", "The last closed window's verdict: 1 for the one it has.", b2f(s.window.Verdict == v), prometheus.GaugeValue, "verdict", v)
	}
	for _, r := range w.o.Rules {
		if r.Severity == "" {
			continue // the rescuing rule gives verdicts, not alerts
		}
		firing := false
		for _, f := range s.window.Fired {
			firing = firing || f == r.Name
		}
		c("retrylens_window_alert_firing", "Alert rules firing in the last closed window (1) or not (0).", b2f(firing), prometheus.GaugeValue,
			"rule", r.Name, "severity", r.Severity)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
