package lab

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Truth is what the client's record says, by the definitions of docs/metrics.md. Field names follow
// the JSON report's.
type Truth struct {
	Requests         int
	FirstAttempts    int
	Retries          int
	Amplification    float64
	RetryRate        float64
	RetrySuccessRate float64 // NaN-free: 0 when there were no retries
	Recovered        int     // first attempt not 2xx, a later one 2xx
	Exhausted        int     // retried, never 2xx
	Logical          int     // logical requests
	EffectiveSuccess float64 // the 2xx share of their results
	FalseSuccess     int     // unkeyed writes whose first attempt was abandoned, then a retry got 2xx
	Status5xxFirst   int
	Status5xxRetry   int
	Status429First   int
	Status429Retry   int // 429 answers to retries
	PrematureRetries int // sent before the previous answer's Retry-After had passed
	BlindRetries     int // retries after a 429 without Retry-After
	RetriedWrites    int // retry attempts of POST/PATCH without an idempotency key
	WriteRequests    int // logical requests with such retries
	Loops429         int // logical requests with two or more consecutive 429s
	MaxLoop429       int
	Abandoned        int // attempts the client gave up on (timeout, or a hedge that lost)
	HedgedRequests   int // logical requests with an attempt sent while another was in flight
	Hedges           int // such attempts
	HedgeWins        int // hedges whose 2xx was the request's result
	Cancelled        int // attempts cancelled because another attempt of the request won
}

func ok(s int) bool { return s >= 200 && s < 300 }

// Truth computes the metrics from the record.
func (c *Client) Truth() Truth { return c.TruthThrottled(http.StatusTooManyRequests) }

// TruthThrottled is Truth with the given statuses taken as throttling, for 429 loops and
// blind retries (retrylens report --throttle-status).
func (c *Client) TruthThrottled(throttle ...int) Truth {
	return TruthOf(c.Attempts(), c.Results(), throttle...)
}

// TruthOf computes the metrics from a record of attempts and each request's result (the
// status Do returned, by request id), with the given statuses taken as throttling: a
// client's own record, or one a test has matched to a gateway's log.
func TruthOf(attempts []Attempt, results map[string]int, throttle ...int) Truth {
	var t Truth
	byID := map[string][]Attempt{}
	for _, a := range attempts {
		byID[a.RequestID] = append(byID[a.RequestID], a)
	}
	second, retriesOK, finalOK, cancelledRetries := 0, 0, 0, 0
	for id, as := range byID {
		t.Logical++
		if ok(results[id]) {
			finalOK++
		}
		sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
		anyOK, run, wrote, hedged := false, 0, false, false
		for i, a := range as {
			t.Requests++
			if a.Abandoned {
				t.Abandoned++
			}
			if a.Cancelled {
				t.Cancelled++
				if a.N > 0 {
					cancelledRetries++
				}
			}
			if a.Hedge {
				t.Hedges++
				hedged = true
				if a.Won {
					t.HedgeWins++
				}
			}
			is5xx := a.Status >= 500 && a.Status < 600
			if a.N == 0 {
				t.FirstAttempts++
				if is5xx {
					t.Status5xxFirst++
				}
				if a.Status == 429 {
					t.Status429First++
				}
			} else {
				t.Retries++
				if a.N == 1 {
					second++
				}
				if ok(a.Status) {
					retriesOK++
				}
				if is5xx {
					t.Status5xxRetry++
				}
				if a.Status == 429 {
					t.Status429Retry++
				}
				prev := as[i-1]
				// a hedge, sent before the previous answer, decided nothing on it
				if secs, err := strconv.Atoi(prev.RetryAfter); !a.Hedge && err == nil && a.Sent.Sub(prev.Received) < time.Duration(secs)*time.Second {
					t.PrematureRetries++
				}
				if !a.Hedge && slices.Contains(throttle, prev.Status) && prev.RetryAfter == "" {
					t.BlindRetries++
				}
				if (a.Method == "POST" || a.Method == "PATCH") && a.IdempotencyKey == "" {
					t.RetriedWrites++
					wrote = true
				}
			}
			if ok(a.Status) {
				anyOK = true
			}
			if slices.Contains(throttle, a.Status) {
				run++
				t.MaxLoop429 = max(t.MaxLoop429, run)
			} else {
				run = 0
			}
		}
		if wrote {
			t.WriteRequests++
		}
		if hedged {
			t.HedgedRequests++
		}
		if hasLoop(as, throttle) {
			t.Loops429++
		}
		if !ok(as[0].Status) && anyOK {
			t.Recovered++
		}
		if write := as[0].Method == "POST" || as[0].Method == "PUT" || as[0].Method == "PATCH" || as[0].Method == "DELETE"; write &&
			as[0].IdempotencyKey == "" && as[0].Abandoned && len(as) > 1 && slices.ContainsFunc(as[1:], func(a Attempt) bool { return ok(a.Status) }) {
			t.FalseSuccess++
		}
		if len(as) > 1 && !anyOK {
			t.Exhausted++
		}
	}
	if t.MaxLoop429 < 2 {
		t.MaxLoop429 = 0 // a single 429 is no loop
	}
	if t.FirstAttempts > 0 {
		t.Amplification = float64(t.Requests) / float64(t.FirstAttempts)
		t.RetryRate = float64(second) / float64(t.FirstAttempts)
	}
	if t.Logical > 0 {
		t.EffectiveSuccess = float64(finalOK) / float64(t.Logical)
	}
	if d := t.Retries - cancelledRetries; d > 0 {
		// a hedge cancelled because another attempt won is no failed retry
		t.RetrySuccessRate = float64(retriesOK) / float64(d)
	}
	return t
}

func hasLoop(as []Attempt, throttle []int) bool {
	for i := 1; i < len(as); i++ {
		if slices.Contains(throttle, as[i].Status) && slices.Contains(throttle, as[i-1].Status) {
			return true
		}
	}
	return false
}
