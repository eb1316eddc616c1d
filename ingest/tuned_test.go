package ingest

import (
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DuckDB gets one thread for a database under a row group and its default above; a load
// decides from the inputs' sizes before it starts, and from the rows after it.
func TestFitThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "t.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var def string
	if err := db.QueryRow("SELECT current_setting('threads')").Scan(&def); err != nil {
		t.Fatal(err)
	}
	threads := func() string {
		t.Helper()
		var n string
		if err := db.QueryRow("SELECT current_setting('threads')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		more int64
		want string
	}{
		{0, "1"}, {rowGroupRows - 1, "1"}, {rowGroupRows, def}, {-1, def}, {10, "1"},
	} {
		if err := fitThreads(ctx, db, c.more); err != nil {
			t.Fatal(err)
		}
		if got := threads(); got != c.want {
			t.Errorf("empty database, %d rows to come: %s threads, want %s", c.more, got, c.want)
		}
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	small := write("small.log", strings.Repeat("x", 640)) // at most 10 lines of 64 bytes, and the last
	var gz strings.Builder
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("line\n"))
	zw.Close()
	for _, c := range []struct {
		paths []string
		want  int64
	}{
		{[]string{small}, 11},
		{[]string{small, small}, 22},
		{[]string{small, "-"}, -1},                        // stdin
		{[]string{write("named.log", gz.String())}, -1},   // gzip, by its content
		{[]string{filepath.Join(dir, "missing.log")}, -1}, // the load says why
		{[]string{dir}, -1},                               // not a regular file
	} {
		if got := inputRows(c.paths); got != c.want {
			t.Errorf("inputRows(%v) = %d, want %d", c.paths, got, c.want)
		}
	}
	// A FIFO is not opened: that would wait for a writer, and a read would take the load's bytes.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 1)
	go func() { got <- inputRows([]string{fifo}) }()
	select {
	case n := <-got:
		if n != -1 {
			t.Errorf("inputRows(FIFO) = %d, want -1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("inputRows opened a FIFO and waits for its writer")
	}
}
