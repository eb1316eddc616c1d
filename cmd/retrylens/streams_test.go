package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrylens/retrylens/internal/testmain"
)

// incidentLines is `wc -l testdata/incident-hour/access.log`; line 60 is cut short (see
// its EXPECTED.md), so 125 of them are rows.
const incidentLines, incidentRows = 126, 125

// asRetrylens runs a shell command line in which "$RL" is retrylens (this test binary
// standing in for it), and returns its exit code and output.
func asRetrylens(t *testing.T, dir, script string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1", "RL="+os.Args[0])
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running after 60 s (hung):\n%s", script, out.String())
		return 0, ""
	}
}

// Process substitution, /dev/stdin, stdin and a FIFO are each read once, in full, and
// registered by content like a file: check fails on the incident as it does on the file,
// and a stream whose content was loaded before is skipped.
func TestStreams(t *testing.T) {
	testmain.Long(t, "pipes, FIFOs and process substitution through a shell")
	t.Parallel()
	log, err := filepath.Abs(scenario("incident-hour"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// What a killed ingest's spool would leave: the next ingest into a.duckdb removes it.
	os.WriteFile(filepath.Join(dir, "a.duckdb.stream-123"), []byte("half a stream"), 0o644)
	for _, tc := range []struct {
		name, script string
		code         int
		want         string
	}{
		{"check on a file", `"$RL" check --fail-on P1 ` + log, exitAlert, "1 alert at or above P1"},
		{"check <(…)", `"$RL" check --fail-on P1 <(cat ` + log + `)`, exitAlert, "1 alert at or above P1"},
		{"check <(zcat …)", `gzip -c ` + log + ` > l.gz && "$RL" check --fail-on P1 <(zcat l.gz)`, exitAlert, "1 alert at or above P1"},
		{"check on stdin", `cat ` + log + ` | "$RL" check --fail-on P1 -`, exitAlert, "1 alert at or above P1"},
		{"report /dev/stdin", `cat ` + log + ` | "$RL" report --format json /dev/stdin`, 0, `"requests": 125`},
		{"ingest <(…)", `"$RL" ingest --db a.duckdb <(cat ` + log + `)`, 0, fmt.Sprintf("%d lines, %d rows, 1 rejected", incidentLines, incidentRows)},
		{"ingest <(…) again", `"$RL" ingest --db a.duckdb <(cat ` + log + `)`, 0, "/dev/fd/63: skipped, already loaded"},
		{"ingest the file after", `"$RL" ingest --db a.duckdb ` + log, 0, "skipped, already loaded as /dev/fd/"},
		{"ingest /dev/stdin", `cat ` + log + ` | "$RL" ingest --db b.duckdb /dev/stdin`, 0, fmt.Sprintf("%d lines, %d rows, 1 rejected", incidentLines, incidentRows)},
		// A stream's last line counts without its newline: the stream has ended.
		{"stdin without the last newline", `head -c -1 ` + log + ` | "$RL" ingest --db c.duckdb -`, 0, fmt.Sprintf("%d lines, %d rows, 1 rejected", incidentLines, incidentRows)},
	} {
		code, out := asRetrylens(t, dir, tc.script)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q in:\n%s", tc.name, code, tc.code, tc.want, out)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.stream-*")); len(left) > 0 {
		t.Errorf("spool files left behind: %v", left)
	}
}

// A FIFO is read once: ingest neither hangs after its writer closes nor loads nothing.
func TestFIFO(t *testing.T) {
	testmain.Long(t, "two loads from FIFOs, each in a process of its own")
	t.Parallel()
	src, err := os.ReadFile(scenario("incident-hour"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "f.duckdb")
	for i, want := range []string{fmt.Sprintf("%d lines, %d rows, 1 rejected", incidentLines, incidentRows), "skipped, already loaded as"} {
		fifo := filepath.Join(dir, fmt.Sprintf("fifo%d", i))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.Write(src)
			w.Close()
		}()
		code, out := asRetrylens(t, dir, `"$RL" ingest --db `+db+` `+fifo)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("FIFO %d: exit %d, want 0 and %q in:\n%s", i, code, want, out)
		}
	}
}

// A gzip file cut short loads its readable lines, then says where it broke and exits 1.
// The line count comes from Go's gzip reader, read until it fails.
func TestTruncatedGzip(t *testing.T) {
	testmain.Long(t, "a cut gzip file loaded")
	t.Parallel()
	var plain bytes.Buffer
	for i := range 400 { // 400 copies of the quiet hour: a stream long enough to cut
		src, err := os.ReadFile(scenario("quiet-hour"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			plain.Grow(len(src) * 400)
		}
		plain.Write(src)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	cut := gz.Bytes()[:gz.Len()/2]
	zr, _ := gzip.NewReader(bytes.NewReader(cut))
	readable, err := io.ReadAll(zr)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the cut file: %v", err)
	}
	whole := int64(bytes.Count(readable, []byte("\n")))
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log.2.gz")
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "t.duckdb")
	_, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--log-format", "retry", path)
	want := fmt.Sprintf("truncated after line %d", whole)
	if code != exitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, fmt.Sprintf("%d lines, %d rows", whole, whole)) {
		t.Errorf("exit %d, want %d, %q and %d rows in:\n%s", code, exitError, want, whole, stderr)
	}
	if rows := countRows(t, db); rows != whole {
		t.Errorf("%d rows, want %d", rows, whole)
	}
}

