package duckerr

import (
	"database/sql"
	"errors"
	"testing"
)

func TestMissing(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"SELECT a FROM t", false},
		{"SELECT a FROM nosuch", true},                    // catalog error
		{"SELECT b FROM t", true},                         // binder error
		{"SELECT name FROM pragma_table_info('x')", true}, // catalog error
		{"SELEC a FROM t", false},                         // parser error
		{"SELECT 1 / 'x'::INTEGER", false},                // conversion error
	} {
		_, err := db.Exec(tc.q)
		if got := Missing(err); got != tc.want {
			t.Errorf("%s: Missing(%v) = %v, want %v", tc.q, err, got, tc.want)
		}
	}
	if Missing(nil) || Missing(errors.New("Catalog Error: not DuckDB's")) {
		t.Error("Missing of an error DuckDB did not return")
	}
}
