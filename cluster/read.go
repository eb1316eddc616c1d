// A report on a cluster runs stage one of a report (docs/internals.md, "The count tables") over
// a ClickHouse cluster (docs/scale.md), for the unchanged stage two.
//
// The rows are sharded by their link key, so every attempt of a keyed request is on one
// shard. Most rows belong to requests no linking can change: a keyed first attempt whose
// key no retry carries, an untagged line of such a key. The shards count those, per
// second and per minute and grouping columns, and only the counts travel (counted_time,
// counted_groups, counted_span). The rows that linking can change travel whole into an
// in-memory DuckDB database, where prepare.sql links them as it links a DuckDB file's:
//
//   - the lines of a key that a tagged retry carries (each shard finds its own: the key's
//     lines are all there), with their untagged first attempts and reused keys;
//   - the lines whose only key is an X-Request-Id that such a line carries beside an
//     Idempotency-Key or invocation id (found across shards: GLOBAL IN);
//   - tagged lines without a key (the heuristic links them by client, user agent,
//     method and URI), and with --infer-attempts every untagged line.
//
// The Set then adds the counts to its row count tables (query.Options.Counted), so every
// figure is what the same rows in a DuckDB file give. The SQL keeps to what ClickHouse
// 18.16 has.

package cluster

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	chdriver "github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/duckdb/duckdb-go/v2"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/duckerr"
	"github.com/retrylens/retrylens/query"
)

// skey is a line's strong key (prepare.sql's skey).
const skey = "coalesce(idempotency_key, invocation_id, request_id)"

// traffic is what a report read from the cluster: the rows that travelled and the
// count rows that stood for the others.
type traffic struct {
	Rows        int64 // lines read whole, to link
	CountRows   int64 // rows of counts (counted_time, counted_groups)
	CountedRows int64 // lines those counts stand for
	// How long reading the rows and the counts took (the query on the shards included;
	// they run at once).
	RowsTime, CountsTime time.Duration
}

