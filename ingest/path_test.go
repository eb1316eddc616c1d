package ingest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --db names a DuckDB file: anything else is refused before DuckDB reads it, which would
// otherwise try to fetch an extension from the network to read it.
func TestOpenRefusesOtherDatabases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{write("app.sqlite", "SQLite format 3\x00\x10\x00\x01\x01\x00@  "), "is a SQLite database, not a DuckDB database"},
		{write("notes.txt", "retries, retries everywhere\n"), "is not a DuckDB database"},
		{"clickhouse:/x", "want a DuckDB file's path, or clickhouse://"},
		{"s3://bucket/retrylens.duckdb", "want a DuckDB file's path"},
		{"https://example.com/x.duckdb", "want a DuckDB file's path"},
	} {
		for name, open := range map[string]func(context.Context, string) (any, error){
			"Open":         func(ctx context.Context, p string) (any, error) { return Open(ctx, p) },
			"OpenReadOnly": func(ctx context.Context, p string) (any, error) { return OpenReadOnly(ctx, p) },
		} {
			if _, err := open(context.Background(), tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s(%q): %v; want an error with %q", name, tc.path, err, tc.want)
			}
		}
	}
	// A DuckDB file opens, both ways, and so does a new path.
	p := filepath.Join(dir, "retrylens.duckdb")
	db, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = OpenReadOnly(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	db.Close()
}
