package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/parse"
)

// Errors a user meets on a fresh machine are said in plain words with the next step,
// and take the exit code the table says.
func TestPlainErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join("..", "..", "testdata", "incident-hour", "access.log")
	good := filepath.Join(dir, "good.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", good, log); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// a copy cut short: the header is whole, blocks it names are not there
	cut := filepath.Join(dir, "cut.duckdb")
	if err := os.WriteFile(cut, b[:len(b)/4], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"report", "--db", filepath.Join(dir, "adir")}, exitError, "is a directory: give a file's path, such as " + filepath.Join(dir, "adir", "retrylens.duckdb")},
		{[]string{"ingest", "--db", filepath.Join(dir, "adir"), log}, exitError, "is a directory"},
		{[]string{"ingest", "--db", filepath.Join(dir, "no", "such", "x.duckdb"), log}, exitError, "the directory " + filepath.Join(dir, "no", "such") + " does not exist: create it"},
		{[]string{"verify", "--db", cut}, exitDamaged, "the database file is damaged"},
		{[]string{"report", "--db", cut}, exitDamaged, "the database file is damaged"},
	} {
		_, stderr, code := retrylens(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.say) {
			t.Errorf("%v: exit %d (want %d), stderr:\n%s\nwant %q", tc.args, code, tc.code, stderr, tc.say)
		}
		if strings.Contains(stderr, "database/sql/driver") {
			t.Errorf("%v: the driver's words reach the user:\n%s", tc.args, stderr)
		}
	}
}

// A disk that fills during an ingest (here the file size limit, which DuckDB meets as a
// failed write, as it meets a full disk) is said once in plain words; the same ingest
// run again with room loads every line once.
func TestDiskFull(t *testing.T) {
	testmain.Long(t, "a 60,000-line load in a process of its own under a file size limit")
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	path, lines := genLog(t, dir, "retry", 60_000, 3)
	db := filepath.Join(dir, "full.duckdb")
	// kB the database may grow to: enough for some chunks, not all (tried from the
	// smallest: the point a load fails at depends on DuckDB's block layout)
	failed := false
	for _, kb := range []int{2000, 4000, 8000} {
		os.Remove(db)
		os.Remove(db + ".wal")
		cmd := exec.Command("sh", "-c", fmt.Sprintf(`trap "" XFSZ; ulimit -f %d; exec "$0" "$@"`, kb),
			os.Args[0], "ingest", "--quiet", "--chunk-mib", "1", "--db", db, "--log-format", "retry", path)
		cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		if _, ok := os.Stat(db); ok != nil {
			continue // nothing committed at this size: try a larger one
		}
		failed = true
		stderr := string(out)
		if !strings.Contains(stderr, "the disk holding the database is full") || !strings.Contains(stderr, "run the same command again") {
			t.Errorf("ulimit -f %d: exit %v, stderr:\n%s", kb, err, stderr)
		}
		if strings.Contains(stderr, "report cache was not built") {
			t.Errorf("ulimit -f %d: the full disk is said twice:\n%s", kb, stderr)
		}
		break
	}
	if !failed {
		t.Fatal("no limit made the load fail after a chunk committed")
	}
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db, "--log-format", "retry", path); code != 0 {
		t.Fatalf("ingest again: exit %d: %s", code, stderr)
	}
	assertOnce(t, db, int64(lines))
}

// README's table of exit codes is the one the code uses and the root help prints.
func TestExitCodesDoc(t *testing.T) {
	testmain.DocSection(t, filepath.Join("..", "..", "README.md"), "<!-- exit codes: exitCodesMarkdown -->\n", "<!-- end of exit codes -->\n",
		exitCodesMarkdown(), *update, "go test ./cmd/retrylens -run TestExitCodesDoc -update")
	out, _, _ := retrylens(t, nil, "--help")
	for _, c := range exitCodes {
		if !strings.Contains(out, fmt.Sprintf("  %d  ", c.code)) {
			t.Errorf("--help lists no exit code %d:\n%s", c.code, out)
		}
	}
}

