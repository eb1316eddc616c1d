package query

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/retrylens/retrylens/internal/duckerr"
)

// The cache: the count tables (contract.go) of every row with the default linking,
// stored in the database by Refresh (ingest runs it after each load), with the heuristic
// links they were counted from (cache_chain, which the update reads) and cache_state,
// what they were built from (see cacheVersion). A report that selects every row with the
// default --max-gap and no --infer-attempts reads them instead of running stage one.
//
// A report with --endpoint, --max-gap or --infer-attempts, or with a --since/--until that
// leaves some row out, links the rows it selects and builds its own tables: linking
// depends on which rows are in. The cache is only read while cache_state matches the
// database, so a load that did not refresh it (an older retrylens, a crash in between)
// costs speed, never correctness; the next ingest, even one with nothing new to load,
// rebuilds it.
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

// sqlDigest changes with the SQL that builds the cache (prepare.sql), so that a cache
// written by another version of retrylens is not read.
var sqlDigest = func() string {
	b, err := fs.ReadFile(sqlFiles, "prepare.sql")
	if err != nil {
		panic(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8]) + partialsDigest()
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

// cacheState is what cache_state records: the version the cache was built for, and the
// rows it saw: every row of a load up to file_id watermark, rows of them.
type cacheState struct {
	version         string
	watermark, rows int64
}

// storedState is the stored cache's state; its version is "" when there is none (or one an
// older retrylens wrote, without the columns).
func storedState(ctx context.Context, q querier) (cacheState, error) {
	// Read, not looked up first: a lookup in DuckDB's catalog (information_schema,
	// duckdb_columns()) makes it build its system views, 25-30 ms of every report.
	var st cacheState
	err := q.QueryRowContext(ctx, "SELECT version, watermark, rows FROM "+cacheName+"_state").Scan(&st.version, &st.watermark, &st.rows)
	if err == sql.ErrNoRows || duckerr.Missing(err) {
		return cacheState{}, nil
	}
	return st, err
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
	st, err := storedState(ctx, q)
	if err != nil || st.version == "" {
		return false, err
	}
	v, err := cacheVersion(ctx, q)
	return v == st.version, err
}

// What Refresh did.
const (
	CacheFresh   = ""        // nothing: the cache matched the database
	CacheRebuilt = "rebuilt" // built from every row
	CacheUpdated = "updated" // brought up to date from the rows loaded since (see update)
)

// Refresh brings the cache up to date, in one transaction, and says how (CacheFresh,
// CacheRebuilt or CacheUpdated). When the rows the cache saw are all still there and only
// loads were added since, it updates the cache from the new rows and the logical requests
// they belong to; otherwise (no cache, another retrylens's SQL) it builds it from every row.
func Refresh(ctx context.Context, db *sql.DB) (string, error) {
	return refresh(ctx, db, true)
}

// refresh is Refresh, storing the answers of whole reports (storeAnswers) when answers is
// set.
//
// The connection is closed after it, with the temporary tables the update and the answers
// made: dropping them one by one cost tens of statements a load.
func refresh(ctx context.Context, db *sql.DB, answers bool) (string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer discard(conn)
	st, err := storedState(ctx, conn)
	if err != nil {
		return "", err
	}
	v, err := cacheVersion(ctx, conn)
	if err != nil {
		return "", err
	}
	// The partial answers are kept up to date by the loads that store the answers; watch's
	// batches leave them, and the next ingest builds them again (partials.go). (Read before
	// the transaction: a missing table aborts it.)
	partsWere, err := partsFresh(ctx, conn)
	if err != nil {
		return "", err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if err := ensureAnswers(ctx, tx); err != nil {
		return "", err
	}
	if v == st.version {
		// Fresh; its answers may have been stored by another version of retrylens.
		stored, err := answersStored(ctx, tx, v)
		if err == nil && !stored && answers {
			if !partsWere {
				err = buildPartials(ctx, tx)
			}
			if err == nil {
				err = setParts(ctx, tx, v)
			}
			if err == nil {
				err = storeAnswers(ctx, tx, v)
			}
			if err == nil {
				err = tx.Commit()
			}
		}
		return CacheFresh, err
	}
	var watermark, rows, seen int64
	err = tx.QueryRowContext(ctx, `SELECT coalesce(max(file_id), 0), count(*), count(*) FILTER (file_id <= ?) FROM requests`, st.watermark).
		Scan(&watermark, &rows, &seen)
	if err != nil {
		return "", err
	}
	// The cache still describes the rows it saw when they are all there, counted the same way.
	kept := st.version != "" && strings.HasSuffix(st.version, ":"+sqlDigest) && seen == st.rows
	if kept {
		// A load joins a gateway's lines and spans loaded before it into one row:
		// rows it did not touch change (docs/metrics.md, "Layers").
		layered, err := Layered(ctx, tx)
		if err != nil {
			return "", err
		}
		kept = !layered
	}
	how, parts := CacheRebuilt, true // a rebuild builds the partials
	switch {
	case kept && rows == st.rows:
		how, parts = CacheFresh, partsWere // only the registry changed: a load that added no row
	case kept:
		how, parts = CacheUpdated, partsWere && answers
		var again bool
		if again, err = update(ctx, tx, st.watermark, parts); again && err == nil {
			how, parts = CacheRebuilt, true
			err = rebuild(ctx, tx)
		}
	default:
		err = rebuild(ctx, tx)
	}
	if err == nil && !parts && answers {
		parts, err = true, buildPartials(ctx, tx) // after watch's batches
	}
	if err == nil && parts {
		err = setParts(ctx, tx, v)
	} else if err == nil {
		err = setParts(ctx, tx, "")
	}
	if err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + cacheName + "_state",
		"CREATE TABLE " + cacheName + "_state (version VARCHAR NOT NULL, watermark BIGINT NOT NULL, rows BIGINT NOT NULL)",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("cache: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+cacheName+"_state VALUES (?, ?, ?)", v, watermark, rows); err != nil {
		return "", err
	}
	stored, err := answersStored(ctx, tx, st.version)
	switch {
	case err != nil:
	case how == CacheFresh && stored: // the same rows: the same answers, for the new version
		_, err = tx.ExecContext(ctx, "UPDATE "+answersTable+" SET version = ?", v)
	case answers:
		err = storeAnswers(ctx, tx, v)
	}
	if err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	return how, tx.Commit()
}

// cacheLiterals select every row and link them the default way.
var cacheLiterals = prepareLiterals{
	Since: openSince, Until: openUntil, Before: openSince, After: openUntil,
	MaxGap: fmt.Sprint(DefaultMaxGap.Seconds()), Infer: "false",
}

// rebuild builds every table of the cache from every row.
func rebuild(ctx context.Context, tx *sql.Tx) error {
	var drops []string
	for _, t := range slices.Concat(cachedTables(), partialTables(), legacyTables) {
		drops = append(drops, "DROP TABLE IF EXISTS "+cacheName+"_"+t)
	}
	if err := execAll(ctx, tx, drops...); err != nil {
		return err
	}
	// The tables are stored in the order ranges cut them by (cacheOrder), so that a range
	// reads the row groups of its minutes alone (DuckDB skips the others by their min and
	// max); update appends new rows at the end, which for logs read in order is still time
	// order. The count tables are ordered as they are built (.Sorted); the attempts table,
	// the widest, is built as a temporary table and stored sorted from it: joining and
	// sorting its rows in one statement ran out of the cache's memory on 10M lines now
	// and then, and a stored copy written twice cost 5 s there. The views and the route
	// parameter are temporary.
	steps := slices.Concat(linkSteps, buildSteps(func(CountTable) bool { return true }))
	stored := cacheLiterals
	stored.Sorted = true
	if err := prepare(ctx, tx, cacheName, "TABLE", stored, nil, steps); err != nil {
		return err
	}
	t := cacheName + "_attempts"
	err := execAll(ctx, tx, "CREATE TABLE main."+t+" AS SELECT * FROM temp."+t+" ORDER BY "+cacheOrder("attempts"), "DROP TABLE temp."+t)
	if err != nil {
		return err
	}
	if err := dropTemp(ctx, tx, cacheName); err != nil {
		return err
	}
	return buildPartials(ctx, tx)
}

// CutTable is a table of the stored cache as a range of whole minutes reads it
// (prepare.sql's cached_tables, Options.Cut): cache_<Name>, its rows with By in the
// range, or with Context in the range and its context.
type CutTable struct {
	Name, By string
	Context  bool
}

// CutTables are the stored cache's tables a range reads (not the edges: a range's are the
// time table's around it).
func CutTables() []CutTable {
	var ts []CutTable
	for _, name := range cachedTables() {
		if name != "edges" {
			ts = append(ts, CutTable{Name: name, By: cacheOrder(name), Context: name == "chain" || name == "time"})
		}
	}
	return ts
}

// cacheOrder is the column a stored table is kept in the order of: what ranges cut it by.
func cacheOrder(name string) string {
	if name == "attempts" {
		return "first_ts" // a range's requests are those whose first attempt is in it
	}
	return "ts"
}

// legacyTables are what older versions stored before the count tables had their names.
var legacyTables = []string{"multi", "cube", "gcube", "cube_l", "cube_m"}

// cachedTables are the stored tables after cacheName: the chain, then the count tables.
func cachedTables() []string {
	names := []string{"chain"}
	for _, t := range CountTables {
		names = append(names, t.Name)
	}
	return names
}

// strongKey and heuristicKey are the hashes update finds a row's logical request by: its
// key the client sent, or what the heuristic links it by (prepare.sql's partitions).
const (
	hasStrongKey = "(r.idempotency_key_hash IS NOT NULL OR r.invocation_id_hash IS NOT NULL OR r.request_id_hash IS NOT NULL)"
	strongKey    = "coalesce(r.idempotency_key_hash, r.invocation_id_hash, r.request_id_hash)"
	heuristicKey = "hash(r.remote_addr, r.user_agent, r.method, r.uri)"
	strongLkey   = "TRY_CAST(lkey AS BIGINT)" // a strong lkey is its key's hash, as text (prepare_all)
)

// update brings the cache up to date with the rows of the loads after watermark. Linking
// them can change only the logical requests they belong to: the keys they carry, and the
// heuristic's client-method-URI groups of those without a key; and how the rows of those
// keys are numbered (a line without the attempt header is a first attempt once a tagged
// retry shares its key). Those requests' rows, old and new, and every new row are read
// once (cache_src) and linked again (cache_t), and the old ones among them alone (cache_r,
// as the cache counted them); their rows replace theirs in cache_chain and cache_attempts
// (a hash collision only brings more whole requests in); the tables that count rows take
// out cache_r's counts and add cache_t's; those that count requests take out what the
// touched requests counted for before (cache_o) and add what they count for now.
//
// The keys touched are the new rows' and their request ids', and the keys of the rows
// that carry those request ids (a request id can take another key: prepare_rows'
// _alias). A key reused across requests links its rows by client, method and URI, with
// rows this update does not read, and a line that takes another's key can bring in more
// such lines: when the touched rows have either, now or before, update changes nothing
// and asks for a rebuild (again). Both are rare; a clean log never rebuilds.
//
// Its temporary tables go with refresh's connection, but for a rebuild (again), which
// makes its own in the same transaction.
//
// With parts, it brings the partial answers and the route totals up to date too.
func update(ctx context.Context, tx *sql.Tx, watermark int64, parts bool) (again bool, err error) {
	defer func() {
		for _, prefix := range []string{"cache_t", "cache_r", "cache_o", "cache_src", "cache_ids", "cache_k0", "cache_k", "cache_h", "cache_pm"} {
			if !again || err != nil {
				break
			}
			err = dropTemp(ctx, tx, prefix)
		}
	}()
	after := fmt.Sprintf("r.file_id > %d", watermark)
	err = execAll(ctx, tx,
		`CREATE TEMP TABLE cache_k0 AS SELECT `+strongKey+` AS h FROM requests r WHERE `+after+` AND `+hasStrongKey+
			` UNION SELECT r.request_id_hash FROM requests r WHERE `+after+` AND r.request_id_hash IS NOT NULL`,
		`CREATE TEMP TABLE cache_k AS SELECT h FROM cache_k0 UNION SELECT `+strongKey+` FROM requests r
		 WHERE r.request_id_hash IS NOT NULL AND (r.idempotency_key_hash IS NOT NULL OR r.invocation_id_hash IS NOT NULL)
		   AND r.request_id_hash IN (SELECT h FROM cache_k0)`,
		`CREATE TEMP TABLE cache_h AS SELECT DISTINCT `+heuristicKey+` AS h FROM requests r
		 WHERE `+after+` AND r.attempt IS NOT NULL AND NOT `+hasStrongKey)
	if err != nil {
		return false, err
	}
	// A side with no key to match is left out (most logs send a key with every request:
	// no heuristic group to look for). Untagged rows without a key are linked to nothing.
	var nk, nh int64
	if err := tx.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM cache_k), (SELECT count(*) FROM cache_h)").Scan(&nk, &nh); err != nil {
		return false, err
	}
	// The rows are found by their place first (rowid: a narrow scan, each side on its own),
	// then read whole: one scan of every column with the sides OR'ed took five times as
	// long on 10M rows.
	sides := []string{"SELECT rowid AS id FROM requests r WHERE " + after}
	if nk > 0 {
		sides = append(sides, "SELECT rowid FROM requests r WHERE "+strongKey+" IN (SELECT h FROM cache_k)")
	}
	if nh > 0 {
		sides = append(sides, "SELECT rowid FROM requests r WHERE (CASE WHEN r.attempt IS NOT NULL AND NOT "+hasStrongKey+
			" THEN "+heuristicKey+" END) IN (SELECT h FROM cache_h)")
	}
	err = execAll(ctx, tx, "CREATE TEMP TABLE cache_ids AS "+strings.Join(sides, " UNION "),
		"CREATE TEMP TABLE cache_src AS SELECT * FROM requests r WHERE rowid IN (SELECT id FROM cache_ids)")
	if err != nil {
		return false, err
	}
	rowTables := func(t CountTable) bool { return !t.PerRequest }
	touched := cacheLiterals
	touched.From = "cache_src"
	if err := prepare(ctx, tx, "cache_t", "TEMP TABLE", touched, nil, slices.Concat(linkSteps, buildSteps(func(CountTable) bool { return true }))); err != nil {
		return false, err
	}
	// Reused keys, and lines that took another line's key (an alias), now or before.
	const ownKey = "CAST(coalesce(idempotency_key, invocation_id, request_id) AS VARCHAR)"
	var odd int64
	err = tx.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM cache_t WHERE reused_key OR (strong AND lkey <> "+ownKey+")) + (SELECT count(*) FROM "+
		cacheName+"_attempts WHERE (reused_key OR (strong AND lkey <> "+ownKey+")) AND (coalesce(idempotency_key, invocation_id, request_id) IN (SELECT h FROM cache_k) OR "+strongLkey+" IN (SELECT h FROM cache_k)))").Scan(&odd)
	if err != nil || odd > 0 {
		return odd > 0, err
	}
	before := touched
	before.Where = fmt.Sprintf("r.file_id <= %d", watermark)
	if err := prepare(ctx, tx, "cache_r", "TEMP TABLE", before, nil, slices.Concat(linkSteps, buildSteps(rowTables))); err != nil {
		return false, err
	}
	// What the touched requests counted for before: their rows in cache_attempts. With no
	// alias or reused key among them (odd), every row of theirs is in cache_src, so their
	// first attempts are no earlier than its first row: a bound DuckDB skips the row groups
	// of older requests by (the tables are in time order), so that an update reads the
	// stored tables around what it changed, not all of them.
	touchedAttempts := "((strong AND " + strongLkey + " IN (SELECT h FROM cache_k))" +
		" OR (NOT strong AND split_part(lkey, ':', 2) IN (SELECT CAST(h AS VARCHAR) FROM cache_h)))" + // heuristic lkey: 'h:' || hash || ':' || chain
		" AND " + timeFrom("first_ts", "cache_src")
	if err := execAll(ctx, tx, "CREATE TEMP VIEW cache_o_attempts AS SELECT * FROM "+cacheName+"_attempts WHERE "+touchedAttempts); err != nil {
		return false, err
	}
	if err := prepare(ctx, tx, "cache_o", "TEMP TABLE", cacheLiterals, nil,
		buildSteps(func(t CountTable) bool { return t.PerRequest && t.Keys != nil })); err != nil {
		return false, err
	}
	qs := []string{
		"DELETE FROM " + cacheName + "_chain r WHERE " + heuristicKey + " IN (SELECT h FROM cache_h) AND " + timeFrom("ts", "cache_src"),
		"INSERT INTO " + cacheName + "_chain BY NAME SELECT * FROM cache_t_chain",
	}
	for _, t := range CountTables {
		switch {
		case t.Keys == nil: // rows: the touched requests' replaced
			qs = append(qs,
				"DELETE FROM "+cacheName+"_"+t.Name+" WHERE "+touchedAttempts,
				"INSERT INTO "+cacheName+"_"+t.Name+" BY NAME SELECT * FROM cache_t_"+t.Name)
		case t.PerRequest:
			qs = append(qs, merge(t, map[string]int{cacheName: 1, "cache_o": -1, "cache_t": 1})...)
		default:
			qs = append(qs, merge(t, map[string]int{cacheName: 1, "cache_r": -1, "cache_t": 1})...)
		}
	}
	// The partial answers of the minutes the touched requests began in, before or now: each
	// began at one of its rows, all of them in cache_src.
	if err := execAll(ctx, tx, qs...); err != nil || !parts {
		return false, err
	}
	qs = []string{"CREATE TEMP TABLE cache_pm AS SELECT DISTINCT " + minuteSQL("ts") + " AS m FROM cache_src"}
	if err := execAll(ctx, tx, qs...); err != nil {
		return false, err
	}
	return false, updatePartials(ctx, tx, "cache_pm", "cache_r", "cache_t")
}

