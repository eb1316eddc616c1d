// Package ingest loads access logs into a retrylens DuckDB database: it owns the schema,
// the registry of loaded files and the record of rejected lines.
package ingest

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
	"github.com/retrylens/retrylens/internal/duckerr"
)

//go:embed schema.sql
var schema string

// ErrLocked means another process holds the database.
var ErrLocked = errors.New("database is in use by another process")

// ErrNotDuckDB means --db names a URL or a file that is not a DuckDB database.
var ErrNotDuckDB = errors.New("not a DuckDB database")

// Open opens the DuckDB database at path, creating it and its tables if needed. An empty
// path opens a private in-memory database.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("duckdb", path+"?"+offline)
	if err != nil {
		return nil, openError(path, err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	if err := registerFunctions(ctx, db); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	if path != "" {
		if err := checkSchema(ctx, db, true); err != nil {
			db.Close()
			return nil, fmt.Errorf("database %s: %w", path, err)
		}
		removeStaleTemp(path)
	}
	return db, nil
}

// offline keeps DuckDB from fetching extensions: opening a database never reaches the
// network (DuckDB would otherwise download one to read a file of another kind).
const offline = "autoinstall_known_extensions=false&autoload_known_extensions=false"

var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkPath refuses what is not a DuckDB database before DuckDB reads it: a URL other
// than a cluster's (which package backend opens elsewhere), and an existing file that does
// not carry DuckDB's header ("DUCK" at byte 8), such as a SQLite database.
func checkPath(path string) error {
	if urlScheme.MatchString(path) || strings.Contains(path, "://") {
		return fmt.Errorf("--db %q: %w: want a DuckDB file's path, or clickhouse://HOST:PORT/DATABASE?cluster=NAME", path, ErrNotDuckDB)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--db %s is a directory: give a file's path, such as %s", path, filepath.Join(path, "retrylens.duckdb"))
	} else if errors.Is(err, fs.ErrNotExist) {
		if dir := filepath.Dir(path); dir != "." {
			if _, derr := os.Stat(dir); errors.Is(derr, fs.ErrNotExist) {
				return fmt.Errorf("--db %s: the directory %s does not exist: create it (mkdir -p %s) or give another path", path, dir, dir)
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // DuckDB creates it, or says why it cannot
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	switch {
	case n == 0:
		return nil
	case n >= 12 && string(head[8:12]) == "DUCK":
		return nil
	case strings.HasPrefix(string(head[:n]), "SQLite format 3"):
		return fmt.Errorf("%s is a SQLite database, %w: give --db another path", path, ErrNotDuckDB)
	}
	return fmt.Errorf("%s is %w (no DuckDB header): give --db another path", path, ErrNotDuckDB)
}

// keysAsText reports whether the requests table is one written before the keys were
// stored as hashes (keys.go).
func keysAsText(have map[string]bool) bool {
	return have["requests.request_id"] && !have["requests.request_id_hash"]
}

// upgradeKeys brings such a table to today's columns, in one transaction, so that the
// rows of logs that may be gone since are kept: each key's hash from its text, key_text
// as a load writes it, the text columns dropped. A read-only open cannot; checkSchema
// then says what to run.
func upgradeKeys(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{
		`ALTER TABLE requests ADD COLUMN request_id_hash BIGINT`,
		`ALTER TABLE requests ADD COLUMN idempotency_key_hash BIGINT`,
		`ALTER TABLE requests ADD COLUMN invocation_id_hash BIGINT`,
		`ALTER TABLE requests ADD COLUMN key_text VARCHAR`,
		`UPDATE requests SET request_id_hash = ` + keyFunction + `(request_id),
			idempotency_key_hash = ` + keyFunction + `(idempotency_key), invocation_id_hash = ` + keyFunction + `(invocation_id),
			key_text = ` + keyTextFunction + `(attempt, idempotency_key, invocation_id, request_id)`,
		`ALTER TABLE requests DROP COLUMN request_id`,
		`ALTER TABLE requests DROP COLUMN idempotency_key`,
		`ALTER TABLE requests DROP COLUMN invocation_id`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("store the request keys as hashes: %w", err)
		}
	}
	return tx.Commit()
}

// removeStaleTemp removes the files a killed process left in DuckDB's temporary
// directory for path (<path>.tmp): this process holds the database's lock, so no other
// uses them, and DuckDB creates them again when it spills.
func removeStaleTemp(path string) {
	dir := path + ".tmp"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "duckdb_temp_") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir) // only if empty
}

// OpenReadOnly opens an existing database for reading only, as the commands that only
// read do, so that they work on a file the user cannot write (a shared postmortem
// database, a read-only mount) and can change nothing in it.
func OpenReadOnly(ctx context.Context, path string) (*sql.DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("duckdb", path+"?access_mode=read_only&"+offline)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	if err := registerFunctions(ctx, db); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	if err := checkSchema(ctx, db, false); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	if err := fitThreads(ctx, db, 0); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	return db, nil
}

// addedLater are the columns Open adds to the tables of older databases; a read-only
// open does without them.
var addedLater = map[string]bool{"files.line_sum": true, "files.duplicates": true, "files.repeats": true}

// addedInPlace are the columns every open for writing adds to older databases (schema.sql's
// ALTER TABLE … ADD COLUMN IF NOT EXISTS) but for addedLater: a read-only open of a
// database without them says what to run, since any ingest upgrades it.
var addedInPlace = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	for _, m := range alterColumn.FindAllStringSubmatch(schema, -1) {
		if c := m[1] + "." + m[2]; !addedLater[c] {
			out[c] = true
		}
	}
	return out
})

