package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

// Small conventions a first-day user hits: --version, "--dry-run 3" with a space, NO_COLOR
// named in --help, and counts of one in the singular.
func TestDayOneConventions(t *testing.T) {
	t.Parallel()
	if out, _, code := retrylens(t, nil, "--version"); code != 0 || !strings.HasPrefix(out, "retrylens ") || !strings.Contains(out, "duckdb-go v") {
		t.Errorf("--version: exit %d: %q", code, out)
	}
	for _, args := range [][]string{{"--dry-run", "3"}, {"--dry-run=3"}} {
		out, stderr, code := retrylens(t, nil, append(append([]string{"ingest"}, args...), scenario("incident-hour"))...)
		if n := strings.Count(out, "\nline "); code != 0 || n != 3 {
			t.Errorf("ingest %v: exit %d, %d lines shown, want 3\n%s", args, code, n, stderr)
		}
	}
	if out, _, _ := retrylens(t, nil, "--help"); !strings.Contains(out, "NO_COLOR") {
		t.Error("--help does not name NO_COLOR")
	}
	// The quiet hour has one retry (EXPECTED.md): one gap before attempt 1.
	out, _, _ := retrylens(t, nil, "report", "--format", "table", scenario("quiet-hour"))
	if !strings.Contains(out, "backoff before attempt 1: 1 gap,") {
		t.Errorf("one gap not in the singular:\n%s", out)
	}
}

// An ingest stopped by SIGINT names the file and how many of its lines committed, and
// says a re-run resumes; a temporary file a killed DuckDB left beside the database is
// removed by the next ingest.
func TestInterruptedIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 400,000 lines")
	}
	t.Parallel()
	dir := t.TempDir()
	path, lines := genLog(t, dir, "retry", 400_000, 13)
	db := filepath.Join(dir, "i.duckdb")
	os.MkdirAll(db+".tmp", 0o755)
	os.WriteFile(filepath.Join(db+".tmp", "duckdb_temp_storage_S32K-0.tmp"), []byte("left by a SIGKILL"), 0o644)
	const chunk = 64 << 20
	cmd := exec.Command(os.Args[0], "ingest", "--db", db, "--log-format", "retry", "--chunk-mib", "64", path)
	cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1", "RETRYLENS_TEST_STEP=committed:1")
	var stderr bytes.Buffer
	pipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "retrylens-test: committed 1") {
			if _, err := os.Stat(filepath.Join(db+".tmp", "duckdb_temp_storage_S32K-0.tmp")); err == nil {
				t.Error("the stale temporary file is still there while ingest runs")
			}
			cmd.Process.Signal(os.Interrupt)
		}
	}
	err := cmd.Wait()
	// The first chunk ends at the first newline from its 64 MiB on: its lines, counted in
	// the file, are what committed (every generated line is a row).
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	cut := chunk - 1 + bytes.IndexByte(data[chunk-1:], '\n') + 1
	first := int64(bytes.Count(data[:cut], []byte("\n")))
	committed := countRows(t, db)
	want := fmt.Sprintf("interrupted while loading %s, after %d of its lines were committed", path, first)
	if err == nil || committed != first || first >= int64(lines) || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "resumes") {
		t.Errorf("exit %v, %d rows, first chunk %d of %d lines; want %q in:\n%s", err, committed, first, lines, want, stderr.String())
	}
	if loaded := fmt.Sprintf("loaded %d lines", first); !strings.Contains(stderr.String(), loaded) || strings.Contains(stderr.String(), " (0 lines/s)") {
		t.Errorf("want %q and the time it took in:\n%s", loaded, stderr.String())
	}
}