// countRows is how many rows the database file holds.
func countRows(t *testing.T, db string) int64 {
	t.Helper()
	var rows int64
	conn := openDB(t, db)
	defer conn.Close()
	if err := conn.QueryRow("SELECT count(*) FROM requests").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// An ingest that loads nothing leaves no database behind for check to find healthy.
func TestNothingLoadedNoDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "none.duckdb")
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, nil, 0o644)
	for _, args := range [][]string{{filepath.Join(dir, "missing.log")}, {empty}} {
		_, stderr, _ := retrylens(t, nil, append([]string{"ingest", "--db", db}, args...)...)
		if !strings.Contains(stderr, "nothing loaded, so no database was created") {
			t.Errorf("ingest %v: %s", args, stderr)
		}
		if left, _ := filepath.Glob(db + "*"); len(left) > 0 {
			t.Errorf("ingest %v left %v", args, left)
		}
	}
	if _, stderr, code := retrylens(t, nil, "check", "--db", db); code != exitError || !strings.Contains(stderr, "no database at") {
		t.Errorf("check: exit %d: %s", code, stderr)
	}
}

// A database file with a damaged block: verify and ingest say so, and what to do, and
// exit 5.
func TestDamagedDatabase(t *testing.T) {
	testmain.Long(t, "a damaged file verified and loaded")
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "d.duckdb")
	var big bytes.Buffer // enough rows for blocks of their own past the file's first ones
	src, _ := os.ReadFile(scenario("quiet-hour"))
	for range 400 {
		big.Write(src)
	}
	if _, stderr, code := retrylens(t, bytes.NewReader(big.Bytes()), "ingest", "--quiet", "--db", db, "-"); code != 0 {
		t.Fatalf("ingest: %s", stderr)
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	junk := bytes.Repeat([]byte{0xff}, int(st.Size()/2))
	f.WriteAt(junk, st.Size()/4) // the middle half of the file
	f.Close()
	const want = "the database file is damaged"
	if out, stderr, code := retrylens(t, nil, "verify", "--db", db); code != exitDamaged || !strings.Contains(stderr, want) {
		t.Errorf("verify: exit %d, want %d and %q:\n%s%s", code, exitDamaged, want, out, stderr)
	}
	// every command exits 5 on it (the exit codes' table)
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, scenario("incident-hour")); code != exitDamaged || !strings.Contains(stderr, want) {
		t.Errorf("ingest: exit %d, want %d and %q:\n%s", code, exitDamaged, want, stderr)
	}
}

// The same nginx traffic logged twice, as text and as JSON (parse/testdata: one real
// nginx's two access_logs of the same 5 requests): ingest and report warn, and with
// --dedupe ingest leaves the repeats out, so that the report is the one of either log alone.
func TestSameTrafficTwice(t *testing.T) {
	testmain.Long(t, "seven loads of the same traffic")
	t.Parallel()
	dir := t.TempDir()
	text, json := "../../parse/testdata/nginx-retry.log", "../../parse/testdata/nginx-retry.jsonl"
	_, stderr, code := retrylens(t, nil, "ingest", "--db", filepath.Join(dir, "twice.duckdb"), text, json)
	if want := "warning: " + json + ": 5 of its 5 rows repeat rows already loaded"; code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("without --dedupe: exit %d, want %q in:\n%s", code, want, stderr)
	}
	once := filepath.Join(dir, "once.duckdb")
	_, stderr, code = retrylens(t, nil, "ingest", "--dedupe", "--db", once, text, json)
	if want := json + ": 5 lines left out, repeating rows already loaded (--dedupe)"; code != 0 || !strings.Contains(stderr, want) || strings.Contains(stderr, "warning") {
		t.Errorf("--dedupe: exit %d, want %q in:\n%s", code, want, stderr)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--db", once); code != 0 {
		t.Errorf("verify: exit %d\n%s%s", code, out, stderr)
	}
	alone := filepath.Join(dir, "alone.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", alone, text); code != 0 {
		t.Fatal(stderr)
	}
	a, stderr, _ := retrylens(t, nil, "report", "--db", once, "--format", "json")
	b, _, _ := retrylens(t, nil, "report", "--db", alone, "--format", "json")
	// but for what each database holds: ten lines read, the repeats left out, and five
	const input = `"input": {
    "lines": %d,
    "rejected": 0,
    "rejected_kept": 0,
    "repeated_rows": 0,`
	inOnce, inAlone := fmt.Sprintf(input, 10), fmt.Sprintf(input, 5)
	if strings.Replace(a, inOnce, inAlone, 1) != b || !strings.Contains(a, inOnce) || !strings.Contains(a, `"requests": 5`) || strings.Contains(stderr, "repeat") {
		t.Errorf("report after --dedupe differs from the text log's alone:\n%s\n%s%s", a, b, stderr)
	}
	// The report that counts the traffic twice says so, as ingest did.
	if _, stderr, _ := retrylens(t, nil, "report", "--db", filepath.Join(dir, "twice.duckdb")); !strings.Contains(stderr, "warning: 5 rows repeat rows of another load") {
		t.Errorf("report on the traffic loaded twice does not warn:\n%s", stderr)
	}
}