// ErrOldSchema means the database was written by a retrylens whose tables differ.
var ErrOldSchema = errors.New("written by another version of retrylens")

// schemaColumns are the "table.column"s of schema.sql's CREATE TABLE statements, read
// from the text (TestSchemaColumns checks them against DuckDB's reading of the file):
// asking an in-memory DuckDB costs every command 30-40 ms.
var schemaColumns = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	table := ""
	for line := range strings.Lines(schema) {
		if m := createTable.FindStringSubmatch(line); m != nil {
			table = m[1]
		} else if strings.HasPrefix(line, ")") {
			table = ""
		} else if m := columnDef.FindStringSubmatch(line); m != nil && table != "" {
			out[table+"."+m[1]] = true
		}
	}
	return out
})

// schemaTables are the tables of schema.sql, sorted: the tables of schemaColumns.
var schemaTables = sync.OnceValue(func() []string {
	var out []string
	for c := range schemaColumns() {
		if t, _, _ := strings.Cut(c, "."); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
})

var (
	createTable = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+) \(`)
	columnDef   = regexp.MustCompile(`^\s+(\w+)\s+[A-Z]`)
	alterColumn = regexp.MustCompile(`(?m)^ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+) `)
)

// columns lists the "table.column"s of schema.sql's tables in db, from each one's
// pragma_table_info: listing duckdb_columns() makes DuckDB build its information_schema
// and pg_catalog views first, 25-30 ms of every command's time (the views would be
// slower still). A missing table falls back to that listing.
func columns(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	var q strings.Builder
	for i, t := range schemaTables() {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&q, "SELECT '%s.' || name FROM pragma_table_info('%[1]s')", t)
	}
	out, err := stringSet(ctx, db, q.String())
	if duckerr.Missing(err) {
		return stringSet(ctx, db, "SELECT table_name || '.' || column_name FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main'")
	}
	return out, err
}

// stringSet is the set of the strings q selects.
func stringSet(ctx context.Context, db *sql.DB, q string) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out[c] = true
	}
	return out, rows.Err()
}

// checkSchema refuses a database whose tables lack columns this version writes (CREATE
// TABLE IF NOT EXISTS leaves an older table as it was), instead of failing later with
// DuckDB's binder errors; with upgrade, it first upgrades one whose keys are text.
func checkSchema(ctx context.Context, db *sql.DB, upgrade bool) error {
	have, err := columns(ctx, db)
	if err == nil && upgrade && keysAsText(have) {
		if err = upgradeKeys(ctx, db); err == nil {
			have, err = columns(ctx, db)
		}
	}
	if err != nil {
		return err
	}
	var missing, inPlace []string
	for c := range schemaColumns() {
		switch {
		case have[c] || addedLater[c]:
		case addedInPlace()[c]:
			inPlace = append(inPlace, c)
		default:
			missing = append(missing, c)
		}
	}
	if keysAsText(have) {
		return fmt.Errorf("%w, which stored the request keys as text: 'retrylens verify --repair --db' on it upgrades it in place, keeping its rows", ErrOldSchema)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: it lacks %s; load the logs into a new --db file", ErrOldSchema, strings.Join(missing, ", "))
	}
	if len(inPlace) > 0 {
		sort.Strings(inPlace)
		return fmt.Errorf("%w: it lacks %s, which any 'retrylens ingest --db' on it (or 'retrylens verify --repair --db') adds in place, keeping its rows", ErrOldSchema, strings.Join(inPlace, ", "))
	}
	return nil
}

// Damaged reports whether err is DuckDB finding the database file corrupt: blocks that
// do not read back as written, or a file shorter than its own header says (a disk, a
// copy or a filesystem at fault).
func Damaged(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Corrupt database file") || strings.Contains(msg, "Data Corruption Error") ||
		strings.Contains(msg, "does not match stored checksum") || strings.Contains(msg, "Could not read enough bytes from file")
}

var lockHolder = regexp.MustCompile(`\(PID (\d+)\)`)

// openError turns DuckDB's lock conflict into a short message naming the holder.
func openError(path string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "Could not set lock on file") || strings.Contains(msg, "Conflicting lock") {
		who := "another process"
		if m := lockHolder.FindStringSubmatch(msg); m != nil {
			who = "process " + m[1]
		}
		return fmt.Errorf("open %s: %w (held by %s; wait for it to finish or use another --db)", path, ErrLocked, who)
	}
	return fmt.Errorf("open database %s: %w", path, err)
}

// RemoveIfEmpty closes db and removes the database file at path (with its WAL) when it
// registers no load, and says whether it did: a database that nothing went into would
// read as a quiet, healthy log.
func RemoveIfEmpty(ctx context.Context, db *sql.DB, path string) bool {
	var loads int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM files").Scan(&loads); err != nil || loads > 0 {
		return false
	}
	db.Close()
	for _, f := range []string{path, path + ".wal", path + ".tmp"} {
		os.RemoveAll(f)
	}
	return true
}
