package lab

import (
	"fmt"
	"net/http"
	"time"
)

// Scenario is one lab experiment: a failure schedule, a client policy and the requests
// it makes. Each runs in a few seconds.
type Scenario struct {
	Name     string
	Policy   Policy
	Faults   Faults
	Requests []Request
	Workers  int
	Pace     time.Duration // per worker, between the starts of two logical requests
	// Rate, when set, starts the requests at this many a second whatever their answers
	// (an open loop, Client.RunOpen) instead of Workers and Pace.
	Rate float64
}

// incident is a GC-pause-like incident: 25 % 502s and 250 ms of added latency for 1.5 s
// in the middle of a 5 s run, 0.3 % 502s around it. The delay is 150 ms past the naive
// client's 100 ms timeout: with less, on a busy machine a gateway could answer just as the
// client gave up, and log an answer the client never had. The clients are open-loop
// enough (30 workers, one request each per 500 ms) that retries add load instead of
// slowing the offered rate down.
var incident = Faults{Seed: 7, BaselineFail: 0.003, IncidentFrom: 1800 * time.Millisecond,
	IncidentTo: 3300 * time.Millisecond, IncidentFail: 0.25, IncidentDelay: 250 * time.Millisecond}

var limited = Faults{Seed: 11, LimitPerSec: 40}

var slowWrites = Faults{Seed: 13, SlowWriteShare: 0.3, SlowWrite: 300 * time.Millisecond}

// writeStorm makes every write attempt slow (half of them) or failing (a fifth, 502 before
// writing): abandoned attempts at any attempt number, some in a row (499 499 499), some
// after a failure (502 499 201), for POSTs and PUTs.
var writeStorm = Faults{Seed: 17, SlowWriteShare: 0.5, SlowWrite: 200 * time.Millisecond, SlowEvery: true, WriteFail: 0.2}

// throttledWrites makes three in ten first write attempts slow (the write is done, the
// naive client gives up on the answer) and refuses writes over 25 a second with 429 before
// writing: an abandoned write followed only by 429s was written once.
var throttledWrites = Faults{Seed: 23, SlowWriteShare: 0.3, SlowWrite: 300 * time.Millisecond, WriteLimit: 25}

// tail is a long tail: three in ten attempts take 200 ms, past the hedging client's
// 60 ms hedge delay, and 2 % fail at once (502), which sends the next hedge at once.
var tail = Faults{Seed: 19, BaselineFail: 0.02, SlowShare: 0.3, Slow: 200 * time.Millisecond}

// Hedged is a hedging client (gRPC's hedging policy, Envoy's hedge_on_per_try_timeout):
// up to two hedges, 60 ms apart; the first 2xx wins and cancels the rest.
var Hedged = Policy{Name: "hedged", MaxRetries: 2, HedgeAfter: 60 * time.Millisecond, Timeout: 5 * time.Second}

