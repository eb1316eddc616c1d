//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
)

// TestTracedClient runs a real traced client: grpc-go with a retry policy and its
// OpenTelemetry tracing, its spans exported by the OpenTelemetry SDK's own OTLP/HTTP
// exporter and written as OTLP JSON (lab/otel, its own module). The report from the
// traces alone must equal the client's and the server's record: calls, attempts (the
// server counts what it answered), retries, recovered and exhausted calls, every call
// linked by its span; so must nginx's log, and both in one database, where every span is
// matched to its line and the fates are the record's and nginx's own retries'.
func TestTracedClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := labClient(t, dir, "otel")
	// through nginx as a gRPC gateway, logging the attempt header, the call's status (in
	// the headers of a trailers-only answer, else the trailers) and the trace context
	up, err := lab.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// A second upstream nobody listens on, listed three times: nginx, taking an upstream at
	// random, tries it first for three attempts in four, is refused and tries again until
	// it reaches the live one (its own retries, "502, 200" in $upstream_status). Of the ten
	// calls answered at their first attempt, all ten reach it at once one run in a million.
	dead, err := lab.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	format := parse.Retry + ` gs="$upstream_trailer_grpc_status" gh="$upstream_http_grpc_status" ga="$http_grpc_previous_rpc_attempts" tp="$http_traceparent"`
	ng, err := lab.StartNginxWith(filepath.Join(dir, "nginx"), lab.NginxOptions{Upstreams: []string{up, dead, dead, dead}, GRPC: true, Format: format, Random: true})
	if errors.Is(err, lab.ErrNoNginx) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	traces := filepath.Join(dir, "traces.json")
	run := exec.Command(client, "-calls", "60", "-out", traces, "-listen", up, "-target", ng.Addr)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if serr := ng.Stop(); err == nil {
		err = serr
	}
	if err != nil {
		t.Fatalf("otelclient: %v\n%s", err, stderr.Bytes())
	}
	// the truth: each call's attempts as the server answered them, and how it ended
	var calls, attempts, recovered, exhausted, firstTry, notRetried int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c struct {
			Attempts int
			Code     string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		calls++
		attempts += c.Attempts
		switch {
		case c.Code == "OK" && c.Attempts > 1:
			recovered++
		case c.Code != "OK" && c.Attempts > 1:
			exhausted++
		case c.Code == "OK":
			firstTry++
		default:
			notRetried++
		}
	}
	if calls != 60 || recovered == 0 || exhausted == 0 {
		t.Fatalf("the client's record: %d calls, %d recovered, %d exhausted; want 60 and some of each", calls, recovered, exhausted)
	}

	want := [5]int{attempts, calls, attempts - calls, recovered, exhausted}
	// the traces alone, every call linked by its span
	type layers struct {
		Spans, Matched int
		Fates          map[string]int
	}
	var lastLayers layers
	report := func(what string, loads ...[]string) ([5]int, map[string]int) {
		t.Helper()
		db := filepath.Join(t.TempDir(), "t.duckdb")
		for _, args := range loads {
			if _, stderr, code := retrylens(t, nil, append([]string{"ingest", "--db", db}, args...)...); code != 0 {
				t.Fatalf("ingest of %s: exit %d: %s", what, code, stderr)
			}
		}
		js, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
		if code != 0 {
			t.Fatalf("report of %s: exit %d: %s", what, code, stderr)
		}
		var r struct {
			Summary map[string]any
			Linking map[string]int
			Layers  layers
		}
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatal(err)
		}
		lastLayers = r.Layers
		num := func(k string) int { f, _ := r.Summary[k].(float64); return int(f) }
		return [5]int{num("requests"), num("first_attempts"), num("retries"), num("recovered"), num("exhausted")}, r.Linking
	}
	got, linking := report("the traces", []string{traces})
	if got != want {
		t.Errorf("attempts, first attempts, retries, recovered, exhausted from the traces %v; the client's record %v", got, want)
	}
	if linking["request_id"] != calls || linking["heuristic"] != 0 {
		t.Errorf("linking %v: want every one of %d calls linked by its span", linking, calls)
	}
	// the gateway's log alone: the first attempts carry no attempt header (a gRPC client
	// sends it on retries only), the calls no key (linked by client, method and URI)
	nginxLog := []string{"--nginx-format", format, ng.TextLog}
	if got, _ := report("nginx's log", nginxLog); got != want {
		t.Errorf("attempts, first attempts, retries, recovered, exhausted from nginx's log %v; the client's record %v", got, want)
	}
	// every attempt span is in the gateway's log, by the span id its trace context carries
	spans := map[string]bool{}
	b, err := os.ReadFile(traces)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`"spanId":"([0-9a-f]{16})","parentSpanId":"[0-9a-f]{16}","flags":\d+,"name":"Attempt\.`).FindAllSubmatch(b, -1) {
		spans[string(m[1])] = true
	}
	logged, err := os.ReadFile(ng.TextLog)
	if err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, m := range regexp.MustCompile(`tp="00-[0-9a-f]{32}-([0-9a-f]{16})-\d\d"`).FindAllSubmatch(logged, -1) {
		if spans[string(m[1])] {
			matched++
		}
	}
	if len(spans) != attempts || matched != attempts {
		t.Errorf("%d attempt spans, %d of them in nginx's log by trace context; want %d and all", len(spans), matched, attempts)
	}
	// The calls nginx recovered, from its log: first attempts (no attempt header) whose
	// call answered OK after nginx tried more than one upstream.
	byGateway := 0
	defer func() { t.Logf("nginx recovered %d calls", byGateway) }()
	for _, m := range regexp.MustCompile(`us="([^"]*)".* gs="([^"]*)" gh="([^"]*)" ga="([^"]*)"`).FindAllSubmatch(logged, -1) {
		if strings.Contains(string(m[1]), ",") && (string(m[2]) == "0" || string(m[3]) == "0") && string(m[4]) == "-" {
			byGateway++
		}
	}
	if byGateway == 0 {
		t.Errorf("no call recovered by nginx: want some, with a dead upstream tried first three times in four")
	}
	// both in one database: each attempt once, every span matched to its line, and the
	// fates as the record and nginx's log have them
	if got, _ := report("the traces and nginx's log", []string{traces}, nginxLog); got != want {
		t.Errorf("attempts, first attempts, retries, recovered, exhausted from both %v; the client's record %v", got, want)
	}
	wantFates := map[string]int{"logical_requests": calls, "first_try": firstTry - byGateway, "recovered_by_gateway": byGateway,
		"recovered_by_client": recovered, "exhausted": exhausted, "budget_denied": 0, "failed_without_retry": notRetried}
	if l := lastLayers; l.Spans != attempts || l.Matched != matched || !maps.Equal(l.Fates, wantFates) {
		t.Errorf("layers: %d spans, %d matched, fates %v; want %d, %d, %v", l.Spans, l.Matched, l.Fates, attempts, matched, wantFates)
	}
}