// materialize reads what a Set of o needs from the cluster into a new DuckDB database
// (see fill) for the stored answers and cache, which are of every row. Open the Set on
// it with o.Counted; close it with the function returned, which removes it.
//
// The loader's memory is bounded while the work fits: the database is a temporary file,
// which DuckDB spills to under workMemory, and the Go heap is held to workHeap while it
// is open (10M lines: 555 MiB; at 20M the Set's temporary tables outgrow the limit and
// answerWithin asks again without it). In memory, the lines to link and the counts of
// 10M lines took the loader to 2.2 GiB, which a memory limit alone could not bound
// (DuckDB cannot evict an in-memory database's tables).
func materialize(ctx context.Context, cl *Cluster, o query.Options, every bool) (*sql.DB, func(), traffic, error) {
	dir, err := workDir()
	if err != nil {
		return nil, nil, traffic{}, err
	}
	db, err := ingest.Open(ctx, filepath.Join(dir, "work.duckdb"))
	if err == nil {
		if _, err = db.ExecContext(ctx, "SET memory_limit = '"+workMemory+"'"); err != nil {
			db.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, traffic{}, err
	}
	release := holdHeap()
	done := func() { db.Close(); os.RemoveAll(dir); release() }
	tr, err := fill(ctx, cl, db, o, every, true)
	if err != nil {
		done()
		return nil, nil, tr, err
	}
	return db, done, tr, nil
}

// The limits of materialize: DuckDB's, above a DuckDB file's cache build (the Set's
// temporary tables are evicted less readily than a file's: 192 MB ran out merging the
// counts of 100K routes per minute), the Go heap's soft limit, and how many of the rows to
// link stage one links at a time (query.Options.PartRows: a part's tables fit the limit
// whatever the whole: each part costs its statements again, so parts are large; 10M
// generated lines bring 1.27M rows to link, two parts).
const (
	workMemory = "256MB"
	workHeap   = 192 << 20
	workPart   = 1_000_000
)

// heapHeld counts the open databases of materialize: the Go heap's soft limit is the
// process's, so the first sets it and the last gives the one before back (a test binary
// opens several at once, which, each restoring what it found, left the limit set).
var heapHeld struct {
	sync.Mutex
	n    int
	prev int64
}

// holdHeap holds the Go heap to workHeap until the function it returns is called.
func holdHeap() func() {
	heapHeld.Lock()
	defer heapHeld.Unlock()
	if heapHeld.n == 0 {
		heapHeld.prev = debug.SetMemoryLimit(workHeap)
	}
	heapHeld.n++
	return sync.OnceFunc(func() {
		heapHeld.Lock()
		defer heapHeld.Unlock()
		if heapHeld.n--; heapHeld.n == 0 {
			debug.SetMemoryLimit(heapHeld.prev)
		}
	})
}

// partRows is how many rows to link a part of the loader's links: cl.PartRows, else workPart.
func partRows(cl *Cluster) int {
	if cl.PartRows > 0 {
		return cl.PartRows
	}
	return workPart
}

// answerWithin asks query.Answer of db, a database of materialize's, within workMemory;
// when that runs out (a heavier log than measured), it calls again, which undoes what the
// first attempt stored, and asks again without DuckDB's limit rather than fail the load.
func answerWithin(ctx context.Context, db *sql.DB, o query.Options, again func() error, cut func(query.CutTable, query.CutRows) error) (map[string][]byte, error) {
	answers, err := query.Answer(ctx, db, o, cut)
	if !duckerr.OutOfMemory(err) {
		return answers, err
	}
	if _, rerr := db.ExecContext(ctx, "RESET memory_limit"); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	if err := again(); err != nil {
		return nil, err
	}
	return query.Answer(ctx, db, o, cut)
}

// workDir makes the folder of materialize's database in the system's temporary folder,
// named with this process's id, after removing those of processes gone (a killed ingest
// leaves its own).
func workDir() (string, error) {
	const prefix = "retrylens-work-"
	if old, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*")); err == nil {
		for _, d := range old {
			pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), prefix), "-")
			if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid() && !processAlive(n) {
				os.RemoveAll(d)
			}
		}
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// usOf is t in microseconds since the epoch, open when t is zero (an open bound).
func usOf(t time.Time, open int64) int64 {
	if t.IsZero() {
		return open
	}
	return t.UnixMicro()
}

// between is the condition that col, microseconds since the epoch, is in [from, to),
// stated also by its minute, the tables' sort key (MinuteOf).
func between(col string, from, to int64) string {
	w := fmt.Sprintf("%[1]s >= %[2]d AND %[1]s < %[3]d", col, from, to)
	minute := MinuteOf(col)
	if from != math.MinInt64 {
		w += fmt.Sprintf(" AND %s >= %d", minute, from/60e6)
	}
	if to != math.MaxInt64 {
		w += fmt.Sprintf(" AND %s <= %d", minute, (to-1)/60e6)
	}
	return w
}

// selected is the condition on a shard's rows that they are in [from, to) and of o's
// endpoint, if any, with its parameters.
func selected(o query.Options, from, to time.Time) (string, []any) {
	w := between("ts_us", usOf(from, math.MinInt64), usOf(to, math.MaxInt64))
	var args []any
	if o.Route != "" {
		w += " AND route = ?"
		args = append(args, o.Route)
	}
	if o.Method != "" {
		w += " AND method = ?"
		args = append(args, o.Method)
	}
	return w, args
}