// merge returns the statements that replace the cache's table t by the sum of the same
// table under each prefix of parts, times its sign (+1 added, -1 taken out). A row whose
// counts all come to zero (a request that moved) is dropped.
func merge(t CountTable, parts map[string]int) []string {
	from := map[string]int{}
	for prefix, sign := range parts {
		from[prefix+"_"+t.Name] = sign
	}
	return sumInto(cacheName+"_"+t.Name, t, from)
}

// sumInto returns the statements that replace the table stored, of t's columns, by the
// sum of the rows of each source (a table, or a subquery in parentheses, with t's
// columns) times its sign, stored itself among them with sign 1. Only the stored rows
// whose keys the other sources touch are rewritten (found by a hash of the keys: a
// collision rewrites a row unchanged), so that an update costs what it adds, not the
// table's size.
func sumInto(stored string, t CountTable, sources map[string]int) []string {
	var from, agg, nonzero []string
	sel := "SELECT " + strings.Join(t.Keys, ", ")
	for source, sign := range sources {
		if source == stored {
			continue
		}
		q := sel
		for _, c := range t.Sums {
			q += fmt.Sprintf(", %d * %s AS %s", sign, c, c)
		}
		from = append(from, q+" FROM "+source)
	}
	for _, c := range t.Sums {
		agg = append(agg, "sum("+c+")::BIGINT AS "+c)
		nonzero = append(nonzero, "coalesce(sum("+c+"), 0) <> 0")
	}
	keyHash := "hash(" + strings.Join(t.Keys, ", ") + ")"
	touched := keyHash + " IN (SELECT h FROM cache_touched)"
	if slices.Contains(t.Keys, "ts") {
		// the stored rows touched are in the delta's time span: the others' row groups are skipped
		touched += " AND " + timeFrom("ts", "cache_delta") + " AND " + orNull("ts") + " <= (SELECT max(" + orNull("ts") + ") FROM cache_delta)"
	}
	return []string{
		"CREATE TEMP TABLE cache_delta AS " + strings.Join(from, " UNION ALL "),
		"CREATE TEMP TABLE cache_touched AS SELECT DISTINCT " + keyHash + " AS h FROM cache_delta",
		"CREATE TEMP TABLE cache_merged AS SELECT " + strings.Join(t.Keys, ", ") + ", " + strings.Join(agg, ", ") +
			" FROM (" + sel + ", " + strings.Join(t.Sums, ", ") + " FROM " + stored + " WHERE " + touched +
			" UNION ALL SELECT * FROM cache_delta) GROUP BY ALL HAVING " + strings.Join(nonzero, " OR "),
		"DELETE FROM " + stored + " WHERE " + touched,
		"INSERT INTO " + stored + " BY NAME SELECT * FROM cache_merged",
		"DROP TABLE cache_merged",
		"DROP TABLE cache_touched",
		"DROP TABLE cache_delta",
	}
}

