package report

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/retrylens/retrylens/query"
)

// The JSON report is a contract (docs/metrics.md): field names are the metric names there,
// rates are fractions, times RFC 3339 in UTC.
type jsonReport struct {
	GeneratedAt string         `json:"generated_at"`
	Window      string         `json:"window"`
	From        *string        `json:"from"`
	To          *string        `json:"to"`
	Endpoint    *string        `json:"endpoint"`
	Summary     jsonMetrics    `json:"summary"`
	Windows     []jsonWindow   `json:"windows"`
	Endpoints   []jsonEndpoint `json:"endpoints"`
	By          *string        `json:"by,omitempty"`
	Groups      []jsonGroup    `json:"groups,omitempty"`
	Loops429    jsonLoops      `json:"loops_429"`
	Findings    []jsonFinding  `json:"findings"`
	Linking     jsonLinking    `json:"linking"`
	Alerts      []jsonAlert    `json:"alerts"`
	Backoff     []jsonBackoff  `json:"backoff"`
	Incidents   []jsonIncident `json:"incidents"`
}

type jsonIncident struct {
	Start  string      `json:"start"`
	End    string      `json:"end"`
	Before jsonMetrics `json:"before"`
	During jsonMetrics `json:"during"`
	After  jsonMetrics `json:"after"`
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

type jsonAlert struct {
	Rule     string  `json:"rule"`
	Severity string  `json:"severity"`
	Start    string  `json:"start"`
	End      string  `json:"end"`
	Peak     float64 `json:"peak"`
}

func toJSONAlerts(as []query.Alert) []jsonAlert {
	out := make([]jsonAlert, 0, len(as))
	for _, a := range as {
		out = append(out, jsonAlert{Rule: a.Rule, Severity: a.Severity, Start: *rfc3339(a.Start), End: *rfc3339(a.End), Peak: a.Peak})
	}
	return out
}

type jsonEndpoint struct {
	Method string `json:"method"`
	Route  string `json:"route"`
	jsonMetrics
}

type jsonGroup struct {
	Key string `json:"key"`
	jsonMetrics
}

// jsonLinking counts logical requests by what linked their attempts.
type jsonLinking struct {
	Strong         int64 `json:"strong"`
	IdempotencyKey int64 `json:"idempotency_key"`
	InvocationID   int64 `json:"invocation_id"`
	RequestID      int64 `json:"request_id"`
	Heuristic      int64 `json:"heuristic"`
	Inferred       int64 `json:"inferred"`
}

type jsonLoops struct {
	Loops            int64              `json:"loops"`
	MaxLength        int64              `json:"max_length"`
	PrematureRetries int64              `json:"premature_retries"`
	BlindRetries     int64              `json:"blind_retries"`
	Retry429Share    *float64           `json:"retry_429_share"`
	Worst            []jsonLoopOffender `json:"worst"`
}

type jsonFinding struct {
	Kind     string   `json:"kind"`
	Count    int64    `json:"count"`
	Attempts int64    `json:"attempts"`
	Examples []string `json:"examples"`
}

type jsonMetrics struct {
	Requests           int64    `json:"requests"`
	Untagged           int64    `json:"untagged"`
	Inferred           int64    `json:"inferred"`
	FirstAttempts      int64    `json:"first_attempts"`
	Retries            int64    `json:"retries"`
	Amplification      *float64 `json:"amplification"`
	RetryRate          *float64 `json:"retry_rate"`
	RetrySuccessRate   *float64 `json:"retry_success_rate"`
	ExtraLoad          *float64 `json:"extra_load"`
	ActualSuccess      *float64 `json:"actual_success"`
	Recovered          int64    `json:"recovered"`
	Exhausted          int64    `json:"exhausted"`
	EffectiveSuccess   *float64 `json:"effective_success"`
	Status5xx          int64    `json:"status_5xx"`
	Status5xxFirst     int64    `json:"status_5xx_first"`
	Status5xxRetry     int64    `json:"status_5xx_retry"`
	Status429          int64    `json:"status_429"`
	Status429First     int64    `json:"status_429_first"`
	Status429Retry     int64    `json:"status_429_retry"`
	Status499          int64    `json:"status_499"`
	Status499First     int64    `json:"status_499_first"`
	Status499Retry     int64    `json:"status_499_retry"`
	ProxyAmplification *float64 `json:"proxy_amplification"`
	Verdict            string   `json:"verdict"`
}

type jsonWindow struct {
	Start string `json:"start"`
	jsonMetrics
}

func toJSONMetrics(m query.Metrics) jsonMetrics {
	return jsonMetrics{
		Requests: m.Requests, Untagged: m.Untagged, Inferred: m.Inferred, FirstAttempts: m.FirstAttempts, Retries: m.Retries,
		Amplification: m.Amplification, RetryRate: m.RetryRate, RetrySuccessRate: m.RetrySuccessRate,
		ExtraLoad: m.ExtraLoad, ActualSuccess: m.ActualSuccess,
		Recovered: m.Recovered, Exhausted: m.Exhausted, EffectiveSuccess: m.EffectiveSuccess,
		Status5xx: m.Status5xx.Total(), Status5xxFirst: m.Status5xx.First, Status5xxRetry: m.Status5xx.Retry,
		Status429: m.Status429.Total(), Status429First: m.Status429.First, Status429Retry: m.Status429.Retry,
		Status499: m.Status499.Total(), Status499First: m.Status499.First, Status499Retry: m.Status499.Retry,
		ProxyAmplification: m.ProxyAmplification,
		Verdict:            m.Verdict,
	}
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
	out := jsonReport{
		GeneratedAt: r.GeneratedAt.UTC().Format(time.RFC3339),
		Window:      r.Window,
		From:        rfc3339(r.From),
		To:          rfc3339(r.To),
		Summary:     toJSONMetrics(r.Summary),
		Windows:     make([]jsonWindow, 0, len(r.Windows)),
		Loops429: jsonLoops{Loops: r.Loops.Loops, MaxLength: r.Loops.MaxLength, PrematureRetries: r.Loops.PrematureRetries,
			BlindRetries: r.Loops.BlindRetries, Retry429Share: r.Loops.Retry429Share, Worst: loopOffenders(r.Loops.Worst)},
		Findings:  make([]jsonFinding, 0, len(r.Findings)),
		Endpoints: make([]jsonEndpoint, 0, len(r.Endpoints)),
		Alerts:    toJSONAlerts(r.Alerts),
		Backoff:   make([]jsonBackoff, 0, len(r.Backoff)),
		Incidents: make([]jsonIncident, 0, len(r.Incidents)),
		Linking: jsonLinking{Strong: r.Linking.Strong(), IdempotencyKey: r.Linking.IdempotencyKey, InvocationID: r.Linking.InvocationID,
			RequestID: r.Linking.RequestID, Heuristic: r.Linking.Heuristic, Inferred: r.Linking.Inferred},
	}
	if r.Endpoint != "" {
		out.Endpoint = &r.Endpoint
	}
	for _, in := range r.Incidents {
		out.Incidents = append(out.Incidents, jsonIncident{Start: *rfc3339(in.Start), End: *rfc3339(in.End),
			Before: toJSONMetrics(in.Before), During: toJSONMetrics(in.During), After: toJSONMetrics(in.After)})
	}
	for _, b := range r.Backoff {
		jb := jsonBackoff{Attempt: b.Attempt, Count: b.Count, P10ms: b.P10, P50ms: b.P50, P90ms: b.P90,
			NearMedian: b.NearMedian, Within: b.Within, BeyondPolicy: b.BeyondRetry}
		if b.Within != nil {
			jb.PolicyMinMS, jb.PolicyMaxMS = &b.Min, &b.Max
		}
		out.Backoff = append(out.Backoff, jb)
	}
	for _, g := range r.Endpoints {
		method, route, _ := strings.Cut(g.Key, " ")
		out.Endpoints = append(out.Endpoints, jsonEndpoint{Method: method, Route: route, jsonMetrics: toJSONMetrics(g.Metrics)})
	}
	if r.By != "" {
		out.By = &r.By
		out.Groups = make([]jsonGroup, 0, len(r.Groups))
		for _, g := range r.Groups {
			out.Groups = append(out.Groups, jsonGroup{Key: g.Key, jsonMetrics: toJSONMetrics(g.Metrics)})
		}
	}
	for _, f := range r.Findings {
		ex := f.Examples
		if ex == nil {
			ex = []string{}
		}
		out.Findings = append(out.Findings, jsonFinding{Kind: f.Kind, Count: f.Count, Attempts: f.Attempts, Examples: ex})
	}
	for _, win := range r.Windows {
		out.Windows = append(out.Windows, jsonWindow{Start: *rfc3339(win.Start), jsonMetrics: toJSONMetrics(win.Metrics)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// AlertsJSON is the alerts as the JSON report writes them, for check --format json.
func AlertsJSON(as []query.Alert) any { return toJSONAlerts(as) }

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
