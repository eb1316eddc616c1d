package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/lab"
)

// startLab starts the lab upstream and a real nginx in front of it. Without nginx the
// test is skipped on a developer machine and fails in CI, where .ci/run installs it.
func startLab(t *testing.T) (*lab.Upstream, *lab.Nginx) {
	t.Helper()
	u, err := lab.StartUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	n, err := lab.StartNginx(t.TempDir(), u.Addr)
	if errors.Is(err, lab.ErrNoNginx) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	return u, n
}

// TestRealNginx sends requests with a retrying client through a real nginx writing the
// retry text log and an escape=json log, then checks that retrylens's report of each log
// equals what the client itself counted.
func TestRealNginx(t *testing.T) {
	t.Parallel()
	u, n := startLab(t)
	u.Reset(lab.Faults{})
	const logical = 300
	reqs := make([]lab.Request, logical)
	for i := range reqs {
		// fail=K: the upstream answers 502 to attempts 0..K-1. K=3 exhausts the good
		// client's two retries; status=404 is not retried.
		q := "fail=0"
		switch {
		case i%13 == 0:
			q = "fail=3"
		case i%7 == 0:
			q = "fail=2"
		case i%3 == 0:
			q = "fail=1"
		case i%17 == 0:
			q = "status=404"
		}
		reqs[i] = lab.Request{ID: fmt.Sprintf("req-%d", i), Method: "GET", Path: fmt.Sprintf("/api/orders/%d?%s", i, q)}
	}
	c := lab.NewClient(n.URL(), lab.Good, 1)
	c.Run(reqs, 4, 0)
	// Lines without an attempt header: counted, never taken for first attempts.
	const untagged = 5
	for range untagged {
		resp, err := http.Get(n.URL() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := n.Stop(); err != nil { // flushes and closes the logs
		t.Fatal(err)
	}
	truth := c.Truth()
	t.Logf("client counted: %+v", truth)
	if truth.FirstAttempts != logical || truth.Retries == 0 {
		t.Fatalf("client record looks wrong: %+v", truth)
	}
	want := metrics{
		Requests: int64(truth.Requests + untagged), Untagged: untagged,
		FirstAttempts: int64(truth.FirstAttempts), Retries: int64(truth.Retries),
		Amplification: f(truth.Amplification), RetryRate: f(truth.RetryRate), RetrySuccessRate: f(truth.RetrySuccessRate),
		Status5xxFirst: int64(truth.Status5xxFirst), Status5xxRetry: int64(truth.Status5xxRetry),
		Recovered: int64(truth.Recovered), Exhausted: int64(truth.Exhausted),
	}
	for _, tt := range []struct{ format, file string }{{"retry", n.TextLog}, {"nginx-json", n.JSONLog}} {
		t.Run(tt.format, func(t *testing.T) {
			db := t.TempDir() + "/r.duckdb"
			if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--log-format", tt.format, tt.file); code != 0 {
				t.Fatalf("ingest: exit %d: %s", code, stderr)
			}
			stdout, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
			if code != 0 {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			var got jsonReport
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatal(err)
			}
			s := got.Summary
			s.ExtraLoad, s.ActualSuccess, s.EffectiveSuccess, s.Verdict, s.Start = nil, nil, nil, "", "" // not counted by this client
			if diff := cmp.Diff(want, s, approx); diff != "" {
				t.Errorf("report summary vs the client's count (-client +retrylens):\n%s", diff)
			}
		})
	}
}

// nginx's limit_req throttles with 503, not 429: --throttle-status 429,503 counts its loops
// and blind retries the way the client's own record does with 503 taken as throttling.
// The naive client (no backoff, Retry-After ignored) sends 40 requests under
// /api/throttled-ra (503s carry Retry-After: 1) and 40 under /api/throttled (no header)
// past the 10 a second the zone allows: retries within the second after a Retry-After are
// premature, retries after a bare 503 blind, two 503s in a row a loop.
func TestNginxLimitReq(t *testing.T) {
	if testing.Short() {
		t.Skip("a second run through a real nginx; TestRealNginx is the short suite's")
	}
	t.Parallel()
	u, n := startLab(t)
	sc := lab.Scenario{Name: "limit-req", Policy: lab.Naive, Workers: 6, Pace: 20 * time.Millisecond,
		Requests: append(lab.Requests("ra", 40, http.MethodGet, "/api/throttled-ra/%d"), lab.Requests("bare", 40, http.MethodGet, "/api/throttled/%d")...)}
	c := sc.Run(n.URL(), u)
	waitLines(t, n.TextLog, c)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	type loops struct {
		Loops, Premature, Blind int64
	}
	for _, tc := range []struct {
		flags    []string
		throttle []int
	}{{nil, []int{429}}, {[]string{"--throttle-status", "429,503"}, []int{429, 503}}} {
		truth := c.TruthThrottled(tc.throttle...)
		want := loops{int64(truth.Loops429), int64(truth.PrematureRetries), int64(truth.BlindRetries)}
		stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json", "--log-format", "retry", n.TextLog}, tc.flags...)...)
		var r struct {
			Loops struct {
				Loops     int64 `json:"loops"`
				Premature int64 `json:"premature_retries"`
				Blind     int64 `json:"blind_retries"`
			} `json:"loops_429"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("report %v: exit %d: %s", tc.flags, code, stderr)
		}
		got := loops{r.Loops.Loops, r.Loops.Premature, r.Loops.Blind}
		t.Logf("throttle %v: client %+v, retrylens %+v", tc.throttle, want, got)
		if got != want {
			t.Errorf("throttle %v: retrylens %+v, the client's record %+v", tc.throttle, got, want)
		}
		if len(tc.throttle) == 2 && (want.Loops == 0 || want.Premature == 0 || want.Blind == 0) {
			t.Errorf("the run made no loop, premature or blind retry to compare: %+v", want)
		}
	}
}
