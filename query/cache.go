package query

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"time"
)

// The cache: what a whole-database report with the default linking needs that costs a
// pass over every row, stored in the database by Refresh (ingest runs it after each
// load). A report that selects every row with the default --max-gap and no
// --infer-attempts reads it instead of linking the rows again:
//
//	cache_chain  the heuristic links (prepare_chain over every row)
//	cache_multi  the rows of the logical requests with retries (prepare_multi)
//	cache_cube   the rows counted by minute, status, attempt and how they were linked:
//	             the summary and the windows add these up
//	cache_gcube  the rows counted by method, route, host, upstream, status, attempt and
//	             how they were linked: the --by groupings add these up
//	cache_cube_l the logical metrics of the requests in cache_multi, counted by their
//	             first attempt's minute and columns (what logical.sql groups them by)
//	cache_cube_m the strong first attempts in cache_multi, counted by minute and columns
//	cache_state  what the cache was built from (see cacheVersion)
//
// A report with --endpoint, --max-gap or --infer-attempts, or with a --since/--until that
// leaves some row out, links the rows it selects, as before: linking depends on which rows
// are in. The cache is only read while cache_state matches the database, so a load that
// did not refresh it (an older retrylens, a crash in between) costs speed, never
// correctness; the next ingest, even one with nothing new to load, rebuilds it.
const cacheName = "cache"

// execer is what prepare runs statements on: a connection or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// querier can also read.
type querier interface {
	execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlDigest changes with the SQL that builds the cache, so that a cache written by
// another version of retrylens is not read.
var sqlDigest = func() string {
	b, err := fs.ReadFile(sqlFiles, "prepare.sql")
	if err != nil {
		panic(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}()

// cacheVersion names the database's content: the loads in the registry, the rows, and
// the SQL that links them. Rows only ever arrive with a registry entry, in one transaction.
func cacheVersion(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT count(*) || ':' || coalesce(max(file_id), 0) || ':' || coalesce(sum(rows), 0) ||
		':' || (SELECT count(*) FROM requests) FROM files`).Scan(&v)
	if err != nil {
		return "", fmt.Errorf("cache version: %w", err)
	}
	return v + ":" + sqlDigest, nil
}

// storedVersion is the version the cache was built for, "" when there is none.
func storedVersion(ctx context.Context, q querier) (string, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_name = '`+cacheName+`_state' AND table_schema = 'main'`).Scan(&n)
	if err != nil || n == 0 {
		return "", err
	}
	var v string
	err = q.QueryRowContext(ctx, "SELECT version FROM "+cacheName+"_state").Scan(&v)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return v, err
}

// coversAll reports whether [since, until) holds every row: none without a time, the
// first and last inside (a zero bound is open). DuckDB answers from its statistics.
func coversAll(ctx context.Context, q querier, since, until time.Time) (bool, error) {
	var first, last sql.NullTime
	var untimed int64
	err := q.QueryRowContext(ctx, "SELECT min(ts), max(ts), count(*) FILTER (ts IS NULL) FROM requests").Scan(&first, &last, &untimed)
	if err != nil || untimed > 0 || !first.Valid {
		return false, err
	}
	return (since.IsZero() || !since.After(first.Time)) && (until.IsZero() || until.After(last.Time)), nil
}

// cacheFresh reports whether the stored cache matches the database.
func cacheFresh(ctx context.Context, q querier) (bool, error) {
	stored, err := storedVersion(ctx, q)
	if err != nil || stored == "" {
		return false, err
	}
	v, err := cacheVersion(ctx, q)
	return v == stored, err
}

// Refresh rebuilds the cache when it does not match the database, in one transaction.
// It reports whether it did.
func Refresh(ctx context.Context, db *sql.DB) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if fresh, err := cacheFresh(ctx, conn); err != nil || fresh {
		return false, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	v, err := cacheVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	for _, t := range []string{"state", "cube_m", "cube_l", "gcube", "cube", "multi", "chain"} {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+cacheName+"_"+t); err != nil {
			return false, err
		}
	}
	lit := prepareLiterals{
		Since: "TIMESTAMP '0001-01-01'", Until: "TIMESTAMP '9999-12-31'",
		MaxGap: fmt.Sprint(DefaultMaxGap.Seconds()), Infer: "false",
	}
	// The tables are stored; the views and the route parameter are temporary.
	steps := []string{"prepare_params", "prepare_rows", "prepare_chain", "prepare_all", "prepare_multi", "prepare_cube", "prepare_gcube", "prepare_lcube", "prepare_mcube"}
	if err := prepare(ctx, tx, cacheName, "TABLE", lit, nil, steps); err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	for _, q := range []string{
		"DROP VIEW " + cacheName, "DROP VIEW " + cacheName + "_rows", "DROP TABLE " + cacheName + "_p",
		"CREATE TABLE " + cacheName + "_state (version VARCHAR NOT NULL)",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return false, fmt.Errorf("cache: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+cacheName+"_state VALUES (?)", v); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
