package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Policy is a client retry policy.
type Policy struct {
	Name             string
	MaxRetries       int           // retries after the first attempt
	Base             time.Duration // backoff base
	Exponential      bool          // delay = Base·2^n + rand(0, Base) before retry n+1; else Base, no jitter
	RetryWrites      bool          // retry POST/PATCH
	Retry4xx         bool          // retry any non-2xx answer, not only 5xx and network errors
	HonourRetryAfter bool          // retry a 429 only when it carries Retry-After, after waiting it, once
	Timeout          time.Duration // per attempt, from when the request is written whole
	IdempotencyKeys  bool          // send Idempotency-Key on writes
	NoRequestID      bool          // send no X-Request-Id: the gateway's log links attempts by client and URI only
	// HedgeAfter, when set, makes the client hedge (gRPC's hedging policy): it sends
	// attempt n+1 when attempt n has not answered within HedgeAfter, or at once when it
	// failed, up to MaxRetries more; the first 2xx wins and the others are cancelled.
	HedgeAfter time.Duration
	// BudgetRatio, when set, caps retries with a retry budget (Finagle's, Linkerd's, in
	// tokens): every first attempt deposits BudgetRatio, every retry takes one, and a
	// retry without a whole token is not sent (the request ends with what it had).
	BudgetRatio float64
}

// The lab's two policies (what a good client does, and what a naive one does).
var (
	Good = Policy{Name: "good", MaxRetries: 2, Base: 20 * time.Millisecond, Exponential: true,
		HonourRetryAfter: true, Timeout: 5 * time.Second, IdempotencyKeys: true}
	Naive = Policy{Name: "naive", MaxRetries: 3, Base: 20 * time.Millisecond,
		RetryWrites: true, Retry4xx: true, Timeout: 100 * time.Millisecond}
)

// Attempt is one request the client sent, as the client saw it.
type Attempt struct {
	RequestID      string
	N              int // attempt number sent in x-retry-attempt
	Method         string
	Path           string
	IdempotencyKey string
	Status         int // 0 when the attempt got no answer
	Abandoned      bool
	Wrote          bool   // the whole request went out on a connection (net/http/httptrace)
	RetryAfter     string // the answer's Retry-After header
	Sent           time.Time
	Received       time.Time // when the answer (or the error) came
	Hedge          bool      // sent while an earlier attempt of its request was in flight
	Cancelled      bool      // abandoned because another attempt of its request won (hedging)
	Won            bool      // its 2xx was the request's result
}

// connectLimit bounds an attempt's connect and write, which Policy.Timeout does not
// cover; an attempt past it counts as failed, not abandoned.
const connectLimit = 30 * time.Second

// Request is one logical request to make.
type Request struct {
	ID     string
	Method string
	Path   string
}

// Client sends requests under a Policy and records every attempt: the ground truth.
type Client struct {
	Base string
	// Alternate, when set, sends attempt n through gateway Alternate[n % len] instead of
	// Base: a client whose retries land on another gateway than its first attempt.
	Alternate []string
	Policy    Policy
	HTTP      *http.Client
	Seed      uint64

	mu       sync.Mutex
	attempts []Attempt
	results  map[string]int // each logical request's result: the status Do returned
	tokens   float64        // the retry budget's (Policy.BudgetRatio)
}

// budgetCap bounds the retry budget's savings: a quiet hour does not pay for a storm.
const budgetCap = 10

// spend reports whether the retry budget allows a retry (and takes its token), or, for a
// first attempt, deposits the policy's ratio.
func (c *Client) spend(first bool) bool {
	if c.Policy.BudgetRatio <= 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first {
		c.tokens = min(c.tokens+c.Policy.BudgetRatio, budgetCap)
		return true
	}
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// NewClient returns a client of base (http://host:port) with policy p.
func NewClient(base string, p Policy, seed uint64) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	return &Client{Base: base, Policy: p, Seed: seed, HTTP: &http.Client{Transport: tr}}
}

// Attempts returns the record, in the order attempts finished.
func (c *Client) Attempts() []Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Attempt(nil), c.attempts...)
}