// Scenarios returns the lab's scenarios.
func Scenarios() []Scenario {
	items := Requests("item", 300, http.MethodGet, "/api/items/%d")
	lim := Requests("lim", 120, http.MethodGet, "/api/limited")
	orders := Requests("order", 60, http.MethodPost, "/api/orders")
	// a few URIs, many clients' requests to each at once, no request id: only the
	// heuristic links them
	shared := Requests("shared", 900, http.MethodGet, "/api/items/%d")
	for i := range shared {
		shared[i].Path = fmt.Sprintf("/api/items/%d", i%3)
	}
	unkeyed := Good
	unkeyed.Name, unkeyed.NoRequestID = "good-unkeyed", true
	storm := append(Requests("post", 40, http.MethodPost, "/api/orders"), Requests("put", 40, http.MethodPut, "/api/orders/%d")...)
	return []Scenario{
		{Name: "incident-good", Policy: Good, Faults: incident, Requests: items, Workers: 30, Pace: 500 * time.Millisecond},
		{Name: "incident-naive", Policy: Naive, Faults: incident, Requests: items, Workers: 30, Pace: 500 * time.Millisecond},
		{Name: "limited-good", Policy: Good, Faults: limited, Requests: lim, Workers: 6, Pace: 50 * time.Millisecond},
		{Name: "limited-naive", Policy: Naive, Faults: limited, Requests: lim, Workers: 6, Pace: 50 * time.Millisecond},
		{Name: "slow-writes-good", Policy: Good, Faults: slowWrites, Requests: orders, Workers: 4, Pace: 30 * time.Millisecond},
		{Name: "slow-writes-naive", Policy: Naive, Faults: slowWrites, Requests: orders, Workers: 4, Pace: 30 * time.Millisecond},
		{Name: "concurrent-unkeyed", Policy: unkeyed, Faults: incident, Requests: shared, Workers: 90, Pace: 500 * time.Millisecond},
		{Name: "write-storm-naive", Policy: Naive, Faults: writeStorm, Requests: storm, Workers: 4, Pace: 30 * time.Millisecond},
		{Name: "throttled-writes-naive", Policy: Naive, Faults: throttledWrites, Requests: Requests("tw", 80, http.MethodPost, "/api/orders"), Workers: 8, Pace: 30 * time.Millisecond},
		{Name: "hedged", Policy: Hedged, Faults: tail, Requests: Requests("hedge", 300, http.MethodGet, "/api/items/%d"), Workers: 30, Pace: 200 * time.Millisecond},
	}
}

// Run resets the upstream to the scenario's faults and runs its requests against base,
// a gateway in front of u. The returned client holds the record.
func (s Scenario) Run(base string, u *Upstream) *Client {
	u.Reset(s.Faults)
	c := NewClient(base, s.Policy, s.Faults.Seed)
	if s.Rate > 0 {
		c.RunOpen(s.Requests, s.Rate)
	} else {
		c.Run(s.Requests, s.Workers, s.Pace)
	}
	return c
}

// overload is a capacity-limited service (2 workers of 10 ms: 200 requests a second,
// 20 waiting at most) offered 100 first attempts a second, and a trigger from 1 s to 2 s
// that makes its service four times slower (50 a second).
var overload = Capacity{Workers: 2, Service: 10 * time.Millisecond, Queue: 20,
	TriggerFrom: time.Second, TriggerTo: 2 * time.Second, TriggerFactor: 4}

// The overload clients: all give up on an attempt after 60 ms (less than the 100 ms a
// full queue takes to drain at full speed: 20 waiting for 2 workers of 10 ms); the naive one retries at once, up to three
// times, the budgeted one backs off with jitter under a 20 % retry budget.
var (
	OverloadNaive    = Policy{Name: "overload-naive", MaxRetries: 3, Base: 5 * time.Millisecond, Timeout: 60 * time.Millisecond}
	OverloadNoRetry  = Policy{Name: "overload-none", Timeout: 60 * time.Millisecond}
	OverloadBudgeted = Policy{Name: "overload-budget", MaxRetries: 3, Base: 20 * time.Millisecond, Exponential: true,
		Timeout: 60 * time.Millisecond, BudgetRatio: 0.2}
)

// OverloadScenarios are runs of a retry-sustained outage (issue "Fuelling that outlives
// its trigger"): 500 requests over 5 s against the overload service, with naive
// retries, without retries, with a retry budget, and with naive retries and a trigger
// that never ends (the service really is still broken).
func OverloadScenarios() []Scenario {
	reqs := Requests("work", 500, http.MethodGet, "/api/work")
	unending := overload
	unending.TriggerTo = 0
	return []Scenario{
		{Name: "overload-naive", Policy: OverloadNaive, Faults: Faults{Seed: 29, Capacity: overload}, Requests: reqs, Rate: 100},
		{Name: "overload-none", Policy: OverloadNoRetry, Faults: Faults{Seed: 29, Capacity: overload}, Requests: reqs, Rate: 100},
		{Name: "overload-budget", Policy: OverloadBudgeted, Faults: Faults{Seed: 29, Capacity: overload}, Requests: reqs, Rate: 100},
		{Name: "overload-unending", Policy: OverloadNaive, Faults: Faults{Seed: 29, Capacity: unending}, Requests: reqs, Rate: 100},
	}
}