// timeFrom is the condition that col is no earlier than the earliest ts of table, a time
// that is NULL counting as the earliest of all: DuckDB skips the row groups before it.
func timeFrom(col, table string) string {
	return orNull(col) + " >= (SELECT min(" + orNull("ts") + ") FROM " + table + ")"
}

// orNull is a time column with NULL as -infinity, so that bounds keep the rows without one.
func orNull(col string) string { return "coalesce(" + col + ", '-infinity'::TIMESTAMP)" }

// execAll runs statements in order, stopping at the first error.
func execAll(ctx context.Context, tx execer, qs ...string) error {
	for _, q := range qs {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.60s…: %w", q, err)
		}
	}
	return nil
}

// What CheckCache found.
const (
	CacheNone    = "none"    // no cache, or one another retrylens wrote: reports link the rows
	CacheStale   = "stale"   // the rows changed since it was built: reports link the rows until the next ingest
	CacheMatches = "matches" // every stored table equals the same table built again from the rows
	CacheDiffers = "differs" // a stored table that reports would read differs from the rows
)

// CheckCache builds the cache's tables again from the rows, in temporary tables, and
// compares them with the stored ones, row for row (EXCEPT ALL both ways, over each row's
// hash). A cache that does not match the database's version is not read by reports, so it
// is only said to be stale. problems names each stored table that differs and by how many
// rows.
func CheckCache(ctx context.Context, db *sql.DB) (state string, problems []string, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close()
	st, err := storedState(ctx, conn)
	if err != nil {
		return "", nil, err
	}
	if st.version == "" || !strings.HasSuffix(st.version, ":"+sqlDigest) {
		return CacheNone, nil, nil
	}
	if fresh, err := cacheFresh(ctx, conn); err != nil || !fresh {
		return CacheStale, nil, err
	}
	partsWere, err := partsFresh(ctx, conn) // (before the transaction: a missing table aborts it)
	if err != nil {
		return "", nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return "", nil, err
	}
	defer tx.Rollback() // the temporary tables go with it
	const again = "verify"
	if err := prepare(ctx, tx, again, "TEMP TABLE", cacheLiterals, nil, slices.Concat(linkSteps, buildSteps(func(CountTable) bool { return true }))); err != nil {
		return "", nil, fmt.Errorf("build the cache again: %w", err)
	}
	for _, t := range cachedTables() {
		d, err := differ(ctx, tx, cacheName+"_"+t, again+"_"+t)
		if err != nil {
			return "", nil, err
		}
		if d != "" {
			problems = append(problems, d)
		}
	}
	if partsWere { // (else the next ingest builds them again)
		differ, err := checkPartials(ctx, tx, again)
		if err != nil {
			return "", nil, err
		}
		problems = append(problems, differ...)
	}
	// The answers stored beside them (this program's) equal the rows' own.
	if stored, err := answersStored(ctx, tx, st.version); err != nil {
		return "", nil, err
	} else if stored {
		s, _, _ := newSet(tx, again, Options{MaxGap: DefaultMaxGap})
		differ, err := checkAnswers(ctx, tx, s)
		if err != nil {
			return "", nil, fmt.Errorf("answer again: %w", err)
		}
		problems = append(problems, differ...)
	}
	if len(problems) > 0 {
		return CacheDiffers, problems, nil
	}
	return CacheMatches, nil, nil
}

