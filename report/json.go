package report

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

// The JSON report is a contract (docs/metrics.md): field names are the metric names there,
// rates are fractions, times RFC 3339 in UTC. Its members, in order, are those JSON
// writes (jsonw.go).

// jsonSustained is judge.Sustained (docs/json.md).
type jsonSustained struct {
	Start         string  `json:"start"`
	End           string  `json:"end"`
	Windows       int     `json:"windows"`
	FirstAttempts int64   `json:"first_attempts"`
	Attempts      int64   `json:"attempts"`
	ShedPerSecond float64 `json:"shed_per_second"`
}

type jsonIncident struct {
	Start  string `json:"start"`
	End    string `json:"end"`
	Before object `json:"before"`
	During object `json:"during"`
	After  object `json:"after"`
}

type jsonBackoff struct {
	Attempt      int      `json:"attempt"`
	Count        int64    `json:"count"`
	P10ms        float64  `json:"p10_ms"`
	P50ms        float64  `json:"p50_ms"`
	P90ms        float64  `json:"p90_ms"`
	NearMedian   int64    `json:"near_median"`
	Within       *int64   `json:"within_policy"`
	PolicyMinMS  *float64 `json:"policy_min_ms"`
	PolicyMaxMS  *float64 `json:"policy_max_ms"`
	BeyondPolicy bool     `json:"beyond_policy_retries"`
}

// jsonHedging is query.Hedging (docs/json.md).
type jsonHedging struct {
	Requests  int64    `json:"requests"`
	Hedges    int64    `json:"hedges"`
	Wins      int64    `json:"wins"`
	Cancelled int64    `json:"cancelled"`
	P10ms     *float64 `json:"delay_p10_ms"`
	P50ms     *float64 `json:"delay_p50_ms"`
	P90ms     *float64 `json:"delay_p90_ms"`
}

type jsonAlert struct {
	Rule     string  `json:"rule"`
	Severity string  `json:"severity"`
	Start    string  `json:"start"`
	End      string  `json:"end"`
	Peak     float64 `json:"peak"`
}

func toJSONAlerts(as []judge.Alert) []jsonAlert {
	out := make([]jsonAlert, 0, len(as))
	for _, a := range as {
		out = append(out, jsonAlert{Rule: a.Rule, Severity: a.Severity, Start: *rfc3339(a.Start), End: *rfc3339(a.End), Peak: a.Peak})
	}
	return out
}

// jsonLinking counts logical requests by what linked their attempts.
type jsonLinking struct {
	Strong         int64 `json:"strong"`
	IdempotencyKey int64 `json:"idempotency_key"`
	InvocationID   int64 `json:"invocation_id"`
	RequestID      int64 `json:"request_id"`
	Heuristic      int64 `json:"heuristic"`
	Inferred       int64 `json:"inferred"`
	// how good the linking is: retries, those the heuristic linked, those with no earlier attempt
	Retries          int64 `json:"retries"`
	HeuristicRetries int64 `json:"heuristic_retries"`
	Orphans          int64 `json:"orphans"`
	UntaggedFirsts   int64 `json:"untagged_firsts"` // first attempts without the header, numbered by their key's tagged retries
	After2xx         int64 `json:"after_2xx"`       // retries the heuristic linked after an attempt logged 2xx (a timeout race)
}

type jsonLoops struct {
	Loops            int64              `json:"loops"`
	MaxLength        int64              `json:"max_length"`
	PrematureRetries int64              `json:"premature_retries"`
	BlindRetries     int64              `json:"blind_retries"`
	Unparsable       int64              `json:"unparsable_retry_after"`
	Retry429Share    *float64           `json:"retry_429_share"`
	Worst            []jsonLoopOffender `json:"worst"`
}

// jsonNotJudged is query.NotJudged (docs/json.md).
type jsonNotJudged struct {
	Kind  string `json:"kind"`
	Count int64  `json:"count"`
	Unit  string `json:"unit"`
	Log   string `json:"log"`
	Why   string `json:"why"`
}

