package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
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
