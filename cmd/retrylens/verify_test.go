package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

// verify passes on a clean database; rows planted under a registered load (doubling part
// of it) and under a load id with no registry entry, or a stored cache table or answer
// changed, make it exit 5 naming what is wrong. The next ingest repairs the rows (the file's 123 lines,
// counted with wc -l, are then each in once); --repair repairs the cache.
func TestVerify(t *testing.T) {
	testmain.Long(t, "thirteen verifies and repairs (TestVerifyWritesNothing stays)")
	t.Parallel()
	db := filepath.Join(t.TempDir(), "v.duckdb")
	log := scenario("quiet-hour")
	const lines = 123 // wc -l testdata/quiet-hour/access.log; every line parses
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db, log); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	verify := func(want int, wantOut ...string) string {
		t.Helper()
		out, stderr, code := retrylens(t, nil, "verify", "--db", db)
		if code != want {
			t.Errorf("verify: exit %d, want %d\n%s%s", code, want, out, stderr)
		}
		for _, w := range wantOut {
			if !strings.Contains(out, w) {
				t.Errorf("verify: %q not in\n%s", w, out)
			}
		}
		return out
	}
	verify(0, "registry: 1 loads, 123 rows, each line once: ok", "report cache: matches the rows")
	if _, _, code := retrylens(t, nil, "verify", "--db", db, log); code != exitUsage {
		t.Errorf("verify FILE: exit %d, want %d", code, exitUsage)
	}

	execSQL(t, db,
		"INSERT INTO requests SELECT * FROM requests WHERE line % 2 = 0",                                       // doubles 61 lines of load 1
		"INSERT INTO requests SELECT * REPLACE (5 AS file_id) FROM requests WHERE line <= 10 AND line % 2 = 1", // 5 rows, no load 5
	)
	// A report still reads the database, and warns.
	if _, stderr, _ := retrylens(t, nil, "report", "--db", db); !strings.Contains(stderr,
		"warning: the database's rows do not match its registry (rows under 1 load id(s) no load registered; 1 load(s) whose rows differ from what they registered)") {
		t.Errorf("report on the damaged database does not warn:\n%s", stderr)
	}
	verify(exitDamaged,
		"load 5: 5 rows and 0 reject records with no registry entry",
		"load 1 ("+log+", lines 1-123): 184 rows where it registered 123, 61 lines stored more than once",
		"report cache: out of date")

	_, stderr, code := retrylens(t, nil, "ingest", "--db", db, log)
	if code != 0 || !strings.Contains(stderr, "repaired the database before loading: 1 unregistered load(s) deleted; 1 load(s) whose rows did not match the registry deleted, to load again (189 rows deleted") ||
		!strings.Contains(stderr, "123 lines, 123 rows, 0 rejected") {
		t.Errorf("ingest after the damage: exit %d\n%s", code, stderr)
	}
	verify(0, "registry: 1 loads, 123 rows, each line once: ok", "report cache: matches the rows")
	var rows, distinct int
	conn := openDB(t, db)
	conn.QueryRow("SELECT count(*), count(DISTINCT line) FROM requests").Scan(&rows, &distinct)
	conn.Close()
	if rows != lines || distinct != lines {
		t.Errorf("after the repair: %d rows, %d distinct lines; want %d", rows, distinct, lines)
	}

	// A stored cache table that no longer says what the rows say.
	execSQL(t, db, "UPDATE cache_time SET n = n + 1 WHERE status = 200")
	out := verify(exitDamaged, "report cache: cache_time: ")
	if strings.Contains(out, "cache_attempts") {
		t.Errorf("only cache_time was changed:\n%s", out)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--repair", "--db", db); code != 0 || !strings.Contains(out, "repaired: report cache rebuilt from the rows") {
		t.Errorf("verify --repair: exit %d\n%s%s", code, out, stderr)
	}
	verify(0, "report cache: matches the rows")

	// So do the partial answers per minute and the route totals (query/partials.go):
	// each one changed is named.
	execSQL(t, db, "UPDATE cache_p_attempt_counts SET requests = requests + 1", "UPDATE cache_routes SET n = n + 1")
	verify(exitDamaged, "report cache: cache_routes: ", "report cache: cache_p_attempt_counts: ")
	if out, stderr, code := retrylens(t, nil, "verify", "--repair", "--db", db); code != 0 || !strings.Contains(out, "repaired: report cache rebuilt from the rows") {
		t.Errorf("verify --repair: exit %d\n%s%s", code, out, stderr)
	}
	verify(0, "report cache: matches the rows")

	// So does an answer stored for whole reports (query/answers.go).
	execSQL(t, db, `UPDATE cache_answers SET answer = '{"Loops": 7}' WHERE starts_with(name, 'Loops ')`)
	verify(exitDamaged, "report cache: cache_answers: the stored answer to Loops differs from the rows' own")
	if out, stderr, code := retrylens(t, nil, "verify", "--repair", "--db", db); code != 0 || !strings.Contains(out, "repaired: report cache rebuilt from the rows") {
		t.Errorf("verify --repair: exit %d\n%s%s", code, out, stderr)
	}
	verify(0, "report cache: matches the rows")
}

// execSQL runs statements on the database file, as another program could.
func execSQL(t *testing.T, path string, qs ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// verify without --repair writes nothing: a database of an older retrylens (its request
// keys stored as text) is refused with what to run, byte for byte unchanged, and upgraded
// by --repair. (A file that does not read back: TestDamagedDatabase.)
func TestVerifyWritesNothing(t *testing.T) {
	t.Parallel()
	db := ingested(t, "quiet-hour")
	execSQL(t, db, `ALTER TABLE requests DROP COLUMN request_id_hash; ALTER TABLE requests DROP COLUMN idempotency_key_hash;
		ALTER TABLE requests DROP COLUMN invocation_id_hash; ALTER TABLE requests DROP COLUMN key_text;
		ALTER TABLE requests ADD COLUMN request_id VARCHAR; ALTER TABLE requests ADD COLUMN idempotency_key VARCHAR;
		ALTER TABLE requests ADD COLUMN invocation_id VARCHAR`, "CHECKPOINT")
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := retrylens(t, nil, "verify", "--db", db)
	if code != 1 || !strings.Contains(stderr, "'retrylens verify --repair --db' on it upgrades it in place") {
		t.Errorf("verify on an old database: exit %d, want 1 and what to run: %s", code, stderr)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Errorf("verify without --repair changed the database file")
	}
	if testing.Short() {
		return // the upgrade rebuilds every table: a second, for TestVerify's tier
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--repair", "--db", db); code != 0 {
		t.Errorf("verify --repair on an old database: exit %d: %s%s", code, out, stderr)
	}
}
