// Package budget replays recorded attempts through retry budgets and reports what each
// would have changed: the retries it would have denied, the amplification that would
// have followed, and the recoveries that would have been lost.
//
// Replay is in start-time order. First attempts always go out (budgets govern retries);
// once a retry of a logical request is denied, its later attempts are not sent either.
// Models that learn from answers (gRPC, AWS) see each answer at its end time.
package budget

import (
	"container/heap"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/retrylens/retrylens/query"
)

// Model decides whether a retry may go out.
type Model interface {
	Name() string
	// Allow is asked before retry a starts at its Start; prev is the request's previous
	// attempt that was sent (nil when the first attempt is not in the data).
	Allow(a, prev *query.Attempt) bool
	// Sent is told of every attempt that goes out, first attempts included.
	Sent(a *query.Attempt)
	// Answered is told of every sent attempt's answer, at its End.
	Answered(a *query.Attempt)
}

// Result is what a model would have changed.
type Result struct {
	Model              string
	FirstAttempts      int
	Retries            int // recorded
	Allowed            int
	Denied             int // retries that would not have been sent (denied, or after a denial)
	AmplificationAfter float64
	Amplification      float64  // recorded
	Recovered          int      // recorded: first attempt not 2xx, a later one 2xx
	LostRecoveries     int      // of those, the ones whose rescuing retry would not have been sent
	Windows            []Window // per window of attempt start times, when Replay was given a width
}

// Window is a model's effect within one window of start times.
type Window struct {
	Start                                   time.Time
	FirstAttempts, Retries, Allowed, Denied int
}

func ok(a *query.Attempt) bool { return a.Status >= 200 && a.Status < 300 }

type pending []*query.Attempt

func (p pending) Len() int             { return len(p) }
func (p pending) Less(i, j int) bool   { return p[i].End.Before(p[j].End) }
func (p pending) Swap(i, j int)        { p[i], p[j] = p[j], p[i] }
func (p *pending) Push(x any)          { *p = append(*p, x.(*query.Attempt)) }
func (p *pending) Pop() any            { old := *p; x := old[len(old)-1]; *p = old[:len(old)-1]; return x }
func (p pending) peek() *query.Attempt { return p[0] }

// Replay runs the attempts (ordered by start, as query.Set.Attempts returns them)
// through m; a positive width also splits the figures by windows of start time.
func Replay(attempts []query.Attempt, m Model, width time.Duration) Result {
	ids, n := keyIDs(attempts)
	return replay(attempts, ids, n, m, width)
}

// keyIDs numbers the attempts' logical requests (0 to n−1), so that a replay keeps its
// state in a slice: Advise replays the same attempts through a hundred settings.
func keyIDs(attempts []query.Attempt) ([]int32, int) {
	ids := make([]int32, len(attempts))
	of := make(map[string]int32, len(attempts)/2)
	for i := range attempts {
		id, ok := of[attempts[i].Key]
		if !ok {
			id = int32(len(of))
			of[attempts[i].Key] = id
		}
		ids[i] = id
	}
	return ids, len(of)
}

