//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
)

// sdkAttempt is one HTTP attempt in a real SDK's own record (lab/sdk: sdkclient).
type sdkAttempt struct {
	SDK, Call, Op string
	N             int
	Sent, End     int64
	Status        int
	RetryAfterMs  int    `json:"retry_after_ms"`
	Invocation    string // amz-sdk-invocation-id as sent
}

// TestRealSDKs runs real SDKs nobody here wrote, aws-sdk-go-v2 and botocore (Debian's
// python3-boto3, its default retry mode; DynamoDB and S3) and openai-go (a Stainless
// client), through real nginx (the retry-sdk-full format) and Caddy to an
// upstream that answers as those services do, failing (500), throttling (DynamoDB's 400
// ThrottlingException, S3's 503 SlowDown, OpenAI's 429 with retry-after-ms) and slow (a
// write answered after the clients' timeout). Each gateway's report is compared with the
// clients' own record of every attempt and the upstream's count of writes: attempts and
// retries, every AWS call linked by its invocation id, 429 loops (S3 throttling with 503:
// --throttle-status 429,503, as docs/formats.md says), no non-retryable retry and nothing
// over the cap the SDK states (the SDKs retry only what their own lists allow, within
// their caps), premature retries as the record has them, and duplicate writes within 10 %
// of the upstream's.
func TestRealSDKs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := filepath.Join(dir, "sdkclient")
	build := exec.Command("go", "-C", filepath.Join("..", "..", "lab", "sdk"), "build", "-o", client, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the SDK client (lab/sdk, its own module): %v\n%s", err, out)
	}
	const run = 14 * time.Second
	up, err := lab.StartSDKUpstream(lab.SDKPhases{
		FailFrom: 2 * time.Second, FailTo: 5 * time.Second, Fail: 0.3,
		ThrottleFrom: 5 * time.Second, ThrottleTo: 9 * time.Second, Throttle: 0.5,
		SlowFrom: 9 * time.Second, SlowTo: 12 * time.Second, Slow: 0.4, SlowFor: 1500 * time.Millisecond,
		RetryAfterMs: 250,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	n, err := lab.StartNginxWith(filepath.Join(dir, "nginx"), lab.NginxOptions{Upstreams: []string{up.Addr}, Format: parse.RetrySDKFull})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if err := os.MkdirAll(filepath.Join(dir, "caddy"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := lab.StartCaddy(filepath.Join(dir, "caddy"), up.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	gateways := []struct {
		name, url, log, format string
		stop                   func() error
	}{
		{"nginx", n.URL(), n.TextLog, "retry-sdk-full", n.Stop},
		{"caddy", c.URL(), c.Log, "caddy", c.Stop},
	}
	sdks := []string{"aws", "openai"}
	python := botocorePython()
	switch {
	case python != "":
		sdks = append(sdks, "botocore")
	case os.Getenv("CI") != "":
		t.Fatal("no python3 with boto3 (apt-get install python3-boto3)")
	default:
		t.Log("no python3 with boto3: botocore sits out (apt-get install python3-boto3)")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(sdks))
	for _, g := range gateways {
		for _, sdk := range sdks {
			wg.Go(func() {
				out := filepath.Join(dir, g.name+"-"+sdk+".jsonl")
				// aws-sdk-go-v2 with a retry quota of 60 tokens (the SDK's own is 500): it runs
				// out in the failing phase, and the SDK stops retrying below its cap
				cmd := exec.Command(client, "-base", g.url, "-sdk", sdk, "-name", g.name+"-"+sdk, "-for", run.String(),
					"-workers", "3", "-timeout", "1s", "-quota", "60", "-out", out)
				if sdk == "botocore" {
					cmd = exec.Command(python, filepath.Join("..", "..", "lab", "sdk", "botocore_client.py"), "--base", g.url,
						"--name", g.name+"-"+sdk, "--for", fmt.Sprint(run.Seconds()), "--workers", "3", "--timeout", "1", "--out", out)
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("%s through %s: %v\n%s", sdk, g.name, err, out)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the slow writes the clients gave up on finish upstream
	writes := up.Writes()
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			if err := g.stop(); err != nil { // flushes the log
				t.Fatal(err)
			}
			var record []sdkAttempt
			for _, sdk := range sdks {
				record = append(record, readSDKRecord(t, filepath.Join(dir, g.name+"-"+sdk+".jsonl"))...)
			}
			want := sdkTruth(record, writes)
			stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", g.format,
				"--throttle-status", "429,503", g.log)
			var r labReport
			var link struct {
				Linking struct {
					InvocationID int64 `json:"invocation_id"`
				} `json:"linking"`
				Layers struct {
					Fates struct {
						BudgetDenied int64 `json:"budget_denied"`
					} `json:"fates"`
				} `json:"layers"`
			}
			if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || json.Unmarshal([]byte(stdout), &link) != nil {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			nonRetryable, _ := r.finding("non_retryable_retry")
			overCap, _ := r.finding("over_cap")
			dup, _ := r.finding("possible_duplicate_write")
			got := sdkFigures{
				Attempts: r.Summary.FirstAttempts + r.Summary.Retries, Retries: r.Summary.Retries,
				Recovered: r.Summary.Recovered, Exhausted: r.Summary.Exhausted,
				AWSCalls: link.Linking.InvocationID, Premature: r.Loops429.PrematureRetries,
				NonRetryable: nonRetryable, OverCap: overCap, Denied: link.Layers.Fates.BudgetDenied,
			}
			if got != want.sdkFigures {
				t.Errorf("report against the SDKs' own record:\n got  %+v\n want %+v", got, want.sdkFigures)
			}
			if !within(dup, want.DoubleWrites) {
				t.Errorf("possible_duplicate_write %d, the upstream performed %d calls' writes twice or more", dup, want.DoubleWrites)
			}
			// The OpenAI calls send no key: the heuristic links them, and two calls of one
			// client that fail at the same moment can trade retries, which moves a loop
			// (one in twenty in some runs) but no attempt, recovery or exhaustion.
			if !within(r.Loops429.Loops, want.Loops) {
				t.Errorf("%d 429 loops, the record has %d", r.Loops429.Loops, want.Loops)
			}
			if want.Retries == 0 || want.Loops == 0 || want.DoubleWrites == 0 || want.Denied == 0 {
				t.Errorf("the run tests too little: %+v", want)
			}
			t.Logf("%s: %+v, %d loops (retrylens %d), %d double writes (retrylens %d)", g.name, got, want.Loops, r.Loops429.Loops, want.DoubleWrites, dup)
		})
	}
}

// sdkFigures are what TestRealSDKs requires equal.
type sdkFigures struct {
	Attempts, Retries, Recovered, Exhausted, AWSCalls, Premature, NonRetryable, OverCap int64
	Denied                                                                              int64 // the fates' budget-denied
}

type sdkWant struct {
	sdkFigures
	Loops, DoubleWrites int64
}

// sdkCaps are the attempts the AWS SDKs allow a call by default, which they state in
// amz-sdk-request (max=): aws-sdk-go-v2's standard retryer 3, botocore's legacy mode 5.
var sdkCaps = map[string]int{"aws-sdk-go-v2": 3, "botocore": 5}

// within reports whether got is want within 10 % (or 1).
func within(got, want int64) bool {
	d := got - want
	return max(d, -d) <= max(1, want/10)
}

// sdkTruth is what the SDKs' record and the upstream's writes say: every attempt, the
// retries (n ≥ 1), the calls recovered (first attempt not 2xx, a later one 2xx) and
// exhausted (retried, never 2xx), the AWS calls (each has an invocation id), the calls with two or more
// throttled attempts in a row (400 from DynamoDB, which answers 400 only to throttle here;
// 503 from S3; 429 from OpenAI), the retries sent before the previous answer's
// retry-after-ms had passed, and the calls whose write the upstream performed twice or
// more. Nothing is non-retryable or over a cap: the SDKs
// decide those by their own rules.
func sdkTruth(record []sdkAttempt, writes map[string]int) sdkWant {
	var w sdkWant
	calls := map[string][]sdkAttempt{}
	for _, a := range record {
		calls[a.Call] = append(calls[a.Call], a)
	}
	for id, as := range calls {
		sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
		if as[0].SDK == "aws-sdk-go-v2" || as[0].SDK == "botocore" {
			w.AWSCalls++
		}
		run, loop, ok := 0, false, false
		for i, a := range as {
			if a.Status >= 200 && a.Status < 300 {
				if i > 0 && !ok {
					w.Recovered++
				}
				ok = true
			}
			w.Attempts++
			if a.N > 0 {
				w.Retries++
			}
			if a.Status == 400 || a.Status == 503 || a.Status == 429 {
				if run++; run >= 2 {
					loop = true
				}
			} else {
				run = 0
			}
			if i > 0 && as[i-1].RetryAfterMs > 0 && a.Sent < as[i-1].End+int64(as[i-1].RetryAfterMs)*int64(time.Millisecond) {
				w.Premature++
			}
		}
		if loop {
			w.Loops++
		}
		if !ok && len(as) > 1 {
			w.Exhausted++
		}
		if cap := sdkCaps[as[0].SDK]; !ok && cap > 0 && len(as) < cap {
			w.Denied++
		}
		// the upstream counts an AWS call's writes by its invocation id, the others' by the
		// call's name
		key := id
		if as[0].Invocation != "" {
			key = as[0].Invocation
		}
		if writes[key] >= 2 {
			w.DoubleWrites++
		}
	}
	return w
}

// botocorePython is a python3 that imports boto3, Debian's first; "" when none does.
func botocorePython() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import boto3").Run() == nil {
			return p
		}
	}
	return ""
}

func readSDKRecord(t *testing.T, path string) []sdkAttempt {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sdkAttempt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a sdkAttempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, a)
	}
	return out
}
