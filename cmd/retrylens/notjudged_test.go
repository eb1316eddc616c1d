package main

import (
	"encoding/json"
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