// replay is Replay with the attempts' request numbers (keyIDs).
func replay(attempts []query.Attempt, ids []int32, nKeys int, m Model, width time.Duration) Result {
	r := Result{Model: m.Name()}
	window := func(t time.Time) *Window {
		if width <= 0 {
			return &Window{}
		}
		start := t.Truncate(width)
		if n := len(r.Windows); n == 0 || !r.Windows[n-1].Start.Equal(start) {
			r.Windows = append(r.Windows, Window{Start: start})
		}
		return &r.Windows[len(r.Windows)-1]
	}
	type state struct {
		denied     bool
		prev       *query.Attempt
		firstOK    bool
		seenFirst  bool
		anyOK      bool // recorded
		anyOKAfter bool // in the replay
	}
	states := make([]state, nKeys)
	var inflight pending
	for i := range attempts {
		a := &attempts[i]
		for inflight.Len() > 0 && !inflight.peek().End.After(a.Start) {
			m.Answered(heap.Pop(&inflight).(*query.Attempt))
		}
		st := &states[ids[i]]
		w := window(a.Start)
		if a.N == 0 {
			r.FirstAttempts++
			w.FirstAttempts++
			st.seenFirst, st.firstOK = true, ok(a)
		} else {
			r.Retries++
			w.Retries++
		}
		st.anyOK = st.anyOK || ok(a)
		send := true
		if a.N > 0 {
			send = !st.denied && m.Allow(a, st.prev)
			if send {
				r.Allowed++
				w.Allowed++
			} else {
				r.Denied++
				w.Denied++
				st.denied = true
			}
		}
		if send {
			m.Sent(a)
			heap.Push(&inflight, a)
			st.prev = a
			st.anyOKAfter = st.anyOKAfter || ok(a)
		}
	}
	for inflight.Len() > 0 {
		m.Answered(heap.Pop(&inflight).(*query.Attempt))
	}
	for i := range states {
		st := &states[i]
		if st.seenFirst && !st.firstOK && st.anyOK {
			r.Recovered++
			if !st.anyOKAfter {
				r.LostRecoveries++
			}
		}
	}
	if r.FirstAttempts > 0 {
		r.Amplification = float64(r.FirstAttempts+r.Retries) / float64(r.FirstAttempts)
		r.AmplificationAfter = float64(r.FirstAttempts+r.Allowed) / float64(r.FirstAttempts)
	}
	return r
}

// failed reports whether an answer is a retryable failure (query.RetryableFailure), or
// none was logged (as no answer).
func failed(a *query.Attempt) bool { return a.Status < 0 || query.RetryableFailure(a.Status) }

// timedOut reports whether an answer looks like a timeout (no answer, 499, 504).
func timedOut(a *query.Attempt) bool { return a.Status <= 0 || a.Status == 499 || a.Status == 504 }

// Cap allows at most Max attempts per request, the first included.
type Cap struct{ Max int }

func (c *Cap) Name() string                   { return "cap " + strconv.Itoa(c.Max) + " attempts" }
func (c *Cap) Allow(a, _ *query.Attempt) bool { return a.N < c.Max }
func (c *Cap) Sent(*query.Attempt)            {}
func (c *Cap) Answered(*query.Attempt)        {}

// RetryAfter denies a retry that starts before the previous answer's Retry-After passed.
type RetryAfter struct{}

func (RetryAfter) Name() string { return "retry-after" }
func (RetryAfter) Allow(a, prev *query.Attempt) bool {
	if prev == nil || prev.RetryAfter == "" {
		return true
	}
	if secs, err := strconv.ParseFloat(prev.RetryAfter, 64); err == nil {
		return !a.Start.Before(prev.End.Add(time.Duration(secs * float64(time.Second))))
	}
	if t, err := time.Parse(time.RFC1123, prev.RetryAfter); err == nil {
		return !a.Start.Before(t)
	}
	return true
}
func (RetryAfter) Sent(*query.Attempt)     {}
func (RetryAfter) Answered(*query.Attempt) {}

// Ratio is the budget of Finagle's RetryBudget and Linkerd's ServiceProfile: over the
// last TTL, retries may number Ratio × first attempts plus MinPerSec × TTL. A retry
// withdraws a whole one from that balance, as Finagle's token bucket and tower's Budget
// (Linkerd's proxy) do: with a share of 0.1 it takes ten requests to earn one.
type Ratio struct {
	Label     string
	Ratio     float64
	MinPerSec float64
	TTL       time.Duration

	requests, retries []time.Time
}

func (b *Ratio) Name() string { return b.Label }

func (b *Ratio) expire(now time.Time) {
	cut := now.Add(-b.TTL)
	for len(b.requests) > 0 && !b.requests[0].After(cut) {
		b.requests = b.requests[1:]
	}
	for len(b.retries) > 0 && !b.retries[0].After(cut) {
		b.retries = b.retries[1:]
	}
}

func (b *Ratio) Allow(a, _ *query.Attempt) bool {
	b.expire(a.Start)
	return float64(len(b.retries))+1 <= b.Ratio*float64(len(b.requests))+b.MinPerSec*b.TTL.Seconds()+1e-9
}

func (b *Ratio) Sent(a *query.Attempt) {
	if a.N == 0 {
		b.requests = append(b.requests, a.Start)
	} else {
		b.retries = append(b.retries, a.Start)
	}
}
func (b *Ratio) Answered(*query.Attempt) {}