// The same: 70,000 generated requests written once as the retry preset and once as
// nginx-json, large enough that a chunk is first sampled.
func TestSameTrafficTwiceLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 140,000 lines")
	}
	t.Parallel()
	dir := t.TempDir()
	var paths []string
	var lines int
	for _, preset := range []string{"retry", "nginx-json"} {
		var p string
		p, lines = genLog(t, dir, preset, 70_000, 3)
		paths = append(paths, p)
	}
	db := filepath.Join(dir, "d.duckdb")
	_, stderr, code := retrylens(t, nil, append([]string{"ingest", "--dedupe", "--db", db}, paths...)...)
	if want := fmt.Sprintf("%d lines left out, repeating rows already loaded", lines); code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, want %q in:\n%s", code, want, stderr)
	}
	if rows := countRows(t, db); rows != int64(lines) {
		t.Errorf("%d rows, want %d", rows, lines)
	}
}

// report, check, budget and query only read: they open the database read-only, so they
// work while another process holds a shared lock on it (as readers of a shared postmortem
// database do; a read-write open would fail on it), and query changes nothing unless
// --write.
func TestReadOnlyCommands(t *testing.T) {
	testmain.Long(t, "eight commands, each in a process of its own, beside a real file lock")
	t.Parallel()
	db := ingested(t, "incident-hour")
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lock := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lock); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		code int
		want string
	}{
		{"report --format json", 0, `"requests": 125`},
		{"check --fail-on P1", exitAlert, "1 alert at or above P1"},
		{"budget", 0, "finagle"},
		{"query 'SELECT count(*) AS n FROM requests'", 0, "125"},
		{"query 'DELETE FROM files'", exitError, "a DELETE would change the database, which query opens read-only: add --write to allow it"},
		{"query 'DROP TABLE files'", exitError, "a DROP would change the database, which query opens read-only: add --write to allow it"},
		{"ingest --wait 0 " + scenario("quiet-hour"), exitError, "database is in use by another process"}, // the lock is real
	} {
		name, rest, _ := strings.Cut(tc.args, " ")
		code, out := asRetrylens(t, ".", `"$RL" `+name+" --db "+db+" "+rest)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q in:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	lock.Type = syscall.F_UNLCK
	syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lock)
	if code, out := asRetrylens(t, ".", `"$RL" query --write --db `+db+` 'DELETE FROM rejects'`); code != 0 {
		t.Errorf("query --write: exit %d\n%s", code, out)
	}
}

// The same as a user who can only read the file: as root, the commands run as nobody on
// a read-only copy in a read-only folder (skipped when not root: then chmod is enough
// and the test above stands).
func TestReadOnlyAsAnotherUser(t *testing.T) {
	testmain.Long(t, "every command as another user")
	if os.Getuid() != 0 {
		t.Skip("needs root to run a command as nobody")
	}
	t.Parallel()
	src := ingested(t, "incident-hour")
	dir, err := os.MkdirTemp("", "retrylens-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { os.Chmod(dir, 0o755); os.RemoveAll(dir) }()
	bin, db := filepath.Join(dir, "retrylens.test"), filepath.Join(dir, "shared.duckdb")
	for from, to := range map[string]string{os.Args[0]: bin, src: db} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(db, 0o444)
	os.Chmod(dir, 0o555)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", "--format", "json"}, 0, `"requests": 125`},
		{[]string{"check", "--fail-on", "P1"}, exitAlert, "1 alert at or above P1"},
		{[]string{"budget"}, 0, "finagle"},
		{[]string{"query", "SELECT count(*) AS n FROM requests"}, 0, "125"},
	} {
		cmd := exec.Command(bin, append(tc.args, "--db", db)...)
		cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1", "HOME=/nonexistent")
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v as nobody: exit %d, want %d and %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
}