// jsonInput is what the store holds beside the figures (backend.Health, docs/json.md).
type jsonInput struct {
	Lines    int64   `json:"lines"`
	Rejected int64   `json:"rejected"`
	Kept     int64   `json:"rejected_kept"`
	Repeats  int64   `json:"repeated_rows"`
	Mismatch *string `json:"registry_mismatch"`
}

type jsonFinding struct {
	Kind     string   `json:"kind"`
	Count    int64    `json:"count"`
	Attempts int64    `json:"attempts"`
	Examples []string `json:"examples"`
}

func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// JSON writes the report as one indented JSON object.
func JSON(w io.Writer, r *Report) error {
	var endpoint *string
	if r.Endpoint != "" {
		endpoint = &r.Endpoint
	}
	incidents := make([]jsonIncident, 0, len(r.Incidents))
	for _, in := range r.Incidents {
		incidents = append(incidents, jsonIncident{Start: *rfc3339(in.Start), End: *rfc3339(in.End),
			Before: metricsJSON(in.Before), During: metricsJSON(in.During), After: metricsJSON(in.After)})
	}
	sustained := make([]jsonSustained, 0, len(r.Sustained))
	for _, s := range r.Sustained {
		sustained = append(sustained, jsonSustained{Start: *rfc3339(s.Start), End: *rfc3339(s.End), Windows: s.Windows,
			FirstAttempts: s.FirstAttempts, Attempts: s.Attempts, ShedPerSecond: s.Shed})
	}
	backoff := make([]jsonBackoff, 0, len(r.Backoff))
	for _, b := range r.Backoff {
		jb := jsonBackoff{Attempt: b.Attempt, Count: b.Count, P10ms: b.P10, P50ms: b.P50, P90ms: b.P90,
			NearMedian: b.NearMedian, Within: b.Within, BeyondPolicy: b.BeyondRetry}
		if b.Within != nil {
			jb.PolicyMinMS, jb.PolicyMaxMS = &b.Min, &b.Max
		}
		backoff = append(backoff, jb)
	}
	var by *string
	if r.By != "" {
		by = &r.By
	}
	return writeJSON(w, []field{
		{key: "generated_at", value: r.GeneratedAt.UTC().Format(time.RFC3339)},
		{key: "window", value: r.Window},
		{key: "from", value: rfc3339(r.From)},
		{key: "to", value: rfc3339(r.To)},
		{key: "endpoint", value: endpoint},
		{key: "summary", value: metricsJSON(r.Summary)},
		{key: "windows", value: stream{len(r.Windows), func(i int) object {
			return metricsJSON(r.Windows[i].Metrics, member{"start", *rfc3339(r.Windows[i].Start)})
		}}},
		{key: "endpoints", value: stream{len(r.Endpoints), func(i int) object {
			method, route, _ := strings.Cut(r.Endpoints[i].Key, " ")
			return metricsJSON(r.Endpoints[i].Metrics, member{"method", method}, member{"route", route})
		}}},
		{key: "by", value: by, omit: by == nil},
		{key: "groups", value: stream{len(r.Groups), func(i int) object {
			return metricsJSON(r.Groups[i].Metrics, member{"key", r.Groups[i].Key})
		}}, omit: by == nil || len(r.Groups) == 0},
		{key: "loops_429", value: jsonLoops{Loops: r.Loops.Loops, MaxLength: r.Loops.MaxLength, PrematureRetries: r.Loops.PrematureRetries,
			BlindRetries: r.Loops.BlindRetries, Unparsable: r.Loops.UnparsableRetryAfter, Retry429Share: r.Loops.Retry429Share, Worst: loopOffenders(r.Loops.Worst)}},
		{key: "findings", value: toJSONFindings(r.Findings)},
		{key: "not_judged", value: toJSONNotJudged(r.NotJudged)},
		{key: "linking", value: jsonLinking{Strong: r.Linking.Strong(), IdempotencyKey: r.Linking.IdempotencyKey, InvocationID: r.Linking.InvocationID,
			RequestID: r.Linking.RequestID, Heuristic: r.Linking.Heuristic, Inferred: r.Linking.Inferred,
			Retries: r.Linking.Retries, HeuristicRetries: r.Linking.HeuristicRetries, Orphans: r.Linking.Orphans,
			UntaggedFirsts: r.Linking.UntaggedFirsts, After2xx: r.Linking.After2xx}},
		{key: "alerts", value: toJSONAlerts(r.Alerts)},
		{key: "backoff", value: backoff},
		{key: "hedging", value: jsonHedging{Requests: r.Hedging.Requests, Hedges: r.Hedging.Hedges, Wins: r.Hedging.Wins, Cancelled: r.Hedging.Cancelled,
			P10ms: r.Hedging.P10, P50ms: r.Hedging.P50, P90ms: r.Hedging.P90}},
		{key: "layers", value: layersJSON(r)},
		{key: "incidents", value: incidents},
		{key: "retry_sustained", value: sustained},
		{key: "input", value: inputJSON(r)},
	})
}