// The advice holds on grpc-go's retryThrottling: the traced client (4 attempts on
// UNAVAILABLE) calls a server that fails each attempt with probability 0.4, drawn from
// the call and the attempt's number (the same draw in every run), first without
// throttling, then with the retryThrottling `budget --target-amplification 1.2 --family
// grpc` advises on the first run's traces. The second run's attempts per call, counted by
// the server, are at most the target and the replay's prediction (within 0.01: a retry the
// client throttles is not sent, so the draws after it are not met), and the calls it
// lost are the recoveries the advice said it would lose (within 1 %).
func TestGRPCThrottlingAdviceHolds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := labClient(t, dir, "otel")
	const calls, target = 600, 1.2
	run := func(name string, throttle ...string) (traces string, attempts, ok int) {
		t.Helper()
		traces = filepath.Join(dir, name+".json")
		args := append([]string{"-calls", fmt.Sprint(calls), "-fail-rate", "0.4", "-out", traces}, throttle...)
		out, err := exec.Command(client, args...).Output()
		if err != nil {
			t.Fatalf("otelclient %v: %v", args, err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var c struct {
				Attempts int
				Code     string
			}
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			attempts += c.Attempts
			if c.Code == "OK" {
				ok++
			}
		}
		return traces, attempts, ok
	}
	traces, attempts1, ok1 := run("free")
	a := adviceOn(t, "--target-amplification", fmt.Sprint(target), "--family", "grpc", traces)
	if !a.Met {
		t.Fatalf("advice %+v: none meets %.2fx", a, target)
	}
	_, attempts2, ok2 := run("throttled", "-throttle", a.Settings["maxTokens"]+","+a.Settings["tokenRatio"])
	amp1, amp2 := float64(attempts1)/calls, float64(attempts2)/calls
	t.Logf("no throttling: %.3fx, %d calls OK; advice: maxTokens %s, tokenRatio %s, %.3fx, %d recoveries lost; with it: %.3fx, %d OK",
		amp1, ok1, a.Settings["maxTokens"], a.Settings["tokenRatio"], a.Amplification, a.Lost, amp2, ok2)
	if amp1 <= target || amp2 > target || math.Abs(amp2-a.Amplification) > 0.01 {
		t.Errorf("with the advised throttling %.3fx (without %.3fx), want at most %.2fx and the replay's %.3fx", amp2, amp1, target, a.Amplification)
	}
	if lost := ok1 - ok2; math.Abs(float64(lost-a.Lost)) > calls/100 {
		t.Errorf("%d calls lost their recovery, the advice said %d", lost, a.Lost)
	}
}

// labClient builds the lab's client in lab/<module> (a module of its own, so that the
// clients' SDKs stay out of retrylens's go.mod) into dir, and returns its path.
func labClient(t *testing.T, dir, module string) string {
	t.Helper()
	client := filepath.Join(dir, module+"client")
	if out, err := exec.Command("go", "-C", filepath.Join("..", "..", "lab", module), "build", "-o", client, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the lab's client (lab/%s, its own module): %v\n%s", module, err, out)
	}
	return client
}
