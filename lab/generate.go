package lab

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/retrylens/retrylens/parse"
)

// GenTruth is what a generated log contains, counted while writing it.
type GenTruth struct {
	Lines            int     `json:"lines"`
	Requests         int     `json:"requests"`
	Untagged         int     `json:"untagged"`
	FirstAttempts    int     `json:"first_attempts"`
	Retries          int     `json:"retries"`
	Amplification    float64 `json:"amplification"`
	RetryRate        float64 `json:"retry_rate"`
	RetrySuccessRate float64 `json:"retry_success_rate"`
	Recovered        int     `json:"recovered"`
	Exhausted        int     `json:"exhausted"`
	Status429Retry   int     `json:"status_429_retry"`
	RetriedWrites    int     `json:"retried_writes"` // POST retries without an idempotency key

	second, retriesOK int
}

// Generate writes lines access-log lines in format f, deterministic for a seed: a steady
// stream of logical requests (10 % POST, some with idempotency keys), 6 % of first
// attempts failing (502, or 429 with Retry-After), up to two retries each failing 30 %,
// and 2 % untagged health checks. It returns the truth of what it wrote.
func Generate(w io.Writer, f *parse.Format, lines int, seed uint64) (GenTruth, error) {
	return GenerateEvery(w, f, lines, seed, 20*time.Millisecond)
}

// GenerateEvery is Generate with the logical requests started up to every apart (0 to
// every, uniformly): a second makes about 120 lines a minute, the sparse traffic of a
// small service or a quiet night.
func GenerateEvery(w io.Writer, f *parse.Format, lines int, seed uint64, every time.Duration) (GenTruth, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	bw := bufio.NewWriterSize(w, 1<<20)
	var t GenTruth
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	routes := []string{"/api/items/%d", "/api/users/%d/cart", "/api/search?q=item%d&page=2", "/static/app.%x.js"}
	agents := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"checkout-web/2.3 (+okhttp)", "python-requests/2.32.3", "Go-http-client/1.1",
	}
	var buf []byte
	emit := func(r *parse.Record) error {
		buf = f.AppendRecord(buf[:0], r)
		buf = append(buf, '\n')
		_, err := bw.Write(buf)
		t.Lines++
		return err
	}
	for id := 1; t.Lines < lines; id++ {
		now = now.Add(time.Duration(rng.IntN(int(every/time.Millisecond))) * time.Millisecond)
		r := parse.Record{
			Time: now, RemoteAddr: fmt.Sprintf("10.%d.%d.%d", rng.IntN(4), rng.IntN(256), rng.IntN(256)),
			Method: "GET", URI: fmt.Sprintf(routes[rng.IntN(len(routes))], rng.IntN(100000)), Protocol: "HTTP/1.1",
			Referer: "https://shop.example/cart", UserAgent: agents[rng.IntN(len(agents))],
			Status: -1, Bytes: -1, RequestTime: -1, Attempt: -1,
		}
		if rng.IntN(50) == 0 { // a health check without any attempt header
			r.URI, r.Status, r.Bytes, r.RequestTime = "/healthz", 200, 2, 0.001
			t.Requests++
			t.Untagged++
			if err := emit(&r); err != nil {
				return t, err
			}
			continue
		}
		r.RequestID = fmt.Sprintf("%016x", rng.Uint64())
		r.AttemptSource = "x-retry-attempt"
		if rng.IntN(10) == 0 {
			r.Method, r.URI = "POST", "/api/orders"
			if rng.IntN(2) == 0 {
				r.IdempotencyKey = "idem-" + r.RequestID
			}
		}
		firstOK, anyOK := false, false
		for n := 0; n < 3 && t.Lines < lines; n++ {
			fail := rng.IntN(100) < 6
			if n > 0 {
				fail = rng.IntN(100) < 30
				r.RetryReason = "status_" + fmt.Sprint(r.Status)
			}
			r.Attempt, r.RetryAfter = n, ""
			r.Status, r.Bytes = 200, int64(200+rng.IntN(5000))
			if fail {
				r.Status, r.Bytes = 502, 157
				if rng.IntN(4) == 0 {
					r.Status, r.RetryAfter = 429, "1"
				}
			}
			r.RequestTime = float64(rng.IntN(300)) / 1000
			r.UpstreamStatus = fmt.Sprint(r.Status)
			r.UpstreamResponseTime = fmt.Sprintf("%.3f", r.RequestTime)
			if err := emit(&r); err != nil {
				return t, err
			}
			t.Requests++
			ok := !fail
			if n == 0 {
				t.FirstAttempts++
				firstOK = ok
			} else {
				t.Retries++
				if n == 1 {
					t.second++
				}
				if ok {
					t.retriesOK++
				}
				if r.Status == 429 {
					t.Status429Retry++
				}
				if r.Method == "POST" && r.IdempotencyKey == "" {
					t.RetriedWrites++
				}
			}
			anyOK = anyOK || ok
			if ok {
				break
			}
			r.Time = r.Time.Add(time.Duration(100<<n) * time.Millisecond)
		}
		switch {
		case !firstOK && anyOK:
			t.Recovered++
		case r.Attempt > 0 && !anyOK:
			t.Exhausted++
		}
	}
	if t.FirstAttempts > 0 {
		t.Amplification = float64(t.FirstAttempts+t.Retries) / float64(t.FirstAttempts)
		t.RetryRate = float64(t.second) / float64(t.FirstAttempts)
	}
	if t.Retries > 0 {
		t.RetrySuccessRate = float64(t.retriesOK) / float64(t.Retries)
	}
	return t, bw.Flush()
}