func toJSONNotJudged(ns []query.NotJudged) []jsonNotJudged {
	out := make([]jsonNotJudged, 0, len(ns))
	for _, n := range ns {
		out = append(out, jsonNotJudged(n))
	}
	return out
}

func inputJSON(r *Report) jsonInput {
	h := r.Health
	in := jsonInput{Lines: h.Lines, Rejected: h.Rejected, Kept: h.Kept, Repeats: h.Repeats}
	if h.Mismatch != "" {
		in.Mismatch = &h.Mismatch
	}
	return in
}

// jsonLoopOffender is one of the longest 429 loops.
type jsonLoopOffender struct {
	Request string `json:"request"`
	Route   string `json:"route"`
	Start   string `json:"start"`
	Length  int64  `json:"length"`
}

func loopOffenders(ws []query.LoopOffender) []jsonLoopOffender {
	out := make([]jsonLoopOffender, len(ws))
	for i, w := range ws {
		out[i] = jsonLoopOffender{Request: w.Request, Route: w.Route, Start: *rfc3339(w.Start), Length: w.Length}
	}
	return out
}

func toJSONFindings(fs []query.Finding) []jsonFinding {
	out := make([]jsonFinding, 0, len(fs))
	for _, f := range fs {
		ex := f.Examples
		if ex == nil {
			ex = []string{}
		}
		out = append(out, jsonFinding{Kind: f.Kind, Count: f.Count, Attempts: f.Attempts, Examples: ex})
	}
	return out
}

// jsonLayers is query.Layers and the summary's judge.Fates (docs/json.md).
type jsonLayers struct {
	Spans          int64     `json:"spans"`
	Matched        int64     `json:"matched"`
	MatchRate      *float64  `json:"match_rate"`
	UnmatchedLines int64     `json:"unmatched_lines"`
	Fates          jsonFates `json:"fates"`
}

// jsonFates is judge.Fates: the logical requests, then each fate as Fates.Each names it.
type jsonFates judge.Fates

func (f jsonFates) MarshalJSON() ([]byte, error) {
	b := append([]byte(`{"logical_requests":`), strconv.FormatInt(f.Logical, 10)...)
	judge.Fates(f).Each(func(name string, n int64) {
		b = append(strconv.AppendQuote(append(b, ','), name), ':')
		b = strconv.AppendInt(b, n, 10)
	})
	return append(b, '}'), nil
}

func layersJSON(r *Report) jsonLayers {
	l, f := r.Layers, r.Summary.Fates()
	j := jsonLayers{Spans: l.Spans, Matched: l.Matched, UnmatchedLines: l.UnmatchedLines, Fates: jsonFates(f)}
	if l.Spans > 0 {
		rate := float64(l.Matched) / float64(l.Spans)
		j.MatchRate = &rate
	}
	return j
}