// fill reads what a Set of o needs from the cluster into db, an in-memory DuckDB
// database with an empty requests table: the rows that linking can change, and the
// counts of the others, and with span the range's first and last time (counted_span).
// With every, all rows travel (a budget replays each attempt).
func fill(ctx context.Context, cl *Cluster, db *sql.DB, o query.Options, every, span bool) (traffic, error) {
	var tr traffic
	before, after := o.Context()
	since, until := usOf(o.Since, math.MinInt64), usOf(o.Until, math.MaxInt64)
	window, args := selected(o, before, after)
	// The keys tagged retries carry, on each shard from its own lines (the Distributed
	// table's query runs this subquery on every shard against its local table).
	retried := fmt.Sprintf("(SELECT assumeNotNull(%s) FROM %s WHERE %s AND attempt >= 1 AND %s IS NOT NULL)",
		skey, cl.Table("requests_local"), window, skey)
	// The X-Request-Ids carried beside such a key, from every shard.
	aliased := fmt.Sprintf(`(SELECT assumeNotNull(request_id) FROM %s WHERE %s AND request_id IS NOT NULL
		AND (idempotency_key IS NOT NULL OR invocation_id IS NOT NULL) AND assumeNotNull(%s) IN %s)`,
		cl.Table("requests"), window, skey, retried)
	linked := fmt.Sprintf(`((attempt IS NOT NULL AND %[1]s IS NULL)
		OR (attempt IS NULL AND %[2]d)
		OR (%[1]s IS NOT NULL AND assumeNotNull(%[1]s) IN %[3]s)
		OR (idempotency_key IS NULL AND invocation_id IS NULL AND request_id IS NOT NULL AND assumeNotNull(request_id) GLOBAL IN %[4]s))`,
		skey, boolInt(o.InferAttempts), retried, aliased)
	if every {
		linked = "1"
	}
	// The subqueries repeat the window's parameters.
	linkedArgs := append(append(append([]any{}, args...), args...), args...)
	if every {
		linkedArgs = nil
	}
	inRange := fmt.Sprintf("(ts_us >= %d AND ts_us < %d)", since, until)

	fail := func(err error) (traffic, error) { return tr, err }
	if err := execEach(ctx, db, query.CountedTime, query.CountedGroups); err != nil {
		return fail(err)
	}
	// The rows to link: the columns stage one reads (prepare.sql's _lines), the others
	// NULL.
	all := []string{"file_id", "line", "ts_us", "remote_addr", "method", "uri", "protocol", "status", "bytes", "referer",
		"user_agent", "host", "request_time", "upstream_addr", "upstream_status", "upstream_response_time", "upstream_tries",
		"attempt", "attempt_source", "max_attempts", "retry_reason", "request_id", "idempotency_key", "invocation_id",
		"retry_after", "route"}
	unread := map[string]bool{"protocol": true, "bytes": true, "referer": true, "upstream_response_time": true,
		"attempt_source": true, "retry_reason": true}
	var cols []string
	for _, c := range all {
		if !unread[c] {
			cols = append(cols, c)
		}
	}
	// DuckDB's requests stores the keys as hashes, and the strong key's text (key_text)
	// after route, then error_code and operation, read last; span_hash, last, stays NULL (a
	// cluster keeps no spans: docs/metrics.md, "Layers").
	cols = append(cols, "error_code", "operation")
	row := make([]any, len(all)+4)
	keyAt := map[string]int{}
	for i, c := range all {
		keyAt[c] = i
	}
	rowsQuery := "SELECT " + strings.Join(cols, ", ") + " FROM " + cl.Table("requests") + " WHERE " + window + " AND " + linked

	// The others, counted on the shards into the contract's row count tables: their key
	// columns for a line no linking changes (linked_by as prepare_all names a keyed
	// line's; none is cancelled: only an attempt of a request with a retry can be), and
	// the row counts as query writes them for both engines.
	unlinked := map[string]string{
		"status": "status", "attempt": "attempt", "method": "method", "route": "route", "host": "host",
		"upstream_addr": "upstream_addr", "inferred": "toUInt8(0)", "strong": "attempt IS NOT NULL", "cancelled": "toUInt8(0)",
		"linked_by": `if(attempt IS NULL, NULL, multiIf(idempotency_key IS NOT NULL, 'idempotency_key', invocation_id IS NOT NULL, 'invocation_id', 'request_id'))`,
	}
	// counts is the query of table's counts, its time (ts, first) the bucket, in seconds,
	// then flag (as in_range) if given.
	counts := func(table, bucket, flag, where string) string {
		sel, group := []string{bucket + " AS ts"}, []string{"ts"}
		if flag != "" {
			sel, group = append(sel, flag+" AS in_range"), append(group, "in_range")
		}
		for _, k := range query.CountTableNamed(table).Keys[1:] {
			x, ok := unlinked[k]
			if !ok {
				panic("cluster: no expression for count key " + k)
			}
			sel, group = append(sel, x+" AS "+k), append(group, k)
		}
		return "SELECT " + strings.Join(sel, ", ") + ", " + query.RowCounts(query.ClickHouse) + " FROM " + cl.Table("requests") +
			" WHERE " + where + " GROUP BY " + strings.Join(group, ", ")
	}
	notLinked := window + " AND NOT " + linked
	slices, err := countSlices(ctx, cl, window, args)
	if err != nil {
		return fail(err)
	}
	var timeQueries, groupsQueries []string
	for _, slice := range slices {
		timeQueries = append(timeQueries, counts("time", "intDiv(assumeNotNull(ts_us), 1000000)", inRange, notLinked+slice))
		groupsQueries = append(groupsQueries, counts("groups", "intDiv(assumeNotNull(ts_us), 60000000) * 60", "", notLinked+" AND "+inRange+slice))
	}
	nAt := len(query.CountTableNamed("time").Keys) + 1 // rows, after the keys and in_range
	withLinked := append(append([]any{}, args...), linkedArgs...)

	var counted int64
	jobs := []copyJob{
		{"read the rows to link", "requests", rowsQuery, withLinked, func(v []any) []any {
			if us, ok := v[2].(int64); ok {
				v[2] = time.UnixMicro(us).UTC()
			}
			j := 0
			for i, c := range all {
				if unread[c] {
					row[i] = nil
				} else {
					row[i] = v[j]
					j++
				}
			}
			text := func(c string) string { s, _ := row[keyAt[c]].(string); return s }
			row[len(all)+1], row[len(all)+2] = v[len(v)-2], v[len(v)-1] // error_code, operation
			row[len(all)] = nullText(ingest.KeyTextOf(row[keyAt["attempt"]], row[keyAt["idempotency_key"]], row[keyAt["invocation_id"]], row[keyAt["request_id"]]))
			for _, c := range []string{"request_id", "idempotency_key", "invocation_id"} {
				if k := text(c); k != "" {
					row[keyAt[c]] = ingest.KeyHash(k)
				} else {
					row[keyAt[c]] = nil
				}
			}
			return row
		}, &tr.Rows, &tr.RowsTime, nil},
		{"count the rows on the shards", "counted_time", timeQueries[0], withLinked, func(v []any) []any {
			v[0] = time.Unix(v[0].(int64), 0).UTC()
			counted += v[nAt].(int64)
			return v
		}, new(int64), &tr.CountsTime, timeQueries[1:]},
		{"count the rows on the shards", "counted_groups", groupsQueries[0], withLinked, func(v []any) []any {
			v[0] = time.Unix(v[0].(int64), 0).UTC()
			return v
		}, new(int64), new(time.Duration), groupsQueries[1:]},
	}
	if span {
		j, err := spanJob(ctx, cl, db, o)
		if err != nil {
			return fail(err)
		}
		jobs = append(jobs, j)
	}
	if err := copyAll(ctx, cl, db, jobs); err != nil {
		return fail(err)
	}
	tr.CountRows, tr.CountedRows = *jobs[1].n+*jobs[2].n, counted
	tr.CountsTime = max(tr.CountsTime, *jobs[2].took)
	return tr, nil
}

