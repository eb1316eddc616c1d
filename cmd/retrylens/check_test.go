package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrylens/retrylens/internal/testmain"
)

type checkAlert struct {
	Rule, Severity, Start, End string
	Peak                       float64
}

// The incident hour's minutes, worked out by hand from testdata/incident-hour/EXPECTED.md:
// 14:20–14:22 three `502, 200` requests a minute (amplification 2, retry rate 1, success
// 1); 14:23 one of those and two `502, 502, 200` (8/3, 1, 3/5); 14:24–14:25 three of the
// latter (3, 1, 1/2); 14:26–14:27 three `502×3` (3, 1, 0); 14:28 one `502×3` and two
// `429, 429` (7/3, 1, 0); 14:29 three 200s. So: retry_storm and retry_rate_high from 14:20
// to 14:29 (peaks 3 and 1), retries_not_helping from 14:26 to 14:29 (lowest success 0).
func TestCheck(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := retrylens(t, nil, "check", "--format", "json", scenario("incident-hour"))
	if code != exitAlert || !strings.Contains(stderr, "1 alert at or above P1") {
		t.Fatalf("exit %d, want %d: %s", code, exitAlert, stderr)
	}
	var got struct {
		FailOn  string `json:"fail_on"`
		Failing int
		Alerts  []checkAlert
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	// Each minute 14:20-14:28 has 3 first attempts, all retried (3 attempts numbered 1), and
	// 3, 3, 3, 5, 6, 6, 6, 6, 4 retries, 3 answered 2xx up to 14:25 and none after (counted
	// in the log with grep and awk; 14:29 has no retry). With 95 % one-sided Wilson
	// intervals, worked out by hand (docs/metrics.md): retry rate 3 of 3 is at least 0.53,
	// above 0.15 in every minute; retry success 0 of 6 at most 0.31, under 0.40, but 0 of 4
	// up to 0.40: 14:28 is thin; retries' share of the lines (amplification 1.5 is a third)
	// 3 of 6 at least 0.22 and 4 of 7 0.29 (thin), 5 of 8 0.35 and 6 of 9 0.40 (firing).
	want := []checkAlert{
		{"retry_rate_high", "P2", "2026-11-29T14:20:00Z", "2026-11-29T14:29:00Z", 1},
		{"retries_not_helping", "P2", "2026-11-29T14:26:00Z", "2026-11-29T14:28:00Z", 0},
		{"retry_storm", "P1", "2026-11-29T14:23:00Z", "2026-11-29T14:28:00Z", 3},
	}
	if diff := cmp.Diff(want, got.Alerts, approx); diff != "" || got.Failing != 1 || got.FailOn != "P1" {
		t.Errorf("alerts (-want +got):\n%s\nfailing %d", diff, got.Failing)
	}
	// The same on databases loaded once (the first check above read the file).
	incident, quiet := ingested(t, "incident-hour"), ingested(t, "quiet-hour")
	if _, _, code := retrylens(t, nil, "check", "--fail-on", "P2", "--db", incident); code != exitAlert {
		t.Errorf("--fail-on P2: exit %d, want %d", code, exitAlert)
	}
	// The quiet hour's one retry makes a 50 % retry rate for a single minute: not sustained.
	if stdout, _, code := retrylens(t, nil, "check", "--format", "table", "--fail-on", "P2", "--db", quiet); code != 0 || stdout != "no alerts\n" {
		t.Errorf("quiet hour: exit %d, %q", code, stdout)
	}
	// In a pipe: tab-separated, a header and a line per alert (three in the incident hour).
	if stdout, _, _ := retrylens(t, nil, "check", "--db", quiet); stdout != "severity\trule\tstart\tend\tpeak\n" {
		t.Errorf("quiet hour in a pipe: %q", stdout)
	}
	stdout, _, _ = retrylens(t, nil, "check", "--db", incident)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 4 || !strings.Contains(stdout, "P1\tretry_storm\t2026-11-29T14:23:00Z\t2026-11-29T14:28:00Z\t3\n") || strings.Contains(stdout, "│") {
		t.Errorf("incident hour in a pipe:\n%s", stdout)
	}
	// A storm threshold above the peak of 3 leaves only P2 alerts: P1 passes.
	rules := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(rules, []byte(`[{"rule": "retry_storm", "threshold": 3.5}]`), 0o644)
	if _, stderr, code := retrylens(t, nil, "check", "--rules", rules, "--db", incident); code != 0 {
		t.Errorf("--rules raising the storm threshold: exit %d: %s", code, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--fail-on", "P3", "--db", incident); code != exitUsage || !strings.Contains(stderr, "want P1 or P2") {
		t.Errorf("--fail-on P3: exit %d: %s", code, stderr)
	}
	// p1 is P1; three alerts fired at P2 or above in the incident hour (retry_rate_high,
	// retries_not_helping, retry_storm), one of them P1
	for _, tc := range []struct{ failOn, say string }{{"p2", "3 alerts at or above P2"}, {"p1", "1 alert at or above P1"}} {
		if _, stderr, code := retrylens(t, nil, "check", "--fail-on", tc.failOn, "--db", incident); code != exitAlert || !strings.Contains(stderr, tc.say) {
			t.Errorf("--fail-on %s: exit %d: %s", tc.failOn, code, stderr)
		}
	}
}

// retrylens version prints the build as --version does; a command it does not know is a
// usage error (exit 2), with a hint that names the root's help without a stray space.
func TestVersionAndUnknownCommands(t *testing.T) {
	t.Parallel()
	out, _, code := retrylens(t, nil, "version")
	flag, _, _ := retrylens(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "retrylens ") || out != flag {
		t.Errorf("version: exit %d, %q; --version %q", code, out, flag)
	}
	for _, args := range [][]string{{"verison"}, {"version", "extra"}} {
		if _, stderr, code := retrylens(t, nil, args...); code != exitUsage || strings.Contains(stderr, "retrylens  --help") {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}

// A log without attempt headers reads "no attempt data" in every format, and check exits
// 6 rather than passing: the Apache corpus (10,000 combined lines, when ../shared is
// there) and a few combined lines made here. So do a range with no rows and an empty
// database's range.
func TestNoAttemptData(t *testing.T) {
	testmain.Long(t, "22 reports and checks of logs without attempt data")
	t.Parallel()
	dir := t.TempDir()
	own := filepath.Join(dir, "combined.log")
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, `10.0.0.%d - - [29/Nov/2026:10:%02d:00 +0000] "GET /api/items/%d HTTP/1.1" 200 12 "-" "curl/8.5"`+"\n", i%7, i, i)
	}
	os.WriteFile(own, []byte(b.String()), 0o644)
	logs := []string{own}
	if _, err := os.Stat("../../../shared/corpus/elastic-apache/access.log.gz"); err == nil {
		logs = append(logs, "../../../shared/corpus/elastic-apache/access.log.gz")
	}
	for i, log := range logs {
		// Loaded once; the first format reads the log itself, as a FILE argument.
		db := filepath.Join(dir, fmt.Sprintf("none%d.duckdb", i))
		if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--log-format", "combined", "--db", db, log); code != 0 {
			t.Fatalf("ingest %s: exit %d: %s", log, code, stderr)
		}
		rows := []string{"--db", db}
		for k, format := range []string{"table", "tsv", "markdown", "json", "csv", "html"} {
			from := rows
			if k == 0 {
				from = []string{"--log-format", "combined", log}
			}
			stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", format}, from...)...)
			if code != 0 || !strings.Contains(stdout, "no attempt data") {
				t.Errorf("%s as %s: exit %d, no 'no attempt data' in:\n%.600s%s", filepath.Base(log), format, code, stdout, stderr)
			}
		}
		_, stderr, code := retrylens(t, nil, append([]string{"check"}, rows...)...)
		if code != exitNoData || !strings.Contains(stderr, "carries an attempt number") {
			t.Errorf("check on %s: exit %d, want %d: %s", filepath.Base(log), code, exitNoData, stderr)
		}
		// budget too: a table of zeros would read as a budget that changed nothing.
		stdout, stderr, code := retrylens(t, nil, append([]string{"budget"}, rows...)...)
		if code != exitNoData || stdout != "" || !strings.Contains(stderr, "carries an attempt number") {
			t.Errorf("budget on %s: exit %d, want %d: %s%s", filepath.Base(log), code, exitNoData, stdout, stderr)
		}
	}
	_, stderr, code := retrylens(t, nil, "check", "--since", "2027-01-01", scenario("incident-hour"))
	if code != exitNoData || !strings.Contains(stderr, "no rows in the range") {
		t.Errorf("check after the last line: exit %d, want %d: %s", code, exitNoData, stderr)
	}
	// The incident hour with its attempt headers taken out: nothing to judge, until check
	// infers them as its message says, and finds the hour's P1 storm (TestCheck's minutes:
	// each retry repeats its client's failed line a second or so later).
	src, err := os.ReadFile(scenario("incident-hour"))
	if err != nil {
		t.Fatal(err)
	}
	stripped := filepath.Join(t.TempDir(), "access.log")
	os.WriteFile(stripped, regexp.MustCompile(` ra="\d+"`).ReplaceAll(src, []byte(` ra="-"`)), 0o644)
	if _, stderr, code := retrylens(t, nil, "check", stripped); code != exitNoData || !strings.Contains(stderr, "try --infer-attempts") {
		t.Errorf("check without attempt headers: exit %d, want %d: %s", code, exitNoData, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--infer-attempts", stripped); code != exitAlert || !strings.Contains(stderr, "1 alert at or above P1") {
		t.Errorf("check --infer-attempts: exit %d, want %d: %s", code, exitAlert, stderr)
	}
	if stdout, stderr, code := retrylens(t, nil, "budget", "--infer-attempts", "--format", "tsv", stripped); code != 0 || !strings.Contains(stdout, "finagle") {
		t.Errorf("budget --infer-attempts: exit %d: %s%s", code, stdout, stderr)
	}
}

// One rule gives every row its verdict, and says why: a range where /a storms for two
// minutes while /b's retries rescue every failure. The range and /a read fuelling and
// name the rules that fired in their own minutes; /b, whose minutes fire nothing, reads
// rescuing with no alert to show. Worked out by hand: /a has 10 first attempts a minute for
// ten minutes, and in minutes 4 and 5 each of them fails twice more (502, 502, 502): 30
// lines of which 20 retries, amplification 3; /b has 10 first attempts a minute, one of
// them failing and retried once with a 200: 100 first attempts, 10 retries, all recovered.
func TestSliceVerdicts(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	line := func(min, sec int, route string, status, attempt int, id string) {
		t0 := int64(1795960800) + int64(min*60+sec) // 2026-11-29T14:00:00Z
		fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:%02d:%02d +0000] "GET %s HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="%s" ik="-" retry_after="-" msec=%d.500`+"\n",
			min, sec, route, status, status, attempt, id, t0)
	}
	for m := range 10 {
		for i := range 10 {
			id := fmt.Sprintf("a%d-%d", m, i)
			if m == 4 || m == 5 {
				line(m, i*5, "/a", 502, 0, id)
				line(m, i*5+1, "/a", 502, 1, id)
				line(m, i*5+2, "/a", 502, 2, id)
			} else {
				line(m, i*5, "/a", 200, 0, id)
			}
			id = fmt.Sprintf("b%d-%d", m, i)
			if i == 0 {
				line(m, 3, "/b", 503, 0, id)
				line(m, 4, "/b", 200, 1, id)
			} else {
				line(m, i*5+3, "/b", 200, 0, id)
			}
		}
	}
	// the lines in time order, as a gateway writes them
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	sort.SliceStable(lines, func(i, j int) bool { return lines[i][14:38] < lines[j][14:38] })
	log := filepath.Join(t.TempDir(), "slices.log")
	os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", "retry", log)
	var r struct {
		Summary struct {
			Verdict string
			Alerts  []string
		}
		Endpoints []struct {
			Route, Verdict string
			Alerts         []string
			Retries        int64
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if r.Summary.Verdict != "fuelling" || !slices.Contains(r.Summary.Alerts, "retry_storm") {
		t.Errorf("range: %+v, want fuelling with retry_storm", r.Summary)
	}
	got := map[string]string{}
	for _, e := range r.Endpoints {
		got[e.Route] = fmt.Sprintf("%s %v %d", e.Verdict, e.Alerts, e.Retries)
	}
	want := map[string]string{
		"/a": "fuelling [retry_rate_high retries_not_helping retry_storm] 40",
		"/b": "rescuing [] 10",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

// check --window judges windows under a minute as report does: the incident hour has at
// most one first attempt in any 10 s (grep 'ra="0"' and its times), under the 3 every
// rule needs, so no run of windows fires on its own; but retry_storm fires on the minutes
// 14:23–14:28 (EXPECTED.md), and its windows whose figures cross 1.5x bear it out (the
// request at 14:23:00 and its retry a second later, lines 40 and 41 of the log, make the
// window 14:23:00 a 2x one): a storm that fails check at 1m fails it at 10s, from the
// same window, ending inside the alert's last minute.
func TestCheckWindow(t *testing.T) {
	t.Parallel()
	db := ingested(t, "incident-hour")
	if out, stderr, code := retrylens(t, nil, "check", "--window", "10s", "--format", "tsv", "--db", db); code != exitAlert ||
		!strings.Contains(out, "P1\tretry_storm\t2026-11-29T14:23:00Z\t2026-11-29T14:27:") {
		t.Errorf("check --window 10s: exit %d, want %d and retry_storm from 14:23 into 14:27:\n%s%s", code, exitAlert, out, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--window", "1m", "--db", db); code != exitAlert {
		t.Errorf("check --window 1m: exit %d, want %d: %s", code, exitAlert, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--window", "5m", "--db", db); code != exitUsage || !strings.Contains(stderr, "minutes") {
		t.Errorf("check --window 5m: exit %d, want %d: %s", code, exitUsage, stderr)
	}
}

// check --fail-on-finding fails on a finding even when no alert does, and says which;
// --format markdown is a block for a pull request comment. The incident hour's clients
// retry exactly a second apart (testdata/gen.py: attempt k at t + k s): synchronised; all
// its requests are GETs.
func TestCheckFindingsAndMarkdown(t *testing.T) {
	t.Parallel()
	quiet := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(quiet, []byte(`[{"rule": "retry_storm", "threshold": 100}, {"rule": "retry_rate_high", "threshold": 100},
		{"rule": "retries_not_helping", "threshold": 0}]`), 0o644)
	db := ingested(t, "incident-hour")
	if _, stderr, code := retrylens(t, nil, "check", "--rules", quiet, "--fail-on-finding", "synchronised", "--db", db); code != exitAlert ||
		!strings.Contains(stderr, "findings present: synchronised (") {
		t.Errorf("--fail-on-finding synchronised: exit %d, want %d: %s", code, exitAlert, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--rules", quiet, "--fail-on-finding", "possible_duplicate_write,false_success", "--db", db); code != 0 {
		t.Errorf("--fail-on-finding on writes, in a log of GETs: exit %d: %s", code, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "check", "--fail-on-finding", "dupes", "--db", db); code != exitUsage || !strings.Contains(stderr, "possible_duplicate_write") {
		t.Errorf("--fail-on-finding dupes: exit %d, want %d: %s", code, exitUsage, stderr)
	}
	// JSON names what the check failed on: the P1 alert, then the finding asked for
	out, _, code := retrylens(t, nil, "check", "--format", "json", "--fail-on-finding", "synchronised", "--db", db)
	var js struct {
		FailedOn []struct {
			Kind, Rule string
			Count      int64
		} `json:"failed_on"`
	}
	if code != exitAlert || json.Unmarshal([]byte(out), &js) != nil || len(js.FailedOn) != 2 ||
		js.FailedOn[0].Rule != "retry_storm" || js.FailedOn[1].Kind != "synchronised" || js.FailedOn[1].Count == 0 {
		t.Errorf("--format json: exit %d, failed_on %+v:\n%s", code, js.FailedOn, out)
	}
	stdout, _, code := retrylens(t, nil, "check", "--format", "markdown", "--db", db)
	if code != exitAlert || !strings.HasPrefix(stdout, "### retrylens check fails: 1 alert at or above P1\n") ||
		!strings.Contains(stdout, "| P1 | retry_storm | 2026-11-29 14:23 | 2026-11-29 14:28 | 3.00x |\n") || !strings.Contains(stdout, "- `synchronised`: ") {
		t.Errorf("--format markdown: exit %d:\n%s", code, stdout)
	}
}

// A retry that waited the retry-after-ms the server asked (250 ms, before a Retry-After
// of 1 s, which the Stainless clients read second) is not premature: two requests each
// throttled then retried 300 ms later, worked by hand. Logged without retry-after-ms the
// same retries are premature against Retry-After's second.
func TestRetryAfterMsIsHonoured(t *testing.T) {
	t.Parallel()
	format := `$remote_addr [$time_local] "$request" $status rt=$request_time ra="$http_x_retry_attempt" rid="$http_x_request_id" retry_after="$sent_http_retry_after" ram="$sent_http_retry_after_ms" msec=$msec`
	var b strings.Builder
	for i, t0 := range []int64{1795960800, 1795960810} {
		fmt.Fprintf(&b, `10.0.0.1 [29/Nov/2026:14:00:00 +0000] "POST /v1/chat/completions HTTP/1.1" 429 rt=0.000 ra="0" rid="r%d" retry_after="1" ram="%%s" msec=%d.000`+"\n", i, t0)
		fmt.Fprintf(&b, `10.0.0.1 [29/Nov/2026:14:00:00 +0000] "POST /v1/chat/completions HTTP/1.1" 200 rt=0.000 ra="1" rid="r%d" retry_after="-" ram="-" msec=%d.300`+"\n", i, t0)
	}
	for _, c := range []struct {
		ram  string
		want float64
	}{{"250", 0}, {"-", 2}} {
		log := filepath.Join(t.TempDir(), "sdk.log")
		os.WriteFile(log, []byte(strings.ReplaceAll(b.String(), "%s", c.ram)), 0o644)
		stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--nginx-format", format, log)
		var r struct {
			Loops struct {
				Premature float64 `json:"premature_retries"`
			} `json:"loops_429"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		if r.Loops.Premature != c.want {
			t.Errorf("retry-after-ms %q: %v premature retries, want %v", c.ram, r.Loops.Premature, c.want)
		}
	}
}

// over_cap counts attempts beyond the cap the client states (amz-sdk-request max=) where
// it states one: an AWS SDK call of max=5 that made 4 attempts (attempt=1..4) is over no
// cap at --max-attempts 3; logged without max= its fourth attempt is over the policy's 3.
func TestStatedCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		max  string
		want float64
	}{{"; max=5", 0}, {"", 1}} {
		var b strings.Builder
		for n := 1; n <= 4; n++ {
			status := 503
			if n == 4 {
				status = 200
			}
			fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:0%d +0000] "GET /bucket/key HTTP/1.1" %d 2 "-" "aws-sdk-go-v2/1.30" rt=0.010 urt="0.010" us="%d" ra="-" rr="-" rid="-" ik="-" retry_after="-" msec=179596080%d.000 amz="attempt=%d%s" inv="call-1" sc="-"`+"\n",
				n, status, status, n, n, c.max)
		}
		log := filepath.Join(t.TempDir(), "s3.log")
		os.WriteFile(log, []byte(b.String()), 0o644)
		stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--max-attempts", "3", log)
		var r struct {
			Findings []struct {
				Kind     string
				Attempts float64
			}
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		got := 0.0
		for _, f := range r.Findings {
			if f.Kind == "over_cap" {
				got = f.Attempts
			}
		}
		if got != c.want {
			t.Errorf("amz-sdk-request %q: %v attempts over the cap, want %v", "attempt=N"+c.max, got, c.want)
		}
	}
}

// awsThrottleLog writes TestThrottleCodes's log (retry-sdk-full) and returns its path.
func awsThrottleLog(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	sec := 0
	for _, call := range []struct {
		id, method, uri, op string
		answers             []string // status and error code
	}{
		{"a", "POST", "/", "DynamoDB_20120810.GetItem", []string{"400 ThrottlingException", "400 ThrottlingException", "200 -"}},
		{"b", "POST", "/", "DynamoDB_20120810.PutItem", []string{"400 ValidationException", "400 ValidationException"}},
		{"c", "PUT", "/bucket/k", "-", []string{"503 SlowDown", "200 -"}},
		{"d", "GET", "/bucket/k", "-", []string{"400 RequestTimeout", "200 -"}},
	} {
		for n, a := range call.answers {
			status, code, _ := strings.Cut(a, " ")
			fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "%s %s HTTP/1.1" %s 2 "-" "Boto3/1.34" rt=0.010 urt="0.010" us="%s" ra="-" rr="-" rid="-" ik="-" retry_after="-" msec=%d.000 amz="attempt=%d; max=10" inv="call-%s" sc="-" ec="%s" op="%s" ram="-"`+"\n",
				sec, call.method, call.uri, status, status, 1795960800+sec, n+1, call.id, code, call.op)
			sec++
		}
	}
	log := filepath.Join(t.TempDir(), "aws.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return log
}

// awsShortLog is log (awsThrottleLog's) as retry-sdk logs its lines: without the code, the
// operation and retry-after-ms (read as retry-sdk, the longer lines are refused:
// TestDetect).
func awsShortLog(t *testing.T, log string) string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "aws-short.log")
	if err := os.WriteFile(short, regexp.MustCompile(` ec="[^"]*" op="[^"]*" ram="[^"]*"`).ReplaceAll(b, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return short
}

// Throttles that are not 429, told by the error code the gateway logs, and reads that
// are POSTs, told by the operation (retry-sdk-full: x-amzn-ErrorType, X-Amz-Target). Four AWS
// SDK calls, each its own invocation id, worked by hand:
//
//	a  POST / GetItem: 400 ThrottlingException, 400 ThrottlingException, 200
//	b  POST / PutItem: 400 ValidationException, 400 ValidationException (a client bug)
//	c  PUT /bucket/k (S3, no operation header): 503 SlowDown, 200
//	d  GET /bucket/k (S3): 400 RequestTimeout, 200
//
// Throttled attempts: a's two and c's one. Loops (two or more throttled in a row): a
// alone. Blind retries (after a throttle, with no Retry-After to go by): a's 2 and 3, c's
// 2: 3. Retries of non-retryable answers: b's second attempt alone (a's follow throttles,
// d's a transient RequestTimeout). Retried POSTs without an idempotency key
// (duplicate_write_risk): b alone, a being a read. The same lines read without the codes
// and operations (retry-sdk) give no loop and no blind retry, and claim no finding: an AWS
// SDK retries a 400 by its code, and names the operation of a POST in X-Amz-Target only.
// Not judged: a, b and d's retries (the code before them unknown: 3 requests), a's and
// b's POSTs (2), and, for budget_denied, the 400s without a code below the cap of 10: a's
// two, b's two and d's first (5 attempts).
func TestThrottleCodes(t *testing.T) {
	t.Parallel()
	log := awsThrottleLog(t)
	type figures struct {
		Loops struct {
			Loops float64 `json:"loops"`
			Blind float64 `json:"blind_retries"`
		} `json:"loops_429"`
		Findings []struct {
			Kind            string
			Count, Attempts float64
		}
		NotJudged []struct {
			Kind, Unit, Log string
			Count           float64
		} `json:"not_judged"`
	}
	logs := map[string]string{"retry-sdk-full": log, "retry-sdk": awsShortLog(t, log)}
	for _, c := range []struct {
		format                    string
		loops, blind, nonRetryReq float64
		nonRetryAttempts, writes  float64
		notJudged                 string
	}{
		{"retry-sdk-full", 1, 3, 1, 1, 1, ""},
		{"retry-sdk", 0, 0, 0, 0, 0, "duplicate_write_risk 2 requests X-Amz-Target, non_retryable_retry 3 requests x-amzn-ErrorType, budget_denied 5 attempts x-amzn-ErrorType"},
	} {
		stdout, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", c.format, logs[c.format])
		var r figures
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("%s: exit %d: %s", c.format, code, stderr)
		}
		var req, att, writes float64
		for _, f := range r.Findings {
			switch f.Kind {
			case "non_retryable_retry":
				req, att = f.Count, f.Attempts
			case "duplicate_write_risk":
				writes = f.Count
			}
		}
		var nj []string
		for _, n := range r.NotJudged {
			nj = append(nj, fmt.Sprintf("%s %v %s %s", n.Kind, n.Count, n.Unit, n.Log))
		}
		if got := strings.Join(nj, ", "); got != c.notJudged {
			t.Errorf("%s: not judged %q, want %q", c.format, got, c.notJudged)
		}
		if r.Loops.Loops != c.loops || r.Loops.Blind != c.blind || req != c.nonRetryReq || att != c.nonRetryAttempts || writes != c.writes {
			t.Errorf("%s: %v loops, %v blind retries, non_retryable_retry %v requests (%v attempts), %v retried writes; want %v, %v, %v (%v), %v",
				c.format, r.Loops.Loops, r.Loops.Blind, req, att, writes, c.loops, c.blind, c.nonRetryReq, c.nonRetryAttempts, c.writes)
		}
	}
}