// Run makes every request with workers concurrent workers, starting one request each
// pace per worker at most, and returns when all are done.
func (c *Client) Run(reqs []Request, workers int, pace time.Duration) {
	ch := make(chan Request)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(c.Seed, uint64(w)))
			for r := range ch {
				next := time.Now().Add(pace)
				c.Do(r, rng)
				time.Sleep(time.Until(next))
			}
		}()
	}
	for _, r := range reqs {
		ch <- r
	}
	close(ch)
	wg.Wait()
}

// RunOpen starts the requests at rate a second, each in its own goroutine whatever the
// others do (an open loop: clients that keep arriving during an outage), and returns when
// all are done.
func (c *Client) RunOpen(reqs []Request, rate float64) {
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range reqs {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		wg.Go(func() {
			c.Do(r, rand.New(rand.NewPCG(c.Seed, uint64(i))))
		})
	}
	wg.Wait()
}

// Results returns each logical request's result (the status Do returned), by request id.
func (c *Client) Results() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.results))
	for id, s := range c.results {
		out[id] = s
	}
	return out
}

// Do runs one logical request with its retries and returns its final status.
func (c *Client) Do(r Request, rng *rand.Rand) int {
	var status int
	if c.Policy.HedgeAfter > 0 {
		status = c.hedge(r)
	} else {
		status = c.sequential(r, rng)
	}
	c.mu.Lock()
	if c.results == nil {
		c.results = map[string]int{}
	}
	c.results[r.ID] = status
	c.mu.Unlock()
	return status
}

// hedge runs one logical request under a hedging policy: attempt n+1 goes out when attempt
// n has not answered within HedgeAfter (or failed), up to MaxRetries hedges; the first 2xx
// is the result and cancels the attempts still in flight; with none, the last answer.
func (c *Client) hedge(r Request) int {
	p := c.Policy
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answers := make(chan Attempt, p.MaxRetries+1)
	var records []*Attempt
	sent, pending := 0, 0
	send := func() {
		n := sent
		hedge := pending > 0
		sent++
		pending++
		reason := ""
		if n > 0 {
			reason = "hedge"
		}
		go func() {
			a := c.do(ctx, r, n, "", reason)
			a.Hedge = hedge
			answers <- a
		}()
	}
	send()
	result, done := 0, false
	timer := time.NewTimer(p.HedgeAfter)
	defer timer.Stop()
	for pending > 0 {
		select {
		case <-timer.C:
			if !done && sent <= p.MaxRetries {
				send()
				timer.Reset(p.HedgeAfter)
			}
		case a := <-answers:
			pending--
			records = append(records, &a)
			switch {
			case done:
				a.Cancelled = a.Status == 0 // it lost to the winner and was cancelled
			case ok(a.Status):
				a.Won, result, done = true, a.Status, true
				cancel()
			default:
				result = a.Status
				if sent <= p.MaxRetries {
					send() // a failure sends the next hedge at once
					timer.Reset(p.HedgeAfter)
				}
			}
		}
	}
	c.mu.Lock()
	for _, a := range records {
		c.attempts = append(c.attempts, *a)
	}
	c.mu.Unlock()
	return result
}

// sequential runs one logical request with its retries, one attempt after another.
func (c *Client) sequential(r Request, rng *rand.Rand) int {
	p := c.Policy
	key := ""
	write := r.Method == http.MethodPost || r.Method == http.MethodPatch
	if write && p.IdempotencyKeys {
		key = "idem-" + r.ID
	}
	var prev Attempt
	retries429 := 0
	for n := 0; ; n++ {
		if n > 0 {
			reason := "status_" + strconv.Itoa(prev.Status)
			if prev.Status == 0 {
				reason = "timeout"
			}
			delay := p.Base
			if p.Exponential {
				delay = p.Base<<(n-1) + time.Duration(rng.Int64N(int64(p.Base)))
			}
			if prev.Status == http.StatusTooManyRequests && p.HonourRetryAfter {
				secs, _ := strconv.Atoi(prev.RetryAfter)
				// Past the Retry-After, plus a margin for the clocks of client and gateway.
				delay = time.Duration(secs)*time.Second + 50*time.Millisecond + delay
			}
			time.Sleep(delay)
			prev = c.send(r, n, key, reason)
		} else {
			c.spend(true)
			prev = c.send(r, 0, key, "")
		}
		if !c.shouldRetry(prev, write, n, &retries429) || !c.spend(false) {
			return prev.Status
		}
	}
}

