package query

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// sliceRows reads every row of a table once, across slices and across the gaps that
// deleted rows leave in rowids (a Set's count tables after addCounted), and a table
// without rows as none.
func TestSliceRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := 3*rowSlice + 17
	for _, st := range []struct {
		q    string
		args []any
	}{
		{"CREATE TEMP TABLE t AS SELECT range AS i FROM range(?)", []any{n}},
		// the first slice's rows all gone, and a gap wider than a slice
		{"DELETE FROM t WHERE i < ? OR i BETWEEN ? AND ?", []any{rowSlice + 5, rowSlice + 100, 2*rowSlice + 300}},
		{"CREATE TEMP TABLE empty (i BIGINT)", nil},
	} {
		if _, err := conn.ExecContext(ctx, st.q, st.args...); err != nil {
			t.Fatal(err)
		}
	}
	want := 0
	for i := 0; i < n; i++ {
		if !(i < rowSlice+5 || i >= rowSlice+100 && i <= 2*rowSlice+300) {
			want += i
		}
	}
	for table, wantSum := range map[string]int{"t": want, "empty": 0} {
		r := &sliceRows{ctx: ctx, conn: conn, table: table}
		if _, err := r.ColumnTypes(); err != nil {
			t.Fatal(err)
		}
		got, rows := 0, 0
		for r.Next() {
			var i int
			if err := r.Scan(&i); err != nil {
				t.Fatal(err)
			}
			got, rows = got+i, rows+1
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.close(); err != nil {
			t.Fatal(err)
		}
		if got != wantSum {
			t.Errorf("%s: rows read add up to %d (%d rows), want %d", table, got, rows, wantSum)
		}
	}
}