// differ compares the stored table with the one built again, row for row, and says how
// they differ ("" when they do not). Rows are compared by a hash of each (hash of the row
// as a struct): EXCEPT ALL over the rows themselves ran out of the cache's memory on
// cache_attempts of 10M lines. A difference two rows' hashes hide is a 64-bit collision.
func differ(ctx context.Context, tx querier, stored, built string) (string, error) {
	var extra, missing int64
	err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM (SELECT hash(s) FROM `+stored+` s EXCEPT ALL SELECT hash(b) FROM `+built+` b)),
		(SELECT count(*) FROM (SELECT hash(b) FROM `+built+` b EXCEPT ALL SELECT hash(s) FROM `+stored+` s))`).Scan(&extra, &missing)
	if err != nil {
		return "", fmt.Errorf("compare %s: %w", stored, err)
	}
	if extra+missing > 0 {
		return fmt.Sprintf("%s: %d stored rows not in the rows' own, %d of theirs missing", stored, extra, missing), nil
	}
	return "", nil
}

// Rebuild builds the cache again from every row, whatever its state says.
func Rebuild(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+cacheName+"_state"); err != nil {
		return err
	}
	_, err := Refresh(ctx, db)
	return err
}

// cacheMemory is DuckDB's memory limit while the report cache is built: it sorts and
// groups the retried requests, more than a load needs, still bounded (measured in
// bench/README.md). A variable for the test of a build that needs more.
var cacheMemory = "192MB"

// SetCacheMemory gives DuckDB the memory a build of the report cache takes.
func SetCacheMemory(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, "SET memory_limit = '"+cacheMemory+"'")
	return err
}

// RefreshAfterLoad is Refresh with the memory a build takes, as ingest runs it. Without
// answers it leaves out the answers whole reports read (storeAnswers), a second or two on
// a large database: retrylens watch, whose reports are ranges, refreshes every batch.
//
// A build that runs out of that memory (seen in 10M-row rebuilds while the attempts table
// was sorted as it was joined) is run again with DuckDB's default limit, most of the
// machine's memory, rather than leave reports without a cache.
func RefreshAfterLoad(ctx context.Context, db *sql.DB, answers bool) (string, error) {
	if err := SetCacheMemory(ctx, db); err != nil {
		return "", err
	}
	how, err := refresh(ctx, db, answers)
	if duckerr.OutOfMemory(err) {
		if _, rerr := db.ExecContext(ctx, "RESET memory_limit"); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		how, err = refresh(ctx, db, answers)
	}
	return how, err
}