func (c *Client) shouldRetry(a Attempt, write bool, n int, retries429 *int) bool {
	p := c.Policy
	switch {
	case a.Status >= 200 && a.Status < 300:
		return false
	case n >= p.MaxRetries:
		return false
	case write && !p.RetryWrites:
		return false
	case p.Retry4xx:
		return true
	case a.Status == http.StatusTooManyRequests:
		if !p.HonourRetryAfter || a.RetryAfter == "" || *retries429 >= 1 {
			return false
		}
		*retries429++
		return true
	}
	return a.Status == 0 || a.Status >= 500
}

func (c *Client) send(r Request, n int, key, reason string) Attempt {
	a := c.do(context.Background(), r, n, key, reason)
	c.mu.Lock()
	c.attempts = append(c.attempts, a)
	c.mu.Unlock()
	return a
}

// do makes one attempt, under parent (whose cancelling abandons it), and returns what the
// client saw of it.
func (c *Client) do(parent context.Context, r Request, n int, key, reason string) (a Attempt) {
	a = Attempt{RequestID: r.ID, N: n, Method: r.Method, Path: r.Path, IdempotencyKey: key, Sent: time.Now()}
	defer func() { a.Received = time.Now() }()
	// The timeout runs from the moment the request is written whole: an attempt the
	// client gives up on has reached the gateway, which logs it. Counted from before the
	// dial, a loaded machine can stall a goroutine past it before the request is out,
	// and the record then holds an attempt no gateway saw. connectLimit bounds the rest.
	ctx, cancel := context.WithTimeout(parent, connectLimit)
	defer cancel()
	var wrote, timedOut atomic.Bool // set on the transport's goroutines
	var timer atomic.Pointer[time.Timer]
	defer func() {
		if t := timer.Load(); t != nil {
			t.Stop()
		}
		a.Wrote = wrote.Load()
	}()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err != nil {
				return
			}
			// Once: should the transport write the request again on a fresh connection
			// (the first one closed under it), the timeout still runs from the first write.
			if !wrote.Swap(true) {
				timer.Store(time.AfterFunc(c.Policy.Timeout, func() { timedOut.Store(true); cancel() }))
			}
		},
	})
	var body io.Reader
	if r.Method == http.MethodPost {
		body = strings.NewReader(`{"item":1}`)
	}
	base := c.Base
	if len(c.Alternate) > 0 {
		base = c.Alternate[n%len(c.Alternate)]
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.Path, body)
	if err != nil {
		return a
	}
	req.Header.Set("X-Retry-Attempt", strconv.Itoa(n))
	if !c.Policy.NoRequestID {
		req.Header.Set("X-Request-Id", r.ID)
	}
	req.Header.Set("X-Lab-Id", r.ID) // for the upstream's faults and write counts; no gateway here logs it
	req.Header.Set("User-Agent", "retrylens-lab/"+c.Policy.Name)
	if reason != "" {
		req.Header.Set("X-Retry-Reason", reason)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		a.Abandoned = timedOut.Load() || parent.Err() != nil
		return a
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		a.Abandoned = true // the answer started but did not finish in time (or lost a hedge)
		return a
	}
	a.Status = resp.StatusCode
	a.RetryAfter = resp.Header.Get("Retry-After")
	return a
}

// Requests builds n logical requests named prefix-0…, all method and path (with %d
// replaced by the index).
func Requests(prefix string, n int, method, path string) []Request {
	rs := make([]Request, n)
	for i := range rs {
		p := path
		if strings.Contains(p, "%d") {
			p = fmt.Sprintf(path, i)
		}
		rs[i] = Request{ID: fmt.Sprintf("%s-%d", prefix, i), Method: method, Path: p}
	}
	return rs
}