// budget reads --window as report does (1d too), right-aligns numbers in its table, writes plain numbers into TSV, and refuses a negative budget. The
// two samples hold 200 first attempts and 43 retries (EXPECTED.md): amplification
// 243/200 = 1.215.
func TestBudgetLikeReport(t *testing.T) {
	t.Parallel()
	db := ingested(t, "quiet-hour", "incident-hour")
	out, stderr, code := retrylens(t, nil, "budget", "--db", db, "--window", "1d")
	if code != 0 || !strings.Contains(out, "finagle\t200\t43\t43\t0\t1.215\t1.215\t") || !strings.Contains(out, "finagle\t2026-11-29T00:00:00Z\t200\t43\t43\t0\n") {
		t.Errorf("--window 1d in TSV: exit %d\n%s%s", code, out, stderr)
	}
	out, _, _ = retrylens(t, nil, "budget", "--db", db, "--format", "table")
	if !strings.Contains(out, "│ finagle │            200 │      43 │      43 │      0 │         1.22x │") {
		t.Errorf("table: numbers not right-aligned:\n%s", out)
	}
	// An empty range is nothing to replay, as check has nothing to judge.
	out, stderr, code = retrylens(t, nil, "budget", "--db", db, "--format", "table", "--since", "2026-11-30")
	if code != exitNoData || out != "" || !strings.Contains(stderr, "nothing to replay") {
		t.Errorf("an empty range: exit %d, want %d and nothing to replay:\n%s%s", code, exitNoData, out, stderr)
	}
	for _, bad := range [][]string{{"--ratio", "-1"}, {"--ratio", "NaN"}, {"--min-per-sec", "+Inf"}, {"--envoy-percent", "2"}, {"--window", "0s"}} {
		if _, _, code := retrylens(t, nil, append([]string{"budget", "--db", db}, bad...)...); code != exitUsage {
			t.Errorf("budget %v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}

// In a pipe, the default TSV carries the endpoints and the --by breakdown too.
func TestTSVCarriesEverything(t *testing.T) {
	t.Parallel()
	db := ingested(t, "incident-hour")
	plain, _, _ := retrylens(t, nil, "report", "--db", db)
	by, _, _ := retrylens(t, nil, "report", "--by", "status", "--db", db)
	if !strings.Contains(plain, "\nendpoint\trequests\t") || !strings.Contains(plain, "\nGET /api/orders/:id\t122\t") {
		t.Errorf("no endpoints table in the TSV:\n%s", plain)
	}
	if by == plain || !strings.Contains(by, "\nstatus\trequests\t") || !strings.Contains(by, "\n502\t") {
		t.Errorf("--by status adds nothing to the TSV:\n%s", by)
	}
}

// One 100 KB URI: table, Markdown and HTML cut it with an ellipsis; JSON and CSV keep it.
func TestLongValuesCut(t *testing.T) {
	testmain.Long(t, "a 100 KB URI in five formats")
	t.Parallel()
	long := "/" + strings.Repeat("a", 100_000)
	var b strings.Builder
	for attempt, status := range []int{502, 200} {
		fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "GET %s HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="r1" ik="-" retry_after="-" msec=%d.000`+"\n",
			attempt, long, status, status, attempt, 1795960800+attempt)
	}
	log := filepath.Join(t.TempDir(), "long.log")
	os.WriteFile(log, []byte(b.String()), 0o644)
	for _, f := range []string{"table", "markdown", "html"} {
		out, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--by", "route", "--format", f, log)
		longest := 0
		for _, l := range strings.Split(out, "\n") {
			longest = max(longest, len(l))
		}
		if code != 0 || longest > 2000 || !strings.Contains(out, "aaa…") {
			t.Errorf("%s: exit %d, longest line %d bytes, want the URI cut with an ellipsis\n%s", f, code, longest, stderr)
		}
	}
	for _, args := range [][]string{{"--format", "json"}, {"--format", "csv", "--section", "endpoints"}} {
		out, _, _ := retrylens(t, nil, append([]string{"report", "--log-format", "retry", log}, args...)...)
		if !strings.Contains(out, long) {
			t.Errorf("%v: the URI is not whole", args)
		}
	}
}

// The table fits the terminal's width ($COLUMNS here), leaving out columns in the
// documented order and saying which; --wide keeps them all.
func TestTableFitsWidth(t *testing.T) {
	testmain.Long(t, "three reports through a shell, each in a process of its own")
	t.Parallel()
	log, _ := filepath.Abs(scenario("incident-hour"))
	widestTableLine := func(out string) int {
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "│") || strings.HasPrefix(l, "┌") {
				n = max(n, len([]rune(l)))
			}
		}
		return n
	}
	code, out := asRetrylens(t, ".", `COLUMNS=100 "$RL" report --format table --log-format retry `+log)
	if code != 0 || widestTableLine(out) > 100 || !strings.Contains(out, "(left out to fit 100 columns: untagged, abandoned, 429 (first+retry)") {
		t.Errorf("COLUMNS=100: exit %d, widest table line %d:\n%s", code, widestTableLine(out), out)
	}
	code, out = asRetrylens(t, ".", `COLUMNS=100 "$RL" report --format table --wide --log-format retry `+log)
	if code != 0 || widestTableLine(out) <= 100 || strings.Contains(out, "left out to fit") || !strings.Contains(out, "│ untagged │") {
		t.Errorf("--wide: exit %d, widest table line %d:\n%s", code, widestTableLine(out), out)
	}
	if code, _ := asRetrylens(t, ".", `"$RL" report --format json --wide --log-format retry `+log); code != exitUsage {
		t.Errorf("--wide --format json: exit %d, want %d", code, exitUsage)
	}
}

// One model of thresholds: a --rules file that silences every alert makes check pass and
// the report's verdicts follow it (the incident hour's 18 recovered requests then read
// rescuing), where the built-in rules say fuelling.
func TestRulesDriveVerdicts(t *testing.T) {
	t.Parallel()
	db := ingested(t, "incident-hour")
	rules := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(rules, []byte(`[{"rule": "retry_storm", "threshold": 100}, {"rule": "retry_rate_high", "threshold": 100},
		{"rule": "retries_not_helping", "threshold": 0}]`), 0o644)
	if _, stderr, code := retrylens(t, nil, "check", "--fail-on", "P2", "--rules", rules, "--db", db); code != 0 {
		t.Errorf("check with every alert silenced: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `"verdict": "fuelling"`},
		{[]string{"--rules", rules}, `"verdict": "rescuing"`},
	} {
		out, _, _ := retrylens(t, nil, append([]string{"report", "--format", "json", "--window", "10m", "--db", db}, tc.args...)...)
		if strings.Contains(out, `"fuelling"`) != (tc.want == `"verdict": "fuelling"`) || !strings.Contains(out, tc.want) {
			t.Errorf("report %v: want %s everywhere it applies:\n%.600s", tc.args, tc.want, out)
		}
	}
}

// -o writes what stdout would get into a file, its extension picking the format, for every
// command that writes a report of some kind; a format the command does not write is a
// usage error.
func TestOutputFlag(t *testing.T) {
	t.Parallel()
	dir, db := t.TempDir(), ingested(t, "quiet-hour")
	for _, tc := range []struct {
		args []string
		want string // in the file, which must be JSON
	}{
		{[]string{"report"}, `"requests": 123`},
		{[]string{"check"}, `"alerts"`},
		{[]string{"budget"}, `"model": "finagle"`},
		{[]string{"query", "SELECT count(*) AS n FROM requests"}, `"n": 123`},
	} {
		out := filepath.Join(dir, tc.args[0]+".json")
		stdout, stderr, code := retrylens(t, nil, append(tc.args, "--db", db, "-o", out)...)
		b, err := os.ReadFile(out)
		if code != 0 || stdout != "" || err != nil || !json.Valid(b) || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s -o %s: exit %d, stdout %q, %v: %s\n%.300s", tc.args[0], out, code, stdout, err, stderr, b)
		}
	}
	if _, _, code := retrylens(t, nil, "budget", "--db", db, "-o", filepath.Join(dir, "b.html")); code != exitUsage {
		t.Errorf("budget -o b.html: exit %d, want %d", code, exitUsage)
	}
}

// A report on a database says how many lines ingest rejected: they are in no figure. The
// incident sample has one malformed line of 126 (EXPECTED.md). Every artefact says it,
// not only stderr: a page or a file read later has no terminal beside it.
func TestReportMentionsRejects(t *testing.T) {
	t.Parallel()
	db := ingested(t, "incident-hour")
	const want = "ingest rejected 1 of the 126 lines loaded (0.8%): they are in no figure"
	if _, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json"); code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("report: exit %d, want %q in:\n%s", code, want, stderr)
	}
	for _, c := range []struct{ format, want string }{
		{"json", `"lines": 126,
    "rejected": 1,`},
		{"table", want}, {"tsv", "# note: " + want}, {"markdown", "- note: " + want}, {"html", "<li>note: " + want},
	} {
		stdout, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", c.format)
		if code != 0 || !strings.Contains(stdout, c.want) {
			t.Errorf("report --format %s: exit %d, want %q in the report: %s\n%s", c.format, code, c.want, stderr, stdout)
		}
	}
	if stdout, _, code := retrylens(t, nil, "report", "--db", db, "--format", "csv", "--section", "input"); code != 0 ||
		stdout != "lines,rejected,rejected_kept,repeated_rows,registry_mismatch\n126,1,1,0,\n" {
		t.Errorf("report --section input: exit %d:\n%s", code, stdout)
	}
}
