package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file loaded again and again as it grows (retrylens watch) is read from where its
// last load ended, and every line is loaded once whatever happens to the file between
// loads: it grows, it is truncated and written again past its old end, the same content
// is loaded under another name meanwhile.
func TestPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, filepath.Join(dir, "p.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lines := func(from, n int, uri string) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "GET %s/%d HTTP/1.1" 200 2 "-" "c/1" rt=0.01 urt="0.01" us="200" ra="0" rr="-" rid="r%d" ik="-" retry_after="-" msec=-`+"\n", i%60, uri, i, i)
		}
		return b.String()
	}
	log := filepath.Join(dir, "access.log")
	appendTo := func(path, s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	pos := NewPositions()
	rows := func() (n int64) {
		db.QueryRow("SELECT count(*) FROM requests").Scan(&n)
		return n
	}
	load := func(path string, p *Positions) {
		t.Helper()
		if _, err := Load(ctx, db, []string{path}, Options{Positions: p}); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(log, lines(0, 100, "/a"))
	load(log, pos)
	appendTo(log, lines(100, 50, "/a"))
	load(log, pos)
	load(log, pos) // nothing new
	if n := rows(); n != 150 || pos.resumed != 2 {
		t.Fatalf("grown: %d rows, %d loads resumed; want 150, 2", n, pos.resumed)
	}
	// Truncated and written again past the old end, while nobody looked: new content, read whole.
	os.Truncate(log, 0)
	appendTo(log, lines(0, 200, "/b"))
	load(log, pos)
	if n := rows(); n != 350 || pos.resumed != 2 {
		t.Fatalf("rewritten: %d rows, %d loads resumed; want 350, 2", n, pos.resumed)
	}
	// The same content loaded further under another name (a copy, by hand): the next load
	// of the file must not resume where this process left it.
	appendTo(log, lines(200, 20, "/b"))
	copyPath := filepath.Join(dir, "copy.log")
	b, _ := os.ReadFile(log)
	os.WriteFile(copyPath, b, 0o644)
	load(copyPath, nil)
	appendTo(log, lines(220, 30, "/b"))
	load(log, pos)
	if n := rows(); n != 400 || pos.resumed != 2 {
		t.Fatalf("loaded on elsewhere: %d rows, %d loads resumed; want 400, 2", n, pos.resumed)
	}
	appendTo(log, lines(250, 10, "/b"))
	load(log, pos)
	if n := rows(); n != 410 || pos.resumed != 3 {
		t.Fatalf("grown again: %d rows, %d loads resumed; want 410, 3", n, pos.resumed)
	}
	if d, err := Check(ctx, db, false); err != nil || !d.OK() {
		t.Errorf("the registry and the rows disagree: %v %v", d, err)
	}
}