// countSlices returns the conditions (each after " AND ", or one empty) that cut the rows
// of window into slices of whole minutes of about countSlice rows each (Cluster.CountRows
// if set), by their time: the shards' counts come back as one block a query whatever
// max_block_size (18.16 sends an aggregation's result whole), which the driver decodes in
// Go, so a query a slice keeps that to a slice's (20M generated lines counted at once:
// 4.5M rows of groups in one block, 705 MB of Go heap). Each slice asks the keys of
// retried requests again.
func countSlices(ctx context.Context, cl *Cluster, window string, args []any) ([]string, error) {
	var n uint64
	var lo, hi int64
	err := cl.Conn.QueryRow(ctx, "SELECT count(), toInt64(min(ts_us)), toInt64(max(ts_us)) FROM "+cl.Table("requests")+" WHERE "+window, args...).Scan(&n, &lo, &hi)
	if err != nil {
		return nil, fmt.Errorf("count the rows: %w", err)
	}
	per := uint64(countSlice)
	if cl.CountRows > 0 {
		per = uint64(cl.CountRows)
	}
	k := int64((n + per - 1) / per)
	first, last := lo/60e6, hi/60e6 // minutes
	if k <= 1 || last <= first {
		return []string{""}, nil
	}
	k = min(k, last-first+1)
	var out []string
	for i := range k {
		from, to := first+(last-first+1)*i/k, first+(last-first+1)*(i+1)/k
		out = append(out, " AND "+between("ts_us", from*60e6, to*60e6))
	}
	return out, nil
}

