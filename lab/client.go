package lab

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Attempt is one request the client sent, as the client saw it.
type Attempt struct {
	RequestID string
	N         int // attempt number sent in x-retry-attempt
	Method    string
	Path      string
	Status    int // 0 when the attempt got no answer
	Start     time.Time
	End       time.Time
}

// Client sends requests with a simple good retry policy: 5xx and transport errors are
// retried up to MaxRetries times after Delay, each attempt numbered in x-retry-attempt.
type Client struct {
	Base       string
	MaxRetries int
	Delay      time.Duration
	HTTP       *http.Client

	Attempts []Attempt // the record of every attempt, in order
}

// Do runs one logical request with its retries and returns its final status.
func (c *Client) Do(id, method, path string) int {
	status := 0
	for n := 0; n <= c.MaxRetries; n++ {
		if n > 0 {
			time.Sleep(c.Delay)
		}
		status = c.send(id, n, method, path)
		if status != 0 && status < 500 {
			return status
		}
	}
	return status
}

func (c *Client) send(id string, n int, method, path string) int {
	a := Attempt{RequestID: id, N: n, Method: method, Path: path, Start: time.Now()}
	defer func() { a.End = time.Now(); c.Attempts = append(c.Attempts, a) }()
	req, err := http.NewRequest(method, c.Base+path, nil)
	if err != nil {
		return 0
	}
	req.Header.Set("X-Retry-Attempt", strconv.Itoa(n))
	req.Header.Set("X-Request-Id", id)
	if n > 0 {
		req.Header.Set("X-Retry-Reason", fmt.Sprintf("status_%d", c.Attempts[len(c.Attempts)-1].Status))
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.Status = resp.StatusCode
	return a.Status
}

// Truth is what the client's record says, by the SPEC's definitions.
type Truth struct {
	Requests         int
	FirstAttempts    int
	Retries          int
	SecondAttempts   int // attempts with n = 1
	RetriesSucceeded int // retries answered 2xx
	Status5xx        int
	Status5xxFirst   int
	Status429        int
	Amplification    float64
	RetryRate        float64
	RetrySuccessRate float64
}

// Truth computes the metrics from the client's own record.
func (c *Client) Truth() Truth {
	var t Truth
	for _, a := range c.Attempts {
		t.Requests++
		switch {
		case a.N == 0:
			t.FirstAttempts++
		default:
			t.Retries++
			if a.Status >= 200 && a.Status < 300 {
				t.RetriesSucceeded++
			}
		}
		if a.N == 1 {
			t.SecondAttempts++
		}
		if a.Status >= 500 && a.Status < 600 {
			t.Status5xx++
			if a.N == 0 {
				t.Status5xxFirst++
			}
		}
		if a.Status == 429 {
			t.Status429++
		}
	}
	if t.FirstAttempts > 0 {
		t.Amplification = float64(t.Requests) / float64(t.FirstAttempts)
		t.RetryRate = float64(t.SecondAttempts) / float64(t.FirstAttempts)
	}
	if t.Retries > 0 {
		t.RetrySuccessRate = float64(t.RetriesSucceeded) / float64(t.Retries)
	}
	return t
}
