//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
// python3-boto3, in its default retry mode and in adaptive mode; DynamoDB and S3), and
// openai-go and the openai npm client (Stainless clients), through real nginx and Caddy to
// an upstream that answers as those services do, failing (500), throttling (DynamoDB's 400
// ThrottlingException, S3's 503 SlowDown, OpenAI's 429 with retry-after-ms), slow (a write
// answered after the clients' timeout), and, for S3, cut by a rate limit in front of it
// (429 without an S3 code: botocore 1.29 does not retry it, aws-sdk-go-v2 1.48 does). nginx writes each request twice:
// in the retry-sdk-full format, with the error code and the operation, and in retry-sdk,
// the line most people have, without them. Each report is compared with the clients' own
// record of every attempt and the upstream's count of writes: attempts and retries, every
// AWS call linked by its invocation id, 429 loops (S3 throttling with 503:
// --throttle-status 429,503, as docs/formats.md says; DynamoDB's 400s where the code is
// logged), no non-retryable retry and nothing over the cap the SDK states (the SDKs retry
// only what their own lists allow, within their caps), the calls denied a retry below
// their cap by the SDKs' own rule, retried writes, premature retries as the record has
// them, and duplicate writes within 10 % of the upstream's. Where the line lacks the code
// or the operation, no finding is claimed: the report counts what it could not judge, and
// that count is the record's too.
func TestRealSDKs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := labClient(t, dir, "sdk")
	const run = 14 * time.Second
	up, err := lab.StartSDKUpstream(lab.SDKPhases{
		LimitFrom: 12 * time.Second, LimitTo: 15 * time.Second, Limit: 0.5, // the clients start a second or two after it
		FailFrom: 2 * time.Second, FailTo: 5 * time.Second, Fail: 0.3,
		ThrottleFrom: 5 * time.Second, ThrottleTo: 9 * time.Second, Throttle: 0.5,
		SlowFrom: 9 * time.Second, SlowTo: 12 * time.Second, Slow: 0.4, SlowFor: 1500 * time.Millisecond,
		RetryAfterMs: 250,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	n, err := lab.StartNginxWith(filepath.Join(dir, "nginx"), lab.NginxOptions{Upstreams: []string{up.Addr}, Format: parse.RetrySDKFull,
		AlsoFormats: []string{parse.RetrySDK}})
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
		name, url string
		stop      func() error
	}{
		{"nginx", n.URL(), n.Stop},
		{"caddy", c.URL(), c.Stop},
	}
	// the logs each gateway's clients are judged by; full: the line has the error code and
	// the operation
	logs := []struct {
		name, gateway, log, format string
		full                       bool
	}{
		{"nginx", "nginx", n.TextLog, "retry-sdk-full", true},
		{"nginx-retry-sdk", "nginx", n.AlsoLogs[0], "retry-sdk", false},
		{"caddy", "caddy", c.Log, "caddy", true},
	}
	sdks := []string{"aws", "openai"}
	python := botocorePython()
	switch {
	case python != "":
		sdks = append(sdks, "botocore", "botocore-adaptive")
	case os.Getenv("CI") != "":
		t.Fatal("no python3 with boto3 (apt-get install python3-boto3)")
	default:
		t.Log("no python3 with boto3: botocore sits out (apt-get install python3-boto3)")
	}
	modules, err := openaiNode(t)
	switch {
	case err == nil:
		sdks = append(sdks, "openai-node")
	case os.Getenv("CI") != "":
		t.Fatalf("the openai npm client: %v (apt-get install npm)", err)
	default:
		t.Logf("the openai npm client sits out: %v", err)
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
				switch sdk {
				case "botocore", "botocore-adaptive":
					mode := "legacy"
					if sdk == "botocore-adaptive" {
						mode = "adaptive"
					}
					cmd = exec.Command(python, filepath.Join("..", "..", "lab", "sdk", "botocore_client.py"), "--base", g.url, "--mode", mode,
						"--name", g.name+"-"+sdk, "--for", fmt.Sprint(run.Seconds()), "--workers", "3", "--timeout", "1", "--out", out)
				case "openai-node":
					cmd = exec.Command("node", filepath.Join("..", "..", "lab", "sdk", "openai_client.cjs"), "--modules", modules, "--base", g.url,
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
		if err := g.stop(); err != nil { // flushes the logs
			t.Fatal(err)
		}
	}
	for _, l := range logs {
		t.Run(l.name, func(t *testing.T) {
			var record []sdkAttempt
			for _, sdk := range sdks {
				record = append(record, readSDKRecord(t, filepath.Join(dir, l.gateway+"-"+sdk+".jsonl"))...)
			}
			want := sdkTruth(record, writes, l.full)
			stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", l.format,
				"--throttle-status", "429,503", l.log)
			var r labReport
			var more struct {
				Linking struct {
					InvocationID int64 `json:"invocation_id"`
				} `json:"linking"`
				Layers struct {
					Fates struct {
						BudgetDenied int64 `json:"budget_denied"`
					} `json:"fates"`
				} `json:"layers"`
				NotJudged []struct {
					Kind  string
					Count int64
				} `json:"not_judged"`
			}
			if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || json.Unmarshal([]byte(stdout), &more) != nil {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			notJudged := map[string]int64{}
			for _, n := range more.NotJudged {
				notJudged[n.Kind] = n.Count
			}
			nonRetryable, _ := r.finding("non_retryable_retry")
			overCap, _ := r.finding("over_cap")
			dup, _ := r.finding("possible_duplicate_write")
			risk, _ := r.finding("duplicate_write_risk")
			got := sdkFigures{
				Attempts: r.Summary.FirstAttempts + r.Summary.Retries, Retries: r.Summary.Retries,
				Recovered: r.Summary.Recovered, Exhausted: r.Summary.Exhausted,
				AWSCalls: more.Linking.InvocationID, NonRetryable: nonRetryable, OverCap: overCap, Denied: more.Layers.Fates.BudgetDenied,
				UncodedAttempts: notJudged["budget_denied"], NonRetryableNotJudged: notJudged["non_retryable_retry"],
				WritesNotJudged: notJudged["duplicate_write_risk"],
			}
			if l.full { // a line without retry-after-ms cannot tell a premature retry (docs/metrics.md)
				got.Premature = r.Loops429.PrematureRetries
			} else {
				want.Premature = 0
			}
			if got != want.sdkFigures {
				t.Errorf("report against the SDKs' own record:\n got  %+v\n want %+v", got, want.sdkFigures)
			}
			// The OpenAI calls send no key: the heuristic links them, and two calls of one
			// client that fail at the same moment can trade retries, which moves a loop or a
			// retried call (one in twenty in some runs) but no attempt, recovery or exhaustion.
			if !within(r.Loops429.Loops, want.Loops) {
				t.Errorf("%d 429 loops, the record has %d", r.Loops429.Loops, want.Loops)
			}
			if !within(risk, want.RetriedWrites) {
				t.Errorf("duplicate_write_risk %d, the record has %d retried writes the line can tell", risk, want.RetriedWrites)
			}
			// writes the line cannot tell from reads are in no finding, counted as not judged
			if !within(dup+notJudged["possible_duplicate_write"], want.DoubleWrites) || (!l.full && dup > want.DoubleWrites) {
				t.Errorf("possible_duplicate_write %d (and %d not judged), the upstream performed %d calls' writes twice or more",
					dup, notJudged["possible_duplicate_write"], want.DoubleWrites)
			}
			if want.Retries == 0 || want.Loops == 0 || want.DoubleWrites == 0 || want.UncodedAttempts == 0 || (l.full && want.Denied == 0) ||
				(!l.full && (want.NonRetryableNotJudged == 0 || want.WritesNotJudged == 0)) {
				t.Errorf("the run tests too little: %+v", want)
			}
			t.Logf("%s: %+v, %d loops (retrylens %d), %d retried writes (retrylens %d), %d double writes (retrylens %d, %d not judged)", l.name, got,
				want.Loops, r.Loops429.Loops, want.RetriedWrites, risk, want.DoubleWrites, dup, notJudged["possible_duplicate_write"])
		})
	}
}

// sdkFigures are what TestRealSDKs requires equal.
type sdkFigures struct {
	Attempts, Retries, Recovered, Exhausted, AWSCalls, Premature, NonRetryable, OverCap int64
	Denied                                                                              int64 // the fates' budget-denied
	// What a line without the error code and the operation cannot judge (docs/metrics.md,
	// "What the log cannot tell"): AWS attempts answered a 4xx below their cap without its
	// code (budget_denied's), AWS calls retried after a 400 or 403 without its code
	// (non_retryable_retry's), and DynamoDB calls retried, their POSTs naming no operation
	// (duplicate_write_risk's).
	UncodedAttempts, NonRetryableNotJudged, WritesNotJudged int64
}

type sdkWant struct {
	sdkFigures
	Loops, DoubleWrites, RetriedWrites int64
}

// sdkCaps are the attempts the AWS SDKs allow a call by default, which they state in
// amz-sdk-request (max=): aws-sdk-go-v2's standard retryer 3, botocore's legacy mode 5
// (DynamoDB's 10: botocore's _retry.json), its adaptive mode 3.
var sdkCaps = map[string]int{"aws-sdk-go-v2": 3, "botocore": 5, "botocore-adaptive": 3}

// sdkCap is the cap a call's SDK states for its operation (sdkCaps).
func sdkCap(a sdkAttempt) (int, bool) {
	cap, ok := sdkCaps[a.SDK]
	if a.SDK == "botocore" && (a.Op == "GetItem" || a.Op == "PutItem") {
		cap = 10
	}
	return cap, ok
}

// within reports whether got is want within 10 % (or 1).
func within(got, want int64) bool {
	d := got - want
	return max(d, -d) <= max(1, want/10)
}

// sdkTruth is what the SDKs' record and the upstream's writes say, of a line that logs the
// error code and the operation (full) or not: every attempt, the retries (n ≥ 1), the
// calls recovered (first attempt not 2xx, a later one 2xx) and exhausted (retried, never
// 2xx), the AWS calls (each has an invocation id), the calls with two or more throttled
// attempts in a row (503 from S3, 429 from OpenAI and S3's rate limit, and DynamoDB's 400,
// which it answers only to throttle here, where its code is logged), the retries sent
// before the previous answer's retry-after-ms had passed, the AWS calls that stopped below
// the cap they state on an answer their SDK retries by its documented rule (500, 502, 503, 504, a
// timeout, and a 4xx only for a throttling or transient code: DynamoDB's 400 where the
// code is logged; never S3's 429 without one, which some SDKs retry and others do not:
// the line cannot judge a stop there, and the uncoded attempts count it), the retried calls whose POST writes
// without a key (chat completions, and PutItem where the operation is logged), and the
// calls whose write the upstream performed twice or more. Nothing is non-retryable or
// over a cap: the SDKs decide those by their own rules.
func sdkTruth(record []sdkAttempt, writes map[string]int, full bool) sdkWant {
	var w sdkWant
	calls := map[string][]sdkAttempt{}
	for _, a := range record {
		calls[a.Call] = append(calls[a.Call], a)
	}
	throttled := func(status int) bool { return status == 503 || status == 429 || (full && status == 400) }
	retried := func(status int) bool { // by the AWS SDKs' rule
		return status == 0 || status == 500 || status == 502 || status == 503 || status == 504 || (full && status == 400)
	}
	// the AWS SDKs state their cap on every attempt, but botocore on its first, before its
	// retry handler has run: below a cap a line does not state, nothing is judged
	stated := func(a sdkAttempt) bool {
		_, aws := sdkCaps[a.SDK]
		return aws && (a.N > 0 || !strings.HasPrefix(a.SDK, "botocore"))
	}
	for id, as := range calls {
		sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
		cap, aws := sdkCap(as[0])
		if aws {
			w.AWSCalls++
		}
		dynamo := as[0].Op == "GetItem" || as[0].Op == "PutItem"
		run, loop, ok, afterCode := 0, false, false, false
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
			if throttled(a.Status) {
				if run++; run >= 2 {
					loop = true
				}
			} else {
				run = 0
			}
			// a retry within the gateway's clock (a millisecond) of its wait waited: Node's
			// timers fire up to a millisecond early on a finer clock
			if i > 0 && as[i-1].RetryAfterMs > 0 && a.Sent < as[i-1].End+int64(as[i-1].RetryAfterMs-1)*int64(time.Millisecond) {
				w.Premature++
			}
			if stated(a) && a.N+1 < cap && (a.Status == 429 || (!full && (a.Status == 400 || a.Status == 403))) {
				w.UncodedAttempts++
			}
			if aws && i > 0 && !full && (as[i-1].Status == 400 || as[i-1].Status == 403) {
				afterCode = true
			}
		}
		if loop {
			w.Loops++
		}
		if !ok && len(as) > 1 {
			w.Exhausted++
		}
		if last := as[len(as)-1]; stated(last) && !ok && len(as) < cap && retried(last.Status) {
			w.Denied++
		}
		if afterCode {
			w.NonRetryableNotJudged++
		}
		if len(as) > 1 {
			switch {
			case aws && dynamo && !full:
				w.WritesNotJudged++
			case as[0].Op == "chat" || (aws && as[0].Op == "PutItem"):
				w.RetriedWrites++
			}
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

// openaiNode installs the openai npm package, once per machine, in the user's cache: the
// major version the lab's client (lab/sdk/openai_client.cjs) is written for, which runs on
// Debian's Node.js. It returns its node_modules directory.
func openaiNode(t *testing.T) (string, error) {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", err
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "retrylens-lab", "openai-node-5")
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "openai", "package.json")); err == nil {
		return modules, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel", "error", "openai@5")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install openai@5: %v\n%s", err, out)
	}
	return modules, nil
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

// The advice holds on a real client: aws-sdk-go-v2 (1.48: the 2026 retry defaults, a
// retry 14 tokens) calls an upstream that fails two calls in five (500) through nginx,
// first with a retry quota too large to run out (no budget), then with the quota
// `budget --target-amplification 1.15 --family aws-2026` advises on the first run's log.
// The second run's attempts per first attempt, from the client's own record, are at most
// the target (and within sampling noise of the replay's prediction for that quota), and
// the share of calls recovered by a retry falls by no more than the advice said it would.
// The upstream's failures do not depend on load, so the open-loop replay is exact but for
// the draw.
func TestBudgetAdviceHolds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := labClient(t, dir, "sdk")
	const target = 1.15
	run := func(name string, quota int) (record []sdkAttempt, log string) {
		t.Helper()
		up, err := lab.StartSDKUpstream(lab.SDKPhases{FailFrom: 0, FailTo: time.Hour, Fail: 0.4})
		if err != nil {
			t.Fatal(err)
		}
		defer up.Close()
		n, err := lab.StartNginxWith(filepath.Join(dir, name), lab.NginxOptions{Upstreams: []string{up.Addr}, Format: parse.RetrySDKFull})
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".jsonl")
		cmd := exec.Command(client, "-base", n.URL(), "-sdk", "aws", "-name", name, "-for", "6s", "-workers", "3", "-timeout", "1s",
			"-quota", fmt.Sprint(quota), "-out", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		return readSDKRecord(t, out), n.TextLog
	}
	// attempts per first attempt, and the share of calls a retry recovered, in a record
	figures := func(record []sdkAttempt) (amp, recovered float64, calls int) {
		byCall := map[string][]sdkAttempt{}
		for _, a := range record {
			byCall[a.Call] = append(byCall[a.Call], a)
		}
		var rec int
		for _, as := range byCall {
			sort.Slice(as, func(i, j int) bool { return as[i].N < as[j].N })
			if as[0].Status != 200 && as[len(as)-1].Status == 200 {
				rec++
			}
		}
		return float64(len(record)) / float64(len(byCall)), float64(rec) / float64(len(byCall)), len(byCall)
	}
	free, log := run("free", 1_000_000)
	amp1, rec1, calls1 := figures(free)
	a := adviceOn(t, "--target-amplification", fmt.Sprint(target), "--family", "aws-2026", "--log-format", "retry-sdk-full", log)
	quota, err := strconv.Atoi(a.Settings["retry quota (tokens)"])
	if !a.Met || err != nil || a.Instances != 1 || amp1 <= target {
		t.Fatalf("advice %+v on a run of %.3fx: want a quota that meets %.2fx, for the one client", a, amp1, target)
	}
	budgeted, _ := run("budgeted", quota)
	amp2, rec2, calls2 := figures(budgeted)
	t.Logf("no budget: %d calls, %.3fx, %.1f%% recovered; advice: quota %d, %.3fx, %d of its calls' recoveries lost; with it: %d calls, %.3fx, %.1f%% recovered",
		calls1, amp1, 100*rec1, quota, a.Amplification, a.Lost, calls2, amp2, 100*rec2)
	if amp2 > target || math.Abs(amp2-a.Amplification) > 0.03 {
		t.Errorf("with the advised quota %d: %.3fx, want at most %.2fx and near the replay's %.3fx", quota, amp2, target, a.Amplification)
	}
	if lostShare := rec1 - rec2; lostShare > float64(a.Lost)/float64(calls1)+0.03 {
		t.Errorf("recovered share fell by %.3f, the advice said %.3f", lostShare, float64(a.Lost)/float64(calls1))
	}
}

// advice is the one recommendation of `budget … --format json` for one family.
type advice struct {
	Met           bool              `json:"meets_target"`
	Settings      map[string]string `json:"settings"`
	Amplification float64           `json:"amplification"`
	Lost          int               `json:"recovered_lost"`
	Instances     int               `json:"instances"`
}

// adviceOn asks budget for one family's advice (args name it, the target and the log).
func adviceOn(t *testing.T, args ...string) advice {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"budget", "--format", "json"}, args...)...)
	var out struct {
		Recommendations []advice `json:"recommendations"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || len(out.Recommendations) != 1 {
		t.Fatalf("budget %v: exit %d: %s%s", args, code, stderr, stdout)
	}
	return out.Recommendations[0]
}