// countSlice is about how many rows a query of the shards' counts covers (countSlices).
const countSlice = 4_000_000

// spanJob creates counted_span in db and returns the job that reads the first and last
// time of o's range into it.
func spanJob(ctx context.Context, cl *Cluster, db *sql.DB, o query.Options) (copyJob, error) {
	if _, err := db.ExecContext(ctx, query.CountedSpan); err != nil {
		return copyJob{}, err
	}
	window, args := selected(o, o.Since, o.Until)
	q := fmt.Sprintf("SELECT min(ts_us), max(ts_us) FROM %s WHERE %s", cl.Table("requests"), window)
	return copyJob{"read the range's span", "counted_span", q, args, func(v []any) []any {
		for i := range v {
			if us, ok := v[i].(int64); ok {
				v[i] = time.UnixMicro(us).UTC()
			}
		}
		return v
	}, new(int64), new(time.Duration), nil}, nil
}

// execEach runs the statements on db, one by one.
func execEach(ctx context.Context, db *sql.DB, qs ...string) error {
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// copyJob is a query whose rows copyAll appends to a table of DuckDB's, each as fix
// returns it, then those of the queries in more (with the same arguments); it counts them
// into n and times itself into took.
type copyJob struct {
	what, table, q string
	args           []any
	fix            func([]any) []any
	n              *int64
	took           *time.Duration
	more           []string
}

// copyAll runs the jobs at once, each on a connection of its own: the shards compute one
// while the rows of another are decoded and appended here.
func copyAll(ctx context.Context, cl *Cluster, db *sql.DB, jobs []copyJob) error {
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			start := time.Now()
			conn, err := db.Conn(ctx)
			if err == nil {
				for _, q := range append([]string{j.q}, j.more...) {
					var n int64
					n, err = copyRows(ctx, cl, conn, j.table, q, j.args, j.fix)
					if *j.n += n; err != nil {
						break
					}
				}
				conn.Close()
			}
			*j.took = time.Since(start)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", j.what, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// copyRows runs q on the cluster and appends its rows to the DuckDB table, each row's
// values (NULLs as nil) as fix returns them. It returns how many rows it copied.
func copyRows(ctx context.Context, cl *Cluster, conn *sql.Conn, table, q string, args []any, fix func([]any) []any) (int64, error) {
	// In each server's system.query_log (as current releases do by default): what each
	// shard sent for a report is measured there (docs/scale.md).
	// The driver decodes blocks two ahead of the appender: rows come 16K a block (an
	// aggregation's result comes whole: countSlices).
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1, "max_block_size": 16384}))
	rows, err := cl.Conn.Query(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	scan, err := scanner(rows)
	if err != nil {
		return 0, err
	}
	var n int64
	err = conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", table)
		if err != nil {
			return err
		}
		var dvals []driver.Value
		for rows.Next() {
			vals, err := scan()
			if err != nil {
				app.Close()
				return err
			}
			out := fix(vals)
			if len(dvals) != len(out) {
				dvals = make([]driver.Value, len(out))
			}
			for i, v := range out {
				dvals[i] = v
			}
			if err := app.AppendRow(dvals...); err != nil {
				app.Close()
				return err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			app.Close()
			return err
		}
		return app.Close()
	})
	return n, err
}

