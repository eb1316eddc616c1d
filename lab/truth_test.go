package lab

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Truth on a hand-made record; the expected figures are counted in the comments.
func TestTruth(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := &Client{attempts: []Attempt{
		// a: 502 then 200: recovered.
		{RequestID: "a", N: 0, Method: "GET", Status: 502, Sent: at(0), Received: at(10)},
		{RequestID: "a", N: 1, Method: "GET", Status: 200, Sent: at(50), Received: at(60)},
		// b: 429 (Retry-After 1) retried after 20 ms: premature; 429 without Retry-After:
		// the next retry is blind; then 429 again: exhausted, a loop of three.
		{RequestID: "b", N: 0, Method: "GET", Status: 429, RetryAfter: "1", Sent: at(0), Received: at(5)},
		{RequestID: "b", N: 1, Method: "GET", Status: 429, Sent: at(25), Received: at(30)},
		{RequestID: "b", N: 2, Method: "GET", Status: 429, Sent: at(1100), Received: at(1110)},
		// w: a POST abandoned, retried without a key, 201: a retried write, recovered.
		{RequestID: "w", N: 0, Method: "POST", Abandoned: true, Sent: at(0), Received: at(100)},
		{RequestID: "w", N: 1, Method: "POST", Status: 201, Sent: at(120), Received: at(130)},
		// k: first attempt 200.
		{RequestID: "k", N: 0, Method: "GET", Status: 200, Sent: at(0), Received: at(1)},
		// h: hedged at 60 ms; the hedge wins at 69 ms and the first attempt is cancelled:
		// recovered, and not a failed retry.
		{RequestID: "h", N: 1, Method: "GET", Status: 200, Hedge: true, Won: true, Sent: at(60), Received: at(69)},
		{RequestID: "h", N: 0, Method: "GET", Abandoned: true, Cancelled: true, Sent: at(0), Received: at(70)},
	}, results: map[string]int{"a": 200, "b": 429, "w": 201, "k": 200, "h": 200}}
	want := Truth{
		Requests: 10, FirstAttempts: 5, Retries: 5,
		Amplification: 10.0 / 5, RetryRate: 4.0 / 5, RetrySuccessRate: 3.0 / 5,
		Recovered: 3, Exhausted: 1, Logical: 5, EffectiveSuccess: 4.0 / 5, FalseSuccess: 1, // b ends 429; w is the false success
		Status5xxFirst: 1, Status429First: 1, Status429Retry: 2,
		PrematureRetries: 1, BlindRetries: 1, RetriedWrites: 1, WriteRequests: 1,
		Loops429: 1, MaxLoop429: 3, Abandoned: 2,
		HedgedRequests: 1, Hedges: 1, HedgeWins: 1, Cancelled: 1,
	}
	if diff := cmp.Diff(want, c.Truth()); diff != "" {
		t.Errorf("Truth (-want +got):\n%s", diff)
	}
}