// The small things a first day trips on: --dry-run 0, a line too long to keep (its
// start is the reject's sample), a range after the log.
func TestDayOneNits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := scenario("incident-hour")
	for _, args := range [][]string{{"--dry-run", "0", log}, {"--dry-run=0", log}} {
		_, stderr, code := retrylens(t, nil, append([]string{"ingest", "--db", filepath.Join(dir, "dry.duckdb")}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "--dry-run takes how many lines to show, 1 or more") {
			t.Errorf("ingest %v: exit %d: %s", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dry.duckdb")); err == nil {
		t.Error("--dry-run 0 loaded the file")
	}
	good := `10.0.0.7 - - [29/Nov/2026:14:31:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "curl/8" rt=0.010 urt="0.010" us="200" ra="0" rr="-" rid="r1" ik="-" retry_after="-" msec=1795962660.000`
	long := `10.0.0.8 - - [29/Nov/2026:14:31:01 +0000] "GET /` + strings.Repeat("x", 1<<20) + `"`
	path := filepath.Join(dir, "long.log")
	if err := os.WriteFile(path, []byte(good+"\n"+long+"\n"+good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "long.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db, "--log-format", "retry", "--max-reject-ratio", "1", path); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	out, stderr, code := retrylens(t, nil, "query", "--db", db, "--format", "csv",
		fmt.Sprintf("SELECT line, reason, length(excerpt) AS n, excerpt = '%s' AS head FROM rejects", long[:parse.HeadLength]))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("2,too_long,%d,true", parse.HeadLength)) {
		t.Errorf("the too-long line's sample: exit %d\n%s%s", code, out, stderr)
	}
	// times before now: ten years back covers the samples (248 rows: EXPECTED.md), ending
	// ten years back none
	for _, tc := range []struct {
		flag string
		want string
	}{{"--since=3650d", `"requests": 248,`}, {"--until=-3650d", `"requests": 0,`}} {
		out, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", "retry", tc.flag, scenario("quiet-hour"), log)
		if code != 0 || !strings.Contains(out+stderr, tc.want) {
			t.Errorf("report %s: exit %d, no %q in:\n%.400s%s", tc.flag, code, tc.want, out, stderr)
		}
	}
	out, _, _ = retrylens(t, nil, "report", "--db", db, "--format", "table", "--since", "2030-01-01T00:00:00Z")
	if !strings.Contains(out, "verdict: nothing to judge: no request in the range") || strings.Contains(out, "verdict: no attempt data") {
		t.Errorf("a range after the log:\n%s", out)
	}
}

// The quick start's six hours hold a nine-minute incident: the HTML gives it a timeline
// of its own, in minutes, labelled on round times; a range the incident fills has none.
func TestIncidentCloseup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page := func(name string, logs ...string) string {
		out := filepath.Join(dir, name)
		if _, stderr, code := retrylens(t, nil, append([]string{"report", "--log-format", "retry", "-o", out}, logs...)...); code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	both := page("both.html", scenario("quiet-hour"), scenario("incident-hour"))
	i := strings.Index(both, "The incident, close up (1m buckets)")
	if i < 0 {
		t.Fatal("no close-up of the incident [14:20, 14:29) in six hours")
	}
	closeup := both[i : i+strings.Index(both[i:], "</svg>")]
	// the incident (EXPECTED.md: [14:20, 14:29)) and nine minutes each side, every 5 minutes
	for _, label := range []string{">14:15<", ">14:20<", ">14:25<", ">14:30<", ">14:35<"} {
		if !strings.Contains(closeup, label) {
			t.Errorf("close-up without the label %s", label)
		}
	}
	if strings.Contains(closeup, ">09:00<") {
		t.Error("the close-up reaches the quiet hour")
	}
	if strings.Contains(page("incident.html", scenario("incident-hour")), "close up") {
		t.Error("a close-up of an hour in which the incident takes 9 minutes of 60")
	}
}

// A hedge the log places 50 ms before the attempt it followed (started = end − request
// time: 660.450 − 0.400 against 660.500 − 0.400) was sent with no delay, not −50 ms.
func TestHedgeDelayNotNegative(t *testing.T) {
	t.Parallel()
	line := `10.0.0.7 - - [29/Nov/2026:14:31:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "curl/8" rt=0.400 urt="0.400" us="200" ra="%d" rr="-" rid="h1" ik="-" retry_after="-" msec=%s`
	path := filepath.Join(t.TempDir(), "hedge.log")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(line, 0, "1795962660.500")+"\n"+fmt.Sprintf(line, 1, "1795962660.450")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--format", "json", path)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var r struct {
		Hedging struct {
			Hedges int      `json:"hedges"`
			P10    *float64 `json:"delay_p10_ms"`
		} `json:"hedging"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Hedging.Hedges != 1 || r.Hedging.P10 == nil || *r.Hedging.P10 != 0 {
		t.Errorf("hedging: %d hedges, p10 %v; want 1 hedge sent with no delay", r.Hedging.Hedges, r.Hedging.P10)
	}
}
