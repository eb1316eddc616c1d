package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notJudgedReport is what these tests read of a JSON report.
type notJudgedReport struct {
	Findings []struct {
		Kind            string
		Count, Attempts int64
	}
	NotJudged []struct {
		Kind, Unit, Log string
		Count           int64
	} `json:"not_judged"`
	Input struct {
		Lines    int64 `json:"lines"`
		Rejected int64 `json:"rejected"`
		Repeats  int64 `json:"repeated_rows"`
	}
}

func judgedReport(t *testing.T, args ...string) notJudgedReport {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json"}, args...)...)
	var r notJudgedReport
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report %v: exit %d: %s", args, code, stderr)
	}
	return r
}

// A gRPC method is an operation, as X-Amz-Target is: a retried Get reads, a retried
// Create writes. Two calls, each UNAVAILABLE (grpc-status 14) then OK on its retry
// (grpc-previous-rpc-attempts 1), linked by client, method and URI: one retried write.
func TestGRPCReadsAreNoWrites(t *testing.T) {
	t.Parallel()
	const format = `$remote_addr "$request" $status $request_time $msec ga=$http_grpc_previous_rpc_attempts gs=$upstream_trailer_grpc_status`
	log := filepath.Join(t.TempDir(), "grpc.log")
	lines := `10.0.0.1 "POST /shop.Orders/Get HTTP/2.0" 200 0.010 1795960800.010 ga=- gs=14
10.0.0.1 "POST /shop.Orders/Get HTTP/2.0" 200 0.010 1795960800.100 ga=1 gs=0
10.0.0.1 "POST /shop.Orders/Create HTTP/2.0" 200 0.010 1795960801.010 ga=- gs=14
10.0.0.1 "POST /shop.Orders/Create HTTP/2.0" 200 0.010 1795960801.100 ga=1 gs=0
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r := judgedReport(t, "--nginx-format", format, log)
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Kind)
		if f.Kind == "duplicate_write_risk" && (f.Count != 1 || f.Attempts != 1) {
			t.Errorf("duplicate_write_risk: %d requests, %d attempts; want Create's 1 and 1", f.Count, f.Attempts)
		}
	}
	if strings.Join(got, " ") != "duplicate_write_risk" || len(r.NotJudged) != 0 {
		t.Errorf("findings %v, not judged %+v; want duplicate_write_risk alone", got, r.NotJudged)
	}
}

// The same traffic loaded twice under two names: every key then shows two first attempts,
// which a key reused across requests would too. The findings that makes up are not
// claimed: they are counted as not judged, and every artefact says how many rows repeat.
// The incident sample's 126 lines hold 125 rows (one malformed: EXPECTED.md); its copy
// starts with one line of its own, a request at another time, so 125 of its 126 rows
// repeat.
func TestDoubledLoadClaimsNoReusedKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(scenario("incident-hour"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitAfterN(string(b), "\n", 2)[0]
	own := strings.Replace(strings.Replace(first, "14:", "09:", 1), "rid=\"", "rid=\"own-", 1)
	if own == first {
		t.Fatalf("could not make a line of the copy's own from %q", first)
	}
	dir := t.TempDir()
	copyLog := filepath.Join(dir, "access.log.copy")
	if err := os.WriteFile(copyLog, []byte(own+string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.duckdb")
	for _, f := range []string{scenario("incident-hour"), copyLog} {
		if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, f); code != 0 {
			t.Fatalf("ingest %s: exit %d: %s", f, code, stderr)
		}
	}
	single := judgedReport(t, "--db", ingested(t, "incident-hour"))
	r := judgedReport(t, "--db", db)
	if r.Input.Repeats != 125 || r.Input.Lines != 126+127 || r.Input.Rejected != 2 {
		t.Errorf("input: %+v; want 125 repeated rows of 253 lines, 2 rejected", r.Input)
	}
	for _, f := range append(r.Findings, single.Findings...) {
		if f.Kind == "reused_key" || f.Kind == "attempt_number_mismatch" {
			t.Errorf("claimed %s on %d requests", f.Kind, f.Count)
		}
	}
	var said bool
	for _, n := range r.NotJudged {
		said = said || (n.Kind == "reused_key" && n.Count > 0 && strings.Contains(n.Log, "--dedupe"))
	}
	if !said {
		t.Errorf("not judged: %+v; want reused_key, with --dedupe named", r.NotJudged)
	}
	if stdout, stderr, _ := retrylens(t, nil, "check", "--db", db, "--fail-on-finding", "reused_key", "--format", "json"); !strings.Contains(stdout, `"findings"`) || strings.Contains(stdout, "reused_key") {
		t.Errorf("check --fail-on-finding reused_key on a doubled load fails on it: %s\n%s", stdout, stderr)
	}
}

// A header stuck at its first number (x-envoy-attempt-count 1 on every attempt, istio
// #59413; x-stainless-retry-count 0, openai-node #1277) does not split a keyed request:
// its lines all read as first attempts, so it is numbered by place and named. Worked by
// hand: r-1 fails twice (503, each retry sent after the last ended) and then succeeds, all
// three logged as attempt 1; r-2 succeeds at once; "same", a key two requests reuse, is
// two successes 10 s apart, no retry. Four logical requests of six lines: two retries,
// both r-1's, renumbered; one recovered.
func TestStuckHeaderLinksByKey(t *testing.T) {
	t.Parallel()
	const format = `$remote_addr "$request" $status $request_time $msec rid=$http_x_request_id eac=$http_x_envoy_attempt_count`
	lines := `10.0.0.1 "GET /api/a HTTP/1.1" 503 0.010 1795960800.010 rid=r-1 eac=1
10.0.0.1 "GET /api/a HTTP/1.1" 503 0.010 1795960800.130 rid=r-1 eac=1
10.0.0.1 "GET /api/a HTTP/1.1" 200 0.010 1795960800.400 rid=r-1 eac=1
10.0.0.2 "GET /api/a HTTP/1.1" 200 0.010 1795960801.000 rid=r-2 eac=1
10.0.0.3 "GET /api/b HTTP/1.1" 200 0.010 1795960802.000 rid=same eac=1
10.0.0.3 "GET /api/b HTTP/1.1" 200 0.010 1795960812.000 rid=same eac=1
`
	log := filepath.Join(t.TempDir(), "envoy.log")
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	// and loaded in two parts, r-1's failures first: the cache's update links the new
	// lines with the old (its first failure alone would make its second, in the same
	// second with the same status, a repeat of another load's row: TestDoubledLoad)
	dir := t.TempDir()
	db := filepath.Join(dir, "r.duckdb")
	at := strings.Index(lines, "200")
	at = strings.LastIndex(lines[:at], "\n") + 1
	for i, part := range []string{lines[:at], lines[at:]} {
		path := filepath.Join(dir, fmt.Sprintf("part%d.log", i))
		os.WriteFile(path, []byte(part), 0o644)
		if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--nginx-format", format, path); code != 0 {
			t.Fatalf("ingest: exit %d: %s", code, stderr)
		}
	}
	for _, args := range [][]string{{"--nginx-format", format, log}, {"--db", db}} {
		stuckReport(t, args...)
	}
}

func stuckReport(t *testing.T, args ...string) {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json"}, args...)...)
	var r struct {
		Summary struct {
			FirstAttempts int64 `json:"first_attempts"`
			Retries       int64
			Recovered     int64
		}
		Findings []struct {
			Kind            string
			Count, Attempts int64
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if r.Summary.FirstAttempts != 4 || r.Summary.Retries != 2 || r.Summary.Recovered != 1 {
		t.Errorf("%v: summary %+v; want 4 first attempts, 2 retries, 1 recovered", args, r.Summary)
	}
	if len(r.Findings) != 1 || r.Findings[0].Kind != "attempt_number_mismatch" || r.Findings[0].Count != 1 || r.Findings[0].Attempts != 2 {
		t.Errorf("%v: findings %+v; want attempt_number_mismatch on 1 request, 2 attempts", args, r.Findings)
	}
}

// budget_denied follows the AWS SDKs' own rule: they retry 500, 502, 503 and 504 and a 4xx
// only for a throttling or transient code. Three S3 GETs of clients that state a cap of 3,
// each answered once and never retried, worked by hand:
//
//	e  429 without a code: some SDKs retry one (aws-sdk-go-v2 from 1.48), others do not
//	   (botocore 1.29): failed without a retry, and not judged, 1 attempt
//	f  503: retried by the rule, stopped below the cap: budget_denied
//	g  429 SlowDown: a throttle, retried by the rule: budget_denied
func TestBudgetDeniedByTheSDKsRule(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i, call := range []struct{ id, status, code string }{{"e", "429", "-"}, {"f", "503", "-"}, {"g", "429", "SlowDown"}} {
		fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "GET /bucket/k HTTP/1.1" %s 2 "-" "Boto3/1.34" rt=0.010 urt="0.010" us="%[2]s" ra="-" rr="-" rid="-" ik="-" retry_after="-" msec=%d.000 amz="attempt=1; max=3" inv="call-%s" sc="-" ec="%s" op="-" ram="-"`+"\n",
			i, call.status, 1795960800+i, call.id, call.code)
	}
	log := filepath.Join(t.TempDir(), "s3.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", "retry-sdk-full", log)
	var r struct {
		Layers struct {
			Fates map[string]int64 `json:"fates"`
		} `json:"layers"`
		NotJudged []struct {
			Kind, Unit string
			Count      int64
		} `json:"not_judged"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f := r.Layers.Fates; f["budget_denied"] != 2 || f["failed_without_retry"] != 1 {
		t.Errorf("fates %v; want 2 budget_denied (f, g), 1 failed_without_retry (e)", f)
	}
	if len(r.NotJudged) != 1 || r.NotJudged[0].Kind != "budget_denied" || r.NotJudged[0].Count != 1 || r.NotJudged[0].Unit != "attempts" {
		t.Errorf("not judged %+v; want budget_denied, 1 attempt (e)", r.NotJudged)
	}
}