// scanner returns what scans the current row of rows into values as the appender takes
// them (scanSlot), in a slice it reuses.
func scanner(rows chdriver.Rows) (func() ([]any, error), error) {
	types := rows.ColumnTypes()
	dest := make([]any, len(types))
	get := make([]func() any, len(types))
	for i, t := range types {
		var err error
		if dest[i], get[i], err = scanSlot(t.DatabaseTypeName()); err != nil {
			return nil, err
		}
	}
	vals := make([]any, len(types))
	return func() ([]any, error) {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		for i, g := range get {
			vals[i] = g()
		}
		return vals, nil
	}, nil
}

// scanSlot returns where to scan a column of ClickHouse type t and how to read what was
// scanned as the appender takes it: nil for NULL, a UInt8 as a boolean (18.16 has no
// Bool).
func scanSlot(t string) (dest any, get func() any, err error) {
	nullable := strings.HasPrefix(t, "Nullable(")
	switch strings.TrimSuffix(strings.TrimPrefix(t, "Nullable("), ")") {
	case "String":
		dest, get = slot[string](nullable, nil)
	case "Int16":
		dest, get = slot[int16](nullable, nil)
	case "Int32":
		dest, get = slot[int32](nullable, nil)
	case "Int64":
		dest, get = slot[int64](nullable, nil)
	case "UInt64":
		dest, get = slot[uint64](nullable, nil)
	case "Float64":
		dest, get = slot[float64](nullable, nil)
	case "UInt8":
		dest, get = slot(nullable, func(v uint8) any { return v != 0 })
	default:
		return nil, nil, fmt.Errorf("cannot read ClickHouse type %s", t)
	}
	return dest, get, nil
}

// slot is scanSlot for a Go type; conv, when set, turns a value into the appender's.
func slot[T any](nullable bool, conv func(T) any) (any, func() any) {
	if conv == nil {
		conv = func(v T) any { return v }
	}
	if nullable {
		p := new(*T)
		return p, func() any {
			if *p == nil {
				return nil
			}
			return conv(**p)
		}
	}
	p := new(T)
	return p, func() any { return conv(*p) }
}

// clusterRoutes returns an in-memory DuckDB database whose requests table has one row per
// method and route of the cluster's rows: what query.ResolveEndpoint reads.
func clusterRoutes(ctx context.Context, cl *Cluster) (*sql.DB, error) {
	db, err := ingest.Open(ctx, "")
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		defer conn.Close()
		_, err = conn.ExecContext(ctx, "CREATE TABLE routes (method VARCHAR, route VARCHAR)")
	}
	if err == nil {
		_, err = copyRows(ctx, cl, conn, "routes",
			"SELECT DISTINCT method, route FROM "+cl.Table("requests")+" WHERE route IS NOT NULL", nil, func(v []any) []any { return v })
	}
	if err == nil {
		// file_id and line must be given: the place of the row in this list
		_, err = conn.ExecContext(ctx, "INSERT INTO requests (file_id, line, method, route) SELECT 0, row_number() OVER (), method, route FROM routes")
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("read the cluster's routes: %w", err)
	}
	return db, nil
}

// runCluster runs any SQL statement on the cluster's server (retrylens query), in the
// cluster's database, read-only unless write, and returns its columns and rows.
func runCluster(ctx context.Context, cl *Cluster, q string, write bool) (cols []string, out [][]any, err error) {
	if !write {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"readonly": 2}))
	}
	rows, err := cl.Conn.Query(ctx, q)
	if errors.Is(err, io.EOF) {
		return nil, nil, nil // a statement that returns no rows (CREATE, INSERT)
	}
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols = rows.Columns()
	types := rows.ColumnTypes()
	for rows.Next() {
		dest := make([]any, len(types))
		for i, t := range types {
			dest[i] = reflect.New(t.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		vals := make([]any, len(dest))
		for i, d := range dest {
			v := reflect.ValueOf(d).Elem()
			for v.Kind() == reflect.Pointer {
				if v.IsNil() {
					break
				}
				v = v.Elem()
			}
			if v.Kind() == reflect.Pointer {
				continue // NULL
			}
			vals[i] = v.Interface()
		}
		out = append(out, vals)
	}
	return cols, out, rows.Err()
}

// boolInt is b as ClickHouse 18.16 writes it (it has no true or false).
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nullText is s, or nil (NULL) when it is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