// GRPC is gRPC's retry throttling: a token count starts at MaxTokens, loses 1 on every
// failed answer and gains TokenRatio on every other one; retries go out only while it is
// above MaxTokens / 2.
type GRPC struct {
	MaxTokens, TokenRatio float64
	tokens                float64
	started               bool
}

func (g *GRPC) Name() string { return "grpc" }
func (g *GRPC) init() {
	if !g.started {
		g.tokens, g.started = g.MaxTokens, true
	}
}
func (g *GRPC) Allow(*query.Attempt, *query.Attempt) bool { g.init(); return g.tokens > g.MaxTokens/2 }
func (g *GRPC) Sent(*query.Attempt)                       { g.init() }
func (g *GRPC) Answered(a *query.Attempt) {
	g.init()
	if failed(a) {
		g.tokens = max(0, g.tokens-1)
	} else {
		g.tokens = min(g.MaxTokens, g.tokens+g.TokenRatio)
	}
}

// AWS is the AWS SDKs' standard retry mode: a quota of Quota tokens; a retry costs Cost
// (TimeoutCost after a timeout, ThrottleCost after a throttle: a 429 or a throttling
// error code; 0 takes Cost) and is refunded when it succeeds; a first attempt that
// succeeds adds 1. Before the 2026 defaults a retry cost 5 and 10 after a timeout; with
// them 14, and 5 after a throttle (aws-sdk-go-v2 1.48's retry package).
type AWS struct {
	Label                                  string // "" is aws-standard
	Quota, Cost, TimeoutCost, ThrottleCost float64
	tokens                                 float64
	started                                bool
	paid                                   map[*query.Attempt]float64
	last                                   map[string]*query.Attempt
}

func (w *AWS) Name() string {
	if w.Label != "" {
		return w.Label
	}
	return "aws-standard"
}
func (w *AWS) init() {
	if !w.started {
		w.tokens, w.started = w.Quota, true
		w.paid, w.last = map[*query.Attempt]float64{}, map[string]*query.Attempt{}
	}
}
func (w *AWS) Allow(a, prev *query.Attempt) bool {
	w.init()
	cost := w.Cost
	switch {
	case prev != nil && w.ThrottleCost > 0 && (prev.Status == 429 || slices.Contains(query.ThrottleCodes, prev.ErrorCode)):
		cost = w.ThrottleCost
	case prev != nil && timedOut(prev):
		cost = w.TimeoutCost
	}
	if w.tokens < cost {
		return false
	}
	w.tokens -= cost
	w.paid[a] = cost
	return true
}
func (w *AWS) Sent(a *query.Attempt) { w.init() }
func (w *AWS) Answered(a *query.Attempt) {
	w.init()
	if !ok(a) {
		return
	}
	if c, ok := w.paid[a]; ok {
		w.tokens = min(w.Quota, w.tokens+c)
		delete(w.paid, a)
		return
	}
	w.tokens = min(w.Quota, w.tokens+1)
}

// Envoy is Envoy's retry budget: retries in flight may number Percent of the requests in
// flight, and at least MinConcurrent.
type Envoy struct {
	Percent       float64
	MinConcurrent int
	active        int
	retries       int
}

func (e *Envoy) Name() string { return "envoy" }
func (e *Envoy) Allow(a, _ *query.Attempt) bool {
	limit := max(float64(e.MinConcurrent), e.Percent*float64(e.active))
	return float64(e.retries) < limit
}
func (e *Envoy) Sent(a *query.Attempt) {
	e.active++
	if a.N > 0 {
		e.retries++
	}
}
func (e *Envoy) Answered(a *query.Attempt) {
	e.active--
	if a.N > 0 {
		e.retries--
	}
}

// Defaults are the published defaults of each model; maxAttempts is the per-request cap.
func Defaults(maxAttempts int) []Model {
	return []Model{
		&Ratio{Label: "finagle", Ratio: 0.2, MinPerSec: 10, TTL: 10 * time.Second},
		&Ratio{Label: "linkerd2", Ratio: 0.2, MinPerSec: 10, TTL: 10 * time.Second},
		&GRPC{MaxTokens: 10, TokenRatio: 0.1},
		&Envoy{Percent: 0.2, MinConcurrent: 3},
		&AWS{Quota: 500, Cost: 5, TimeoutCost: 10},
		aws2026(),
		&Cap{Max: maxAttempts},
		RetryAfter{},
	}
}

