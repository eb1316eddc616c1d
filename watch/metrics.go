package watch

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/watch/promrules"
)

// snapshot is what the batches computed: the counts of every logical request that
// started before until (final: see query.Closed), per endpoint, and the last closed
// window. A batch adds the counts of the minutes it closed (a range report of whole
// minutes counts what its part of a report over every row counts), so its cost follows
// what was written since, not the database's size; the first batch of a process counts
// all before.
type snapshot struct {
	until     time.Time
	total     judge.Counts
	endpoints map[string]*judge.Counts // named endpoints, by "METHOD route"
	loops     query.Loops429           // the counts only
	hedging   query.Hedging            // the counts only
	findings  map[string]int64
	notJudged map[string]int64 // query.NotJudged's counts, by kind
	gaps      []int64          // per bucket of query.GapEdges, every attempt number
	gapSum    float64          // ms
	window    judge.Window     // the last closed window (no attempt data when it had no request)
}

func addCounts(t *judge.Counts, c judge.Counts) {
	for i := range t {
		t[i] += c[i]
	}
}

// otherEndpoint is the label of the endpoints past MaxEndpoints.
const otherEndpoint = "other"

// add returns s with the figures of pm, the range [s.until, until), added; endpoints get
// series of their own in the order they are first seen until MaxEndpoints have one (w.mu
// held). A nil s is empty.
func (w *Watcher) add(s *snapshot, pm *postmortem.Result, until time.Time) *snapshot {
	next := &snapshot{until: until, endpoints: map[string]*judge.Counts{}, findings: map[string]int64{}, notJudged: map[string]int64{},
		gaps: make([]int64, len(query.GapEdges)+1), window: judge.Window{Start: until.Truncate(w.o.Width).Add(-w.o.Width)}}
	next.window.Metrics = judge.Judged(judge.Metrics{}, nil, w.o.Figures.Query.Rules)
	if s != nil {
		next.total, next.loops, next.hedging, next.gapSum = s.total, s.loops, s.hedging, s.gapSum
		for k, t := range s.endpoints {
			c := *t
			next.endpoints[k] = &c
		}
		maps.Copy(next.findings, s.findings)
		maps.Copy(next.notJudged, s.notJudged)
		copy(next.gaps, s.gaps)
	}
	addCounts(&next.total, pm.Summary.Counts)
	for _, e := range pm.Endpoints {
		if !w.named[e.Key] && len(w.named) < w.o.MaxEndpoints {
			w.named[e.Key] = true
		}
		if !w.named[e.Key] {
			w.ovf[e.Key] = true
			continue
		}
		if next.endpoints[e.Key] == nil {
			next.endpoints[e.Key] = &judge.Counts{}
		}
		addCounts(next.endpoints[e.Key], e.Counts)
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
	for _, n := range pm.NotJudged {
		next.notJudged[n.Kind] += n.Count
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

// liveCount is a count (a column of judge.Counts) served per endpoint under a name
// people graph, with the labels that tell it from the other counts of the same metric.
type liveCount struct {
	count  string
	name   string
	labels []string // names and values, in pairs
	help   string
}

// liveCounts are the counts served per endpoint (method and route labels first), beside
// every figure's numerator and denominator (promrules.FigureNumerator).
var liveCounts = []liveCount{
	{"first_attempts", "retrylens_attempts_total", []string{"attempt", "first"}, attemptsHelp},
	{"retries", "retrylens_attempts_total", []string{"attempt", "retry"}, attemptsHelp},
	{"untagged", "retrylens_attempts_total", []string{"attempt", "untagged"}, attemptsHelp},
	{"second_attempts", "retrylens_requests_retried_total", nil, "Logical requests retried at least once (attempts numbered 1): the retry rate's numerator."},
	{"retries_ok", "retrylens_attempts_succeeded_total", []string{"attempt", "retry"}, "Retries answered 2xx (retry success's numerator)."},
	{"status_5xx_first", "retrylens_attempts_failed_total", []string{"attempt", "first", "status", "5xx"}, failedHelp},
	{"status_5xx_retry", "retrylens_attempts_failed_total", []string{"attempt", "retry", "status", "5xx"}, failedHelp},
	{"status_429_first", "retrylens_attempts_failed_total", []string{"attempt", "first", "status", "429"}, failedHelp},
	{"status_429_retry", "retrylens_attempts_failed_total", []string{"attempt", "retry", "status", "429"}, failedHelp},
	{"abandoned_first", "retrylens_attempts_abandoned_total", []string{"attempt", "first"}, abandonedHelp},
	{"abandoned_retry", "retrylens_attempts_abandoned_total", []string{"attempt", "retry"}, abandonedHelp},
	{"cancelled_first", "retrylens_attempts_cancelled_total", []string{"attempt", "first"}, cancelledHelp},
	{"cancelled_retry", "retrylens_attempts_cancelled_total", []string{"attempt", "retry"}, cancelledHelp},
	{"recovered", "retrylens_requests_total", []string{"outcome", "recovered"}, outcomeHelp},
	{"exhausted", "retrylens_requests_total", []string{"outcome", "exhausted"}, outcomeHelp},
}

const (
	attemptsHelp  = "Attempts logged, by attempt: first (attempt number 0), retry, or untagged (no attempt number)."
	failedHelp    = "Attempts answered 5xx or 429, by attempt and status class."
	abandonedHelp = "Attempts whose answer the client did not wait for (499, or 0), by attempt."
	cancelledHelp = "Abandoned attempts the client cancelled because another attempt of the request won."
	outcomeHelp   = "Logical requests by outcome, counted by their first attempt's time: recovered (the first attempt failed, a retry got 2xx), exhausted (retried, never 2xx)."
	fatesHelp     = "Logical requests by fate at each retry layer (docs/metrics.md, \"Layers\"), counted by their first attempt's time; they add up to the logical requests."
)

// labelled returns the label names and values of l.
func (l liveCount) labelled() (names, values []string) {
	for i := 0; i+1 < len(l.labels); i += 2 {
		names, values = append(names, l.labels[i]), append(values, l.labels[i+1])
	}
	return names, values
}

// labelSep joins label values into a map key.
const labelSep = "\x00"

func ratio(num, den int64) float64 {
	if den <= 0 {
		return math.NaN()
	}
	return float64(num) / float64(den)
}

var verdicts = []string{judge.Fuelling, judge.Rescuing, judge.Quiet, judge.Insufficient, judge.NoAttemptData}

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
	c("retrylens_late_rows_total", "Rows loaded after the minute they belong to was counted (a late flush, a second gateway's log); the batch that loads them counts every closed request again.", float64(st.late), prometheus.CounterValue)
	c("retrylens_endpoints_overflow_total", "Distinct endpoints counted in the endpoint=\"other\" series, past --max-endpoints.", float64(len(w.ovf)), prometheus.CounterValue)
	s := w.snap
	if s == nil {
		return
	}
	c("retrylens_closed_until_seconds", "Logical requests that started before this time (Unix) are in the counters: their chains can no longer grow.", float64(s.until.Unix()), prometheus.GaugeValue)
	// Per endpoint, and the rest as "other": the total less the named ones. Two endpoints
	// whose labels read the same once made safe share a series.
	others := s.total
	for _, t := range s.endpoints {
		for i := range others {
			others[i] -= t[i]
		}
	}
	type series struct {
		desc   *prometheus.Desc
		values []string
	}
	var order []string
	sums, descs := map[string]float64{}, map[string]series{}
	emit := func(name, help string, names, values []string, v int64) {
		key := name + labelSep + strings.Join(values, labelSep)
		if _, ok := descs[key]; !ok {
			descs[key] = series{prometheus.NewDesc(name, help, append([]string{"method", "route"}, names...), nil), values}
			order = append(order, key)
		}
		sums[key] += float64(v)
	}
	each := func(endpoint []string, c judge.Counts) {
		for _, l := range liveCounts {
			names, values := l.labelled()
			emit(l.name, l.help, names, append(slices.Clone(endpoint), values...), c.Get(l.count))
		}
		judge.Metrics{Counts: c}.Fates().Each(func(fate string, n int64) {
			emit("retrylens_request_fates_total", fatesHelp, []string{"fate"}, append(slices.Clone(endpoint), fate), n)
		})
		for _, f := range judge.Figures {
			num, den := f.Sums(c)
			labels := append(slices.Clone(endpoint), f.Key)
			emit(promrules.FigureNumerator, "Each figure's numerator (docs/live.md): the figure is increase(numerator) / increase(denominator).", []string{"figure"}, labels, num)
			emit(promrules.FigureDenominator, "Each figure's denominator (docs/live.md).", []string{"figure"}, labels, den)
		}
	}
	each([]string{otherEndpoint, otherEndpoint}, others)
	for ep, t := range s.endpoints {
		each(endpointLabels(ep), *t)
	}
	for _, key := range order {
		d := descs[key]
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, max(0, sums[key]), d.values...)
	}
	c("retrylens_hedged_requests_total", "Logical requests with a hedge (an attempt sent while another was in flight).", float64(s.hedging.Requests), prometheus.CounterValue)
	c("retrylens_hedges_total", "Hedges: attempts started before an earlier attempt of their request ended.", float64(s.hedging.Hedges), prometheus.CounterValue)
	c("retrylens_hedge_wins_total", "Hedges that were their request's first 2xx.", float64(s.hedging.Wins), prometheus.CounterValue)
	c("retrylens_loops_429_total", "Logical requests with two or more throttled attempts in a row (429, --throttle-status, a throttling error code).", float64(s.loops.Loops), prometheus.CounterValue)
	c("retrylens_premature_retries_total", "Retries started before the previous answer's Retry-After had passed.", float64(s.loops.PrematureRetries), prometheus.CounterValue)
	c("retrylens_blind_retries_total", "Retries after a throttling answer that carried no Retry-After.", float64(s.loops.BlindRetries), prometheus.CounterValue)
	for _, kind := range query.FindingKinds {
		if !query.AddsUp(kind) {
			continue // a range's own distribution: the report's alone
		}
		c("retrylens_findings_total", "Logical requests with a finding (docs/metrics.md), by kind; possible_duplicate_write: writes that may have gone through twice.",
			float64(s.findings[kind]), prometheus.CounterValue, "kind", kind)
	}
	for _, kind := range slices.Sorted(maps.Keys(s.notJudged)) {
		c("retrylens_not_judged_total", "What a finding could not be judged on, by kind, where the log lacks the field it needs (docs/metrics.md, \"What the log cannot tell\"): requests; attempts for budget_denied.",
			float64(s.notJudged[kind]), prometheus.CounterValue, "kind", kind)
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
	win := s.window
	c("retrylens_window_start_seconds", "Start of the last closed window (Unix time).", float64(win.Start.Unix()), prometheus.GaugeValue)
	for _, g := range []struct{ count, name, help string }{
		{"first_attempts", "retrylens_window_first_attempts", "First attempts in the last closed window."},
		{"retries", "retrylens_window_retries", "Retries in the last closed window."},
		{"recovered", "retrylens_window_recovered", "Logical requests recovered in the last closed window."},
		{"exhausted", "retrylens_window_exhausted", "Logical requests exhausted in the last closed window."},
	} {
		c(g.name, g.help, float64(win.Counts.Get(g.count)), prometheus.GaugeValue)
	}
	for _, f := range judge.Figures {
		num, den := f.Sums(win.Counts)
		c("retrylens_window_"+f.Key, f.Help+" In the last closed window (NaN without a denominator).", ratio(num, den), prometheus.GaugeValue)
	}
	for _, v := range verdicts {
		c("retrylens_window_verdict", "The last closed window's verdict: 1 for the one it has.", b2f(s.window.Verdict == v), prometheus.GaugeValue, "verdict", v)
	}
	for _, r := range w.o.Figures.Query.Rules {
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
