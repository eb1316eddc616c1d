package ingest

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/retrylens/retrylens/parse"
)

// Rows planted beside a load's own (doubling part of it), under a load id with no
// registry entry, taken out, moved outside a load's lines, or a reject count changed:
// Check names the damaged load ids and the loads of the same file after them, and the
// next Load repairs the database so that it holds what a clean load of the file holds.
func TestCheckAndRepair(t *testing.T) {
	t.Parallel()
	const file = "../testdata/incident-hour/access.log" // 126 lines, 3 rejected: 4 chunks of 8 KiB
	format, _ := parse.Preset("retry")
	opt := Options{Format: format, ChunkBytes: 8 << 10}
	ctx := context.Background()
	want := loadedRows(t, ctx, file, opt)
	tests := []struct {
		name    string
		plant   []string
		orphans []int64
		bad     []int64
		later   []int64 // of the first bad load
	}{
		{"doubled part of a load", []string{"INSERT INTO requests SELECT * FROM requests WHERE file_id = 2 AND line % 3 = 0"}, nil, []int64{2}, []int64{3, 4}},
		{"a load's rows twice", []string{"INSERT INTO requests SELECT * FROM requests WHERE file_id = 1"}, nil, []int64{1}, []int64{2, 3, 4}},
		{"unregistered load", []string{
			"INSERT INTO requests SELECT * REPLACE (7 AS file_id) FROM requests WHERE file_id = 1",
			"INSERT INTO reject_counts VALUES (8, 'fields', 2)",
		}, []int64{7, 8}, nil, nil},
		{"rows missing", []string{"DELETE FROM requests WHERE file_id = 3 AND line % 5 = 0"}, nil, []int64{3}, []int64{4}},
		{"a line moved out", []string{"UPDATE requests SET line = 1000 WHERE file_id = 4 AND line = (SELECT max(line) FROM requests WHERE file_id = 4)"}, nil, []int64{4}, nil},
		{"a line twice in place of another", []string{"UPDATE requests SET line = line + 1 WHERE file_id = 2 AND line = (SELECT min(line) FROM requests WHERE file_id = 2)"}, nil, []int64{2}, []int64{3, 4}},
		{"reject count", []string{"UPDATE reject_counts SET n = n + 1 WHERE file_id = (SELECT min(file_id) FROM reject_counts)"}, nil, []int64{-1}, nil},
		{"orphan and doubled", []string{
			"INSERT INTO requests SELECT * REPLACE (9 AS file_id) FROM requests WHERE file_id = 4",
			"INSERT INTO requests SELECT * FROM requests WHERE file_id = 3",
		}, []int64{9}, []int64{3}, []int64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := Open(ctx, filepath.Join(t.TempDir(), "r.duckdb"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := Load(ctx, db, []string{file}, opt); err != nil {
				t.Fatal(err)
			}
			if d, err := Check(ctx, db, true); err != nil || !d.OK() {
				t.Fatalf("a clean load: %v, %v", d.Problems(), err)
			}
			var rejectLoad int64
			db.QueryRow("SELECT min(file_id) FROM reject_counts").Scan(&rejectLoad)
			for _, q := range tt.plant {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			// What every ingest checks finds the same as verify's full check.
			d, err := Check(ctx, db, false)
			if err != nil {
				t.Fatal(err)
			}
			full, err := Check(ctx, db, true)
			if err != nil {
				t.Fatal(err)
			}
			orphans, bad := damagedIDs(d)
			if o, b := damagedIDs(full); !slices.Equal(o, orphans) || !slices.Equal(b, bad) {
				t.Errorf("full Check: %v; quick: %v", full.Problems(), d.Problems())
			}
			wantBad := tt.bad
			if slices.Equal(wantBad, []int64{-1}) {
				wantBad = []int64{rejectLoad}
			}
			if !slices.Equal(orphans, tt.orphans) || !slices.Equal(bad, wantBad) {
				t.Errorf("Check: orphans %v, bad %v; want %v, %v\n%v", orphans, bad, tt.orphans, wantBad, d.Problems())
			}
			if len(d.Bad) > 0 && tt.later != nil && !slices.Equal(d.Bad[0].Later, tt.later) {
				t.Errorf("load %d: later loads %v, want %v", d.Bad[0].ID, d.Bad[0].Later, tt.later)
			}
			res, err := Load(ctx, db, []string{file}, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Repaired.OK() {
				t.Error("Load did not repair")
			}
			if d, err := Check(ctx, db, true); err != nil || !d.OK() {
				t.Errorf("after the repairing load: %v, %v", d.Problems(), err)
			}
			if got := rowSet(t, db); !slices.Equal(got, want) {
				t.Errorf("after the repairing load: %d rows, want the %d of a clean load", len(got), len(want))
			}
		})
	}
}

// A database written before loads recorded their line sums is checked by counting its
// loads' distinct lines; an ingest records the sums of the sound ones.
func TestCheckWithoutLineSums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	format, _ := parse.Preset("retry")
	opt := Options{Format: format, ChunkBytes: 8 << 10}
	db, err := Open(ctx, filepath.Join(t.TempDir(), "old.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Load(ctx, db, []string{"../testdata/incident-hour/access.log"}, opt); err != nil {
		t.Fatal(err)
	}
	var want int64 // the line numbers of the first load's rows, added up here
	db.QueryRow("SELECT sum(line) FROM requests WHERE file_id = 1").Scan(&want)
	// A line of load 2 stored twice in place of another: only counting distinct lines sees it.
	if _, err := db.Exec(`UPDATE files SET line_sum = NULL;
		UPDATE requests SET line = line + 1 WHERE file_id = 2 AND line = (SELECT min(line) FROM requests WHERE file_id = 2)`); err != nil {
		t.Fatal(err)
	}
	d, err := Check(ctx, db, false)
	if err != nil || len(d.Bad) != 1 || d.Bad[0].ID != 2 || d.Bad[0].Lines != d.Bad[0].Rows-1 || !slices.Equal(d.unsummed, []int64{1, 3, 4}) {
		t.Fatalf("Check: %v, %v, unsummed %v", d.Problems(), err, d.unsummed)
	}
	if _, err := Load(ctx, db, []string{"../testdata/incident-hour/access.log"}, opt); err != nil {
		t.Fatal(err)
	}
	var got sql.NullInt64
	var unsummed int
	db.QueryRow("SELECT (SELECT line_sum FROM files WHERE file_id = 1), (SELECT count(*) FROM files WHERE line_sum IS NULL)").Scan(&got, &unsummed)
	if got.Int64 != want || unsummed != 0 {
		t.Errorf("after an ingest: load 1's line sum %v, want %d; %d loads without one", got, want, unsummed)
	}
}

func damagedIDs(d Damage) (orphans, bad []int64) {
	for _, o := range d.Orphans {
		orphans = append(orphans, o.ID)
	}
	for _, b := range d.Bad {
		bad = append(bad, b.ID)
	}
	return orphans, bad
}

// loadedRows loads file into a new database and returns its rows (see rowSet).
func loadedRows(t *testing.T, ctx context.Context, file string, opt Options) []string {
	t.Helper()
	db := memDB(t)
	if _, err := Load(ctx, db, []string{file}, opt); err != nil {
		t.Fatal(err)
	}
	return rowSet(t, db)
}

// rowSet is every row of requests but its load id, as text, sorted, and the rejected
// lines counted by reason.
func rowSet(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var rejects string
	if err := db.QueryRow("SELECT coalesce(string_agg(reason || '=' || n, ' ' ORDER BY reason), '') FROM (SELECT reason, sum(n) AS n FROM reject_counts GROUP BY reason)").Scan(&rejects); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT CAST(COLUMNS(* EXCLUDE (file_id)) AS VARCHAR) FROM requests`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var s string
		for _, v := range vals {
			s += v.String + "\x00"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return append(out, "rejected: "+rejects)
}
