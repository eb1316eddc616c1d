package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/lab"
)

// startLab starts the lab upstream and a real nginx in front of it. Without nginx the
// test is skipped on a developer machine and fails in CI, where .ci/run installs it.
func startLab(t *testing.T) (*lab.Upstream, *lab.Nginx) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short starts no server")
	}
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

// Two layers of retries (docs/metrics.md, "Proxy tries"): nginx retries a 502 on the next
// of two upstreams (proxy_next_upstream), and the good client retries what still fails.
// The load the upstreams saw per logical request, counted by the upstreams themselves,
// must equal the report's upstream_load, and the client's attempts per request its
// amplification.
func TestNginxTwoLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("a run through a real nginx and two upstreams; TestRealNginx is the short suite's")
	}
	t.Parallel()
	var ups []*lab.Upstream
	for range 2 {
		u, err := lab.StartUpstream()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { u.Close() })
		ups = append(ups, u)
	}
	n, err := lab.StartNginxWith(t.TempDir(), lab.NginxOptions{Upstreams: []string{ups[0].Addr, ups[1].Addr}, NextUpstream: true})
	if errors.Is(err, lab.ErrNoNginx) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	// Each upstream answers 502 to three requests in ten, drawn apart (its own seed).
	ups[0].Reset(lab.Faults{Seed: 31, BaselineFail: 0.3})
	ups[1].Reset(lab.Faults{Seed: 37, BaselineFail: 0.3})
	const logical = 300
	c := lab.NewClient(n.URL(), lab.Good, 5)
	c.Run(lab.Requests("two", logical, http.MethodGet, "/api/items/%d"), 6, 0)
	waitLines(t, n.TextLog, c)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	truth := c.Truth()
	served := ups[0].Served() + ups[1].Served()
	t.Logf("client: %d attempts for %d requests; upstreams: %d requests served", truth.Requests, truth.Logical, served)
	if truth.Logical != logical || served <= truth.Requests || truth.Retries == 0 {
		t.Fatalf("the run shows no retry of one layer or the other: %+v, %d served", truth, served)
	}
	stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", "retry", n.TextLog)
	var r struct {
		Summary struct {
			Amplification      float64 `json:"amplification"`
			ProxyAmplification float64 `json:"proxy_amplification"`
			UpstreamLoad       float64 `json:"upstream_load"`
		} `json:"summary"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	want := struct{ Amplification, ProxyAmplification, UpstreamLoad float64 }{
		truth.Amplification, float64(served) / float64(truth.Requests), float64(served) / logical}
	got := struct{ Amplification, ProxyAmplification, UpstreamLoad float64 }{
		r.Summary.Amplification, r.Summary.ProxyAmplification, r.Summary.UpstreamLoad}
	t.Logf("client and upstreams %+v, retrylens %+v", want, got)
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("(-client and upstreams +retrylens):\n%s", diff)
	}
}

// A client without request ids whose attempts alternate between two nginx: one logs to the
// millisecond in UTC, the other $time_local alone (to the second) in UTC+05:30. The
// naive client gives up after 100 ms and three attempts in ten take 100 ms upstream, so
// some answers race its timeout: the gateway logs a 2xx the client never read, and the
// client retries (docs/metrics.md, after_2xx). Loaded together, the two logs must link
// into the client's logical requests with no orphan. The expected figures are what the
// logs can show: the client's attempts with the status the gateway logged for each
// (matched by URI and attempt number, each request having a URI of its own).
func TestTwoGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("a run through two real nginx; TestRealNginx is the short suite's")
	}
	t.Parallel()
	u, err := lab.StartUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	var gws []*lab.Nginx
	for _, o := range []lab.NginxOptions{{Upstreams: []string{u.Addr}}, {Upstreams: []string{u.Addr}, TZ: "Asia/Kolkata", SecondsOnly: true}} {
		n, err := lab.StartNginxWith(t.TempDir(), o)
		if errors.Is(err, lab.ErrNoNginx) && os.Getenv("CI") == "" {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Stop() })
		gws = append(gws, n)
	}
	u.Reset(lab.Faults{Seed: 41, BaselineFail: 0.05, SlowShare: 0.3, Slow: 100 * time.Millisecond})
	policy := lab.Naive
	policy.NoRequestID = true
	c := lab.NewClient(gws[0].URL(), policy, 41)
	c.Alternate = []string{gws[0].URL(), gws[1].URL()}
	const logical = 300
	c.Run(lab.Requests("alt", logical, http.MethodGet, "/api/items/%d"), 10, 50*time.Millisecond)
	// every attempt is logged by the gateway of its number
	logged := map[string]int{} // "uri attempt" -> status
	var paths []string
	for i, n := range gws {
		var mine []lab.Attempt
		for _, a := range c.Attempts() {
			if a.N%2 == i {
				mine = append(mine, a)
			}
		}
		waitLinesOf(t, n.TextLog, len(mine))
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(n.TextLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"GET (\S+) HTTP/1.1" (\d+) .* ra="(\d+)"`).FindAllStringSubmatch(string(b), -1) {
			status, _ := strconv.Atoi(m[2])
			logged[m[1]+" "+m[3]] = status
		}
		paths = append(paths, n.TextLog)
	}
	// The client's requests as the logs show them.
	byID := map[string][]lab.Attempt{}
	for _, a := range c.Attempts() {
		byID[a.RequestID] = append(byID[a.RequestID], a)
	}
	var want struct{ Logical, Recovered, Exhausted, After2xx, Orphans int64 }
	races := 0
	for _, as := range byID {
		sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
		want.Logical++
		anyOK := false
		for i, a := range as {
			s, ok := logged[a.Path+" "+strconv.Itoa(a.N)]
			if !ok {
				t.Fatalf("%s attempt %d: no line", a.RequestID, a.N)
			}
			if s >= 200 && s < 300 {
				anyOK = true
				if a.Status == 0 {
					races++ // logged 2xx, never read
				}
				if i+1 < len(as) {
					want.After2xx++
				}
			}
		}
		first := logged[as[0].Path+" 0"]
		if !(first >= 200 && first < 300) && anyOK {
			want.Recovered++
		}
		if len(as) > 1 && !anyOK {
			want.Exhausted++
		}
	}
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json", "--log-format", "retry"}, paths...)...)
	var r struct {
		Summary struct{ Recovered, Exhausted int64 } `json:"summary"`
		Linking struct {
			Heuristic int64 `json:"heuristic"`
			Orphans   int64 `json:"orphans"`
			After2xx  int64 `json:"after_2xx"`
		} `json:"linking"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	got := struct{ Logical, Recovered, Exhausted, After2xx, Orphans int64 }{
		r.Linking.Heuristic, r.Summary.Recovered, r.Summary.Exhausted, r.Linking.After2xx, r.Linking.Orphans}
	t.Logf("%d attempts, %d answers logged 2xx that the client gave up on; the logs %+v, retrylens %+v", len(c.Attempts()), races, want, got)
	if got != want {
		t.Errorf("retrylens %+v, the client's requests as logged %+v", got, want)
	}
}
