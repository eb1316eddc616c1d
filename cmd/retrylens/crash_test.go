package main

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
)

// TestMain lets the test binary stand in for retrylens itself, so that the crash test can
// kill a real ingest process.
func TestMain(m *testing.M) {
	if os.Getenv("RETRYLENS_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestCrashDuringIngest kills ingest with SIGKILL at random points while it loads a
// large file, then lets it finish: every line must be in the database exactly once.
func TestCrashDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 300,000 lines several times")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, _ := parse.Preset("retry")
	truth, err := lab.Generate(f, pf, 300_000, 3)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	n := int64(truth.Lines)
	db := filepath.Join(dir, "crash.duckdb")
	ingest := func() *exec.Cmd {
		// 4 MiB chunks: about 20 for the file, so kills land before, between and in them.
		cmd := exec.Command(os.Args[0], "ingest", "--quiet", "--db", db, "--log-format", "retry", "--chunk-mib", "4", path)
		cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1")
		return cmd
	}
	rng := rand.New(rand.NewPCG(1, 2))
	killed := 0
	for i := range 4 {
		cmd := ingest()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(200+rng.IntN(1800)) * time.Millisecond
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
			t.Logf("run %d finished before its kill at %v", i, delay)
		case <-time.After(delay):
			cmd.Process.Kill()
			<-done
			killed++
			t.Logf("run %d killed after %v", i, delay)
		}
	}
	if out, err := ingest().CombinedOutput(); err != nil {
		t.Fatalf("final ingest: %v: %s", err, out)
	}
	if killed == 0 {
		t.Log("no run was killed mid-load (the machine was fast): the check below still holds")
	}
	conn := openDB(t, db)
	var rows, distinct, sum, chunks, chunkLines int64
	err = conn.QueryRow("SELECT count(*), count(DISTINCT line), sum(line), (SELECT count(*) FROM files), (SELECT sum(lines) FROM files) FROM requests").
		Scan(&rows, &distinct, &sum, &chunks, &chunkLines)
	if err != nil {
		t.Fatal(err)
	}
	// Every line number 1..n exactly once: n rows, n distinct, and their sum n(n+1)/2;
	// the registry's chunks cover the n lines once.
	if rows != n || distinct != n || sum != n*(n+1)/2 || chunkLines != n {
		t.Errorf("after %d kills: %d rows, %d distinct lines, line sum %d, %d lines in %d chunks; want %d, %d, %d, %d",
			killed, rows, distinct, sum, chunkLines, chunks, n, n, n*(n+1)/2, n)
	}
	t.Logf("%d kills; the file went in as %d chunks", killed, chunks)
}

// A report while an ingest holds the database gets one clear line naming the holder.
func TestDatabaseBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 300,000 lines")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	f, _ := os.Create(path)
	pf, _ := parse.Preset("retry")
	if _, err := lab.Generate(f, pf, 300_000, 4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db := filepath.Join(dir, "busy.duckdb")
	cmd := exec.Command(os.Args[0], "ingest", "--quiet", "--db", db, path)
	cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := "database is in use by another process (held by process " + strconv.Itoa(cmd.Process.Pid) + ";"
	for range 50 { // until the ingest has the file open, at most 5 s
		if _, err := os.Stat(db); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, stderr, code := retrylens(t, nil, "report", "--db", db)
	if code != exitError || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("report during ingest: exit %d, want %d and one line containing %q:\n%s", code, exitError, want, stderr)
	}
}