// aws2026 is the AWS SDKs' retry quota with the 2026 defaults, the default of every SDK
// but Java's and Kotlin's since November 2026: what they would have done to the traffic.
func aws2026() *AWS {
	return &AWS{Label: "aws-2026", Quota: 500, Cost: 14, TimeoutCost: 14, ThrottleCost: 5}
}

// Names are the models Params.Models gives, in its order: what --model takes.
var Names = []string{"finagle", "linkerd2", "grpc", "envoy", "aws-standard", "aws-2026", "cap", "retry-after"}

// Params are every model's parameters; DefaultParams are the published defaults.
type Params struct {
	Ratio      float64       // finagle, linkerd2: retries per request
	MinPerSec  float64       // finagle, linkerd2: retries per second allowed beyond the ratio
	TTL        time.Duration // finagle, linkerd2: the window
	MaxTokens  float64       // grpc: maxTokens
	TokenRatio float64       // grpc: tokenRatio
	EnvoyPct   float64       // envoy: budget_percent, as a fraction
	EnvoyMin   int           // envoy: min_retry_concurrency
	AWSQuota   float64       // aws-standard: the token quota
	AWSCost    float64       // aws-standard: a retry's cost
	AWSTimeout float64       // aws-standard: a retry's cost after a timeout
	Attempts   int           // cap: attempts per request, the first included
}

// DefaultParams are the models' published defaults (docs/reference.md, budget).
var DefaultParams = Params{Ratio: 0.2, MinPerSec: 10, TTL: 10 * time.Second, MaxTokens: 10, TokenRatio: 0.1,
	EnvoyPct: 0.2, EnvoyMin: 3, AWSQuota: 500, AWSCost: 5, AWSTimeout: 10, Attempts: 3}

// ParamError is a parameter Validate refuses, named as the field's flag is (Flag: "ttl").
type ParamError struct{ Flag, Want string }

func (e *ParamError) Error() string { return e.Flag + ": want " + e.Want }

// Validate refuses parameters no model can run with.
func (p Params) Validate() error {
	for _, c := range []struct {
		flag string
		v    float64
		ok   bool
		want string
	}{
		{"ttl", p.TTL.Seconds(), p.TTL > 0, "a positive duration"},
		{"max-tokens", p.MaxTokens, p.MaxTokens > 0, "a positive number"},
		{"max-attempts", float64(p.Attempts), p.Attempts >= 1, "1 or more"},
		{"envoy-percent", p.EnvoyPct, p.EnvoyPct <= 1, "a fraction, 0 to 1"},
		{"ratio", p.Ratio, true, ""}, {"min-per-sec", p.MinPerSec, true, ""}, {"token-ratio", p.TokenRatio, true, ""},
		{"envoy-min", float64(p.EnvoyMin), true, ""}, {"aws-quota", p.AWSQuota, true, ""},
		{"aws-cost", p.AWSCost, true, ""}, {"aws-timeout-cost", p.AWSTimeout, true, ""},
	} {
		if c.v < 0 || math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			return &ParamError{c.flag, "a number, 0 or more"}
		}
		if !c.ok {
			return &ParamError{c.flag, c.want}
		}
	}
	return nil
}

// Models are the models Names names, with these parameters.
func (p Params) Models() []Model {
	return []Model{
		&Ratio{Label: "finagle", Ratio: p.Ratio, MinPerSec: p.MinPerSec, TTL: p.TTL},
		&Ratio{Label: "linkerd2", Ratio: p.Ratio, MinPerSec: p.MinPerSec, TTL: p.TTL},
		&GRPC{MaxTokens: p.MaxTokens, TokenRatio: p.TokenRatio},
		&Envoy{Percent: p.EnvoyPct, MinConcurrent: p.EnvoyMin},
		&AWS{Quota: p.AWSQuota, Cost: p.AWSCost, TimeoutCost: p.AWSTimeout},
		aws2026(),
		&Cap{Max: p.Attempts},
		RetryAfter{},
	}
}
