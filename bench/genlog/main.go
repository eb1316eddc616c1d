// Command genlog writes a synthetic access log in the retry format, for benchmarks: a
// steady stream of logical requests with a 5 % first-attempt failure rate, retries with
// backoff, a few 429s and untagged health checks. Deterministic for a given -seed.
//
//	go run ./bench/genlog -n 1000000 > /tmp/1m.log
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/retrylens/retrylens/parse"
)

func main() {
	n := flag.Int("n", 1_000_000, "lines to write")
	seed := flag.Uint64("seed", 1, "random seed")
	format := flag.String("format", "retry", "preset: retry, combined or nginx-json")
	flag.Parse()
	f, err := parse.Preset(*format)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(*seed, 0))
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	t := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	routes := []string{"/api/orders/%d", "/api/users/%d/cart", "/api/payments", "/static/app.%x.js", "/search?q=item%d&page=2"}
	agents := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"checkout-web/2.3 (+okhttp)", "python-requests/2.32.3", "Go-http-client/1.1",
	}
	var buf []byte
	written, id := 0, 0
	for written < *n {
		id++
		t = t.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
		r := parse.Record{
			Time: t, RemoteAddr: fmt.Sprintf("10.%d.%d.%d", rng.IntN(4), rng.IntN(256), rng.IntN(256)),
			Method: "GET", URI: fmt.Sprintf(routes[rng.IntN(len(routes))], rng.IntN(100000)), Protocol: "HTTP/1.1",
			Referer: "https://shop.example/cart", UserAgent: agents[rng.IntN(len(agents))],
			RequestID: fmt.Sprintf("%016x", rng.Uint64()), Attempt: 0, AttemptSource: "x-retry-attempt",
			UpstreamAddr: "10.1.0.5:8080",
		}
		if rng.IntN(50) == 0 {
			r.Attempt, r.AttemptSource, r.RequestID = -1, "", ""
		}
		attempts := 1
		if rng.IntN(20) == 0 {
			attempts += 1 + rng.IntN(2)
		}
		for a := 0; a < attempts && written < *n; a++ {
			if r.Attempt >= 0 {
				r.Attempt = a
			}
			r.Status, r.Bytes = 200, int64(200+rng.IntN(5000))
			if a < attempts-1 {
				r.Status, r.Bytes = 502, 157
				if rng.IntN(10) == 0 {
					r.Status, r.RetryAfter = 429, "1"
				}
			}
			r.RequestTime = float64(rng.IntN(300)) / 1000
			r.UpstreamStatus = fmt.Sprint(r.Status)
			r.UpstreamResponseTime = fmt.Sprintf("%.3f", r.RequestTime)
			r.RetryReason = ""
			if a > 0 {
				r.RetryReason = "http_502"
			}
			buf = f.AppendRecord(buf[:0], &r)
			buf = append(buf, '\n')
			w.Write(buf)
			written++
			r.Time = r.Time.Add(time.Duration(100<<a) * time.Millisecond)
		}
	}
}
