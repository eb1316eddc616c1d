// Package query computes retrylens's metrics from the database with SQL. It is, with
// ingest, the only code that talks to DuckDB; the SQL lives in the .sql files beside it.
//
// A report is computed in two stages. Stage one (prepare.sql) links the rows of the range
// into logical requests and counts them into the count tables of contract.go, once per
// report; stage two computes every figure from those tables alone. A Set of every row
// with the default linking reads the same tables as ingest stored them once for all
// reports (cache.go): stage one then costs nothing.
package query

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/retrylens/retrylens/judge"
)

//go:embed *.sql
var sqlFiles embed.FS

// sqlTmpl holds every statement. Template fields are chosen by the program, never by the
// user: {{.Key}} a grouping expression, {{.Table}} the Set's table.
var sqlTmpl = template.Must(template.New("").Funcs(template.FuncMap{"retryableFailure": retryableFailureSQL,
	"throttleCode": throttleCodeSQL, "retryableCode": retryableCodeSQL, "readOperation": readOperationSQL,
	"rowCounts": func() string { return RowCounts(DuckDB) },
	"rowSums":   rowSums, "belowCap": belowCapSQL, "minute": minuteSQL, "orNull": orNull,
	"operationUnknown": operationUnknownSQL, "codeUnknown": codeUnknownSQL, "unjudged": unjudgedSQL}).ParseFS(sqlFiles, "*.sql"))

// retryableStatuses are the answers, besides every 5xx, that a client retries: the
// request timed out (408), was throttled (429) or got no answer it waited for (499, 0:
// abandoned). Inference (--infer-attempts) and the budgets' failure accounting read this
// one definition (RetryableFailure, and its SQL).
var retryableStatuses = []int{0, 408, 429, 499}

// RetryableFailure reports whether an answer is one a client retries.
func RetryableFailure(status int) bool {
	return status >= 500 || slices.Contains(retryableStatuses, status)
}

// retryableFailureSQL is RetryableFailure of the SQL expression col (NULL when col is).
func retryableFailureSQL(col string) string {
	codes := make([]string, len(retryableStatuses))
	for i, c := range retryableStatuses {
		codes[i] = strconv.Itoa(c)
	}
	return fmt.Sprintf("(%s IN (%s) OR %s >= 500)", col, strings.Join(codes, ", "), col)
}

// Options selects the rows of a Set and how they are linked.
type Options struct {
	Since, Until  time.Time     // [Since, Until); a zero bound is open
	Route         string        // only this route; "" for all
	Method        string        // only this method; "" for all
	MaxGap        time.Duration // heuristic links and inference: at most this between attempts (default 60 s)
	InferAttempts bool          // give untagged rows inferred attempt numbers
	NoCache       bool          // link the rows again even when the stored cache would do
	Rules         []judge.Rule  // the alert rules, which give verdicts too; nil: DefaultRules
	Throttle      []int         // the statuses that throttle (loops, blind retries); nil: 429
	// Counted says that the rows no linking can change were counted where they are
	// stored (a ClickHouse cluster's shards: package cluster) into tables of the Set's
	// database, which the Set adds to its row count tables: counted_time (per second, with
	// in_range, the range's and its context's), counted_groups (per minute, the range's)
	// and counted_span (the range's first and last time). The database's requests table
	// holds the other rows, which are all that Attempts and EachAttempt see (a budget's
	// caller reads every row instead). Implies NoCache.
	Counted bool
	// Answers, when set, looks up the answers stored for every row (a cluster's, see
	// backend) by name (ok false: none), and the database holds nothing yet: the Set
	// answers what they hold, and its first question they do not hold calls Fill, which
	// must bring the rows and counts the Set then builds its tables from (as Counted
	// says), as if it had been opened without Answers. Only for every row with the
	// default linking.
	Answers func(ctx context.Context, name string) (answer []byte, ok bool, err error)
	Fill    func(ctx context.Context) error
	// Cut says that the database holds the stored cache's tables (Refresh's, a cluster's:
	// see backend) cut to the range, a range of whole minutes with the default linking, as
	// cache_<name> (CutTables), and counted_span (as Counted), but no rows: the Set reads
	// them as a DuckDB file's Set of such a range reads its cache. The first question that
	// reads rows (a window finer than a minute, Attempts, EachAttempt) calls Fill, which
	// must bring the rows and counts as Counted says, and the Set builds its tables again
	// from them. Needs Counted and Fill.
	Cut bool
	// PartRows, when above 0, links the rows in parts of about that many (parts.go) when
	// the Set is of every row with the default linking: the same tables, with stage one's
	// memory that of a part. Such a Set keeps its count tables but not its rows linked:
	// it answers what stored answers ask (Answer), not windows under a minute, Attempts or
	// EachAttempt. A cluster's loader sets it.
	PartRows int
}

// Context returns the time a Set of o reads around its range (see rangeContext): zero
// for an open bound.
func (o Options) Context() (before, after time.Time) {
	maxGap, rules := o.MaxGap, o.Rules
	if maxGap <= 0 {
		maxGap = DefaultMaxGap
	}
	if rules == nil {
		rules = judge.DefaultRules()
	}
	around := rangeContext(maxGap, rules)
	return moved(o.Since, -around), moved(o.Until, around)
}

// whole reports whether o selects every row with the default linking: what the stored
// cache holds (see Refresh).
func (o Options) whole() bool {
	return o.Since.IsZero() && o.Until.IsZero() && o.defaultLinking()
}

// defaultLinking reports whether o links every row of its range the way the cache does.
func (o Options) defaultLinking() bool {
	return o.Route == "" && o.Method == "" && o.MaxGap == DefaultMaxGap && !o.InferAttempts
}

// DefaultMaxGap is the default --max-gap (docs/metrics.md).
const DefaultMaxGap = 60 * time.Second

// The bounds of an open range, as SQL.
const (
	openSince = "TIMESTAMP '0001-01-01'"
	openUntil = "TIMESTAMP '9999-12-31'"
)

// rangeContext is how much time before and after a --since/--until range a report reads,
// so that the range counts what its window of a report over every row counts
// (docs/metrics.md, "Ranges"): the logical requests whose first attempt is in it, with
// all their attempts (ten gaps of maxGap: a chain of ten attempts, each at most maxGap
// after the one before), and the alerts that cross its bounds (four times the longest
// sustain, for minutes that sustain them on the other side of a bound).
func rangeContext(maxGap time.Duration, rules []judge.Rule) time.Duration {
	around := 10 * maxGap
	for _, r := range rules {
		around = max(around, 4*r.Sustain)
	}
	return around
}

// Set is the rows of one report and their count tables (stage one, prepare.sql), built
// once; every figure is a query over those tables (stage two). Close it.
type Set struct {
	conn     setConn // a connection of its own (Open), or the transaction that stores answers
	table    string
	cached   bool // the count tables are views of the stored cache (see Refresh)
	counted  bool // Options.Counted
	partRows int  // Options.PartRows
	parts    int  // how many parts build linked the rows in (parts.go), 0 for at once
	lit      prepareLiterals
	throttle string // Options.Throttle as an SQL list of integers

	buckets      map[int][]bucket                                    // the time table's counts, per grain in seconds (see buckets)
	rules        []judge.Rule                                        // for verdicts
	since, until time.Time                                           // the range; zero when open
	recorded     map[string][]byte                                   // the answers computed, by name, when storeAnswers asks (see answered)
	answers      func(context.Context, string) ([]byte, bool, error) // the stored answers of this Set's rows, if any (see answered)
	fill         func(context.Context) error                         // Options.Fill, until ready or withRows has called it
	cut          bool                                                // Options.Cut, until withRows has read the rows
	storedParts  bool                                                // the Set reads the stored cache of its database, whose partial answers it merges (partials.go)
	ownParts     map[string]bool                                     // the partial tables the Set computed of its own, by name
}

var setID atomic.Int64

// linkSteps are the statements of prepare.sql that select and link a Set's rows; the
// count tables (CountTables) follow.
var linkSteps = []string{"prepare_params", "prepare_rows", "prepare_chain", "prepare_all", "prepare_multi"}

// minuteGrain is the time tables' grain in seconds, the stored cache's.
const minuteGrain = 60

// Open prepares the rows selected by o and their count tables on a connection of its own.
// A Set with the default linking over every row, or a range of whole minutes, reads the
// stored cache's tables (see Refresh), cut to the range, when it matches the database.
func Open(ctx context.Context, db *sql.DB, o Options) (*Set, error) {
	if o.MaxGap <= 0 {
		o.MaxGap = DefaultMaxGap
	}
	if o.Answers != nil && (!o.whole() || o.Fill == nil) {
		return nil, errors.New("query: Answers needs every row, the default linking and Fill")
	}
	if o.Cut && (o.whole() || !o.defaultLinking() || !wholeMinute(o.Since) || !wholeMinute(o.Until) || !o.Counted || o.Fill == nil) {
		return nil, errors.New("query: Cut needs a range of whole minutes, the default linking, Counted and Fill")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s, route, method := newSet(conn, fmt.Sprintf("report_rows_%d", setID.Add(1)), o)
	if o.Answers != nil {
		s.answers, s.fill = o.Answers, o.Fill
		return s, nil // built by ready, at the first question the answers do not hold
	}
	if o.Cut {
		s.cached, s.cut, s.fill, s.lit.Bounded = true, true, o.Fill, true
	}
	if o.defaultLinking() && !o.NoCache && !o.Counted {
		// A range of whole minutes is cut from the cache; one around every row is all of it.
		all, err := o.whole(), error(nil)
		if !all {
			all, err = coversAll(ctx, conn, o.Since, o.Until)
		}
		if err == nil && (all || wholeMinute(o.Since) && wholeMinute(o.Until)) {
			s.lit.Bounded = !all
			s.cached, err = cacheFresh(ctx, conn)
			if s.cached && err == nil {
				s.storedParts, err = partsFresh(ctx, conn)
			}
			if s.cached && all {
				s.answers = s.storedAnswer
			}
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	if err := s.build(ctx, route, method); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newSet is a Set of o's rows on conn, its tables named after table, before stage one;
// route and method are the parameters build selects by. o.MaxGap is set.
func newSet(conn setConn, table string, o Options) (s *Set, route, method any) {
	s = &Set{conn: conn, table: table, rules: o.Rules, buckets: map[int][]bucket{}, throttle: defaultThrottle,
		since: o.Since, until: o.Until}
	if len(o.Throttle) > 0 {
		codes := make([]string, len(o.Throttle))
		for i, c := range o.Throttle {
			codes[i] = strconv.Itoa(c)
		}
		s.throttle = strings.Join(codes, ", ")
	}
	if s.rules == nil {
		s.rules = judge.DefaultRules()
	}
	if o.Route != "" {
		route = o.Route
	}
	if o.Method != "" {
		method = o.Method
	}
	before, after := o.Context()
	s.lit = prepareLiterals{
		Since:     timeLiteral(o.Since, openSince),
		Until:     timeLiteral(o.Until, openUntil),
		Before:    timeLiteral(before, openSince),
		After:     timeLiteral(after, openUntil),
		MaxGap:    strconv.FormatFloat(o.MaxGap.Seconds(), 'f', -1, 64),
		Infer:     strconv.FormatBool(o.InferAttempts),
		HasRoute:  o.Route != "",
		HasMethod: o.Method != "",
	}
	s.counted, s.partRows = o.Counted, o.PartRows
	return s, route, method
}

// ready makes a Set opened with Options.Answers whole, the first time a question needs its
// tables: Fill brings the rows and counts, and stage one builds the tables from them. A
// Set cut from a stored cache (Options.Cut) has its tables.
func (s *Set) ready(ctx context.Context) error {
	if s.cut {
		return nil
	}
	return s.withRows(ctx)
}

// withRows is ready for a question that reads the rows themselves: a Set cut from a
// stored cache has none, so Fill brings them and stage one builds the Set's tables again
// from them, under a new name (the cut's views keep theirs until Close).
func (s *Set) withRows(ctx context.Context) error {
	if s.fill == nil {
		return nil
	}
	fill := s.fill
	s.fill = nil
	if err := fill(ctx); err != nil {
		return fmt.Errorf("read the rows: %w", err)
	}
	if s.cut {
		s.cut, s.cached, s.lit.Bounded, s.storedParts = false, false, false, false
		s.table = fmt.Sprintf("report_rows_%d", setID.Add(1))
	}
	return s.build(ctx, nil, nil)
}

// build runs stage one: it links the rows, then builds the count tables, or, when the
// Set reads the cache, names the cache's tables as its own.
// cancelledFromAttempts makes the Set's cancelled rows a view of its attempts table,
// which holds every row the overlap windows flagged when the Set is of every row.
func (s *Set) cancelledFromAttempts() string {
	return "CREATE OR REPLACE TEMP VIEW " + s.table + "_cancelled AS SELECT file_id, line FROM " + s.table + "_attempts WHERE cancelled"
}

func (s *Set) build(ctx context.Context, route, method any) error {
	if !s.cached {
		steps := slices.Concat(linkSteps, buildSteps(func(CountTable) bool { return true }))
		parts, err := s.inParts(ctx)
		if err == nil && parts > 0 {
			s.parts = parts
			err = s.buildInParts(ctx, route, method, parts, steps)
		} else if err == nil {
			err = prepare(ctx, s.conn, s.table, "TEMP TABLE", s.lit, []any{route, method}, steps)
			if err == nil && s.lit.Before == openSince && s.lit.After == openUntil {
				// Of every row, the attempts table holds every row prepare_multi
				// flagged: the cancelled rows are read from it, and the windows'
				// working table, as many rows as it, goes (it left the 10M cluster
				// loader's Set no room under 256 MB to add the counts up).
				err = execAll(ctx, s.conn, s.cancelledFromAttempts(), "DROP TABLE "+s.table+"_multi")
			}
		}
		if err != nil {
			return err
		}
		return s.addCounted(ctx, minuteGrain)
	}
	lit := s.lit
	lit.Cached = true
	return prepare(ctx, s.conn, s.table, "TEMP TABLE", lit, []any{route, method},
		[]string{"cached_chain", "prepare_params", "prepare_rows", "prepare_all", "cached_tables"})
}

// addCounted adds the rows counted where they are stored (Options.Counted) to the Set's
// row count tables of grain seconds: the time table, and at a minute the edges and groups.
func (s *Set) addCounted(ctx context.Context, grain int) error {
	if !s.counted {
		return nil
	}
	table := func(name string) CountTable {
		for _, t := range CountTables {
			if t.Name == name {
				return t
			}
		}
		panic("no count table " + name)
	}
	of := func(t CountTable, from string) string {
		cols := strings.Join(t.Cols[1:], ", ") // after ts
		return fmt.Sprintf("(SELECT time_bucket(to_seconds(%d), ts, TIMESTAMP '1970-01-01') AS ts, %s FROM %s)", grain, cols, from)
	}
	timed, sfx := table("time"), grainSuffix(grain)
	qs := sumInto(s.table+"_time"+sfx, timed, map[string]int{s.table + "_time" + sfx: 1, of(timed, "counted_time WHERE in_range"): 1})
	if grain == minuteGrain {
		qs = append(qs, sumInto(s.table+"_edges", timed, map[string]int{s.table + "_edges": 1, of(timed, "counted_time WHERE NOT in_range"): 1})...)
		groups := table("groups")
		qs = append(qs, sumInto(s.table+"_groups", groups, map[string]int{s.table + "_groups": 1, "counted_groups": 1})...)
	}
	return execAll(ctx, s.conn, qs...)
}

// grainSuffix names the time-keyed tables of a grain: none for a minute.
func grainSuffix(grain int) string {
	if grain == minuteGrain {
		return ""
	}
	return fmt.Sprintf("_%ds", grain)
}

// prepare runs the named statements of prepare.sql for table, creating its tables as kind
// ("TEMP TABLE" for a Set, "TABLE" for the cache), with time buckets of a minute.
func prepare(ctx context.Context, conn execer, table, kind string, lit prepareLiterals, params []any, steps []string) error {
	return prepareGrain(ctx, conn, table, kind, lit, params, steps, minuteGrain)
}

func prepareGrain(ctx context.Context, conn execer, table, kind string, lit prepareLiterals, params []any, steps []string, grain int) error {
	if params == nil {
		params = []any{nil, nil} // every route and method
	}
	run := func(name string, level int, last bool) error {
		var q bytes.Buffer
		err := sqlTmpl.ExecuteTemplate(&q, name, struct {
			Table, Kind, Suffix string
			Grain, Level        int
			Last                bool
			prepareLiterals
		}{table, kind, grainSuffix(grain), grain, level, last, lit})
		if err == nil {
			var args []any
			if name == "prepare_params" {
				args = params
			}
			_, err = conn.ExecContext(ctx, q.String(), args...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if slices.Contains(steps, "prepare_rows") {
		var err error
		if lit.Layers, err = Layered(ctx, conn); err != nil {
			return err
		}
	}
	for _, name := range steps {
		if name == "prepare_chain" {
			if err := linkHeuristic(ctx, conn, table, run); err != nil {
				return err
			}
		}
		if err := run(name, 0, false); err != nil {
			return err
		}
	}
	return nil
}

// maxLevels is how many attempt numbers the heuristic links one by one; attempts past it
// start chains of their own (a client's attempt numbers rarely pass a handful).
const maxLevels = 32

// linkHeuristic links the rows without a strong key into chains, attempt number by attempt
// number (prepare.sql, hlink_level): <table>_hlink, which prepare_chain reads.
func linkHeuristic(ctx context.Context, conn execer, table string, run func(string, int, bool) error) error {
	if err := run("prepare_hrows", 0, false); err != nil {
		return err
	}
	if err := run("prepare_hlink", 0, false); err != nil {
		return err
	}
	q, ok := conn.(querier)
	if !ok {
		return fmt.Errorf("linking: %T cannot read", conn)
	}
	var top sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT max(attempt) FROM "+table+"_hrows").Scan(&top); err != nil {
		return fmt.Errorf("linking: %w", err)
	}
	for level := 1; top.Valid && level <= int(min(top.Int64, maxLevels)); level++ {
		if err := run("hlink_level", level, level == maxLevels); err != nil {
			return err
		}
	}
	return nil
}

// Cached reports whether the Set reads the stored cache (see Refresh) rather than
// linking its rows again.
func (s *Set) Cached() bool { return s.cached }

// Close releases the Set's connection and, with it, its temporary tables and views: the
// connection is closed rather than returned to the pool, which DuckDB's temporary catalog
// goes with (a tenth of a small report's time went into dropping them one by one).
func (s *Set) Close() error {
	conn, ok := s.conn.(*sql.Conn)
	if !ok {
		return nil // a transaction's (storeAnswers): its owner's connection takes the tables
	}
	return discard(conn)
}

// discard closes conn for good, not back into the pool, and with it every temporary
// table and view made on it.
func discard(conn *sql.Conn) error {
	err := conn.Raw(func(any) error { return driver.ErrBadConn })
	if errors.Is(err, driver.ErrBadConn) {
		err = nil
	}
	if cerr := conn.Close(); err == nil && !errors.Is(cerr, sql.ErrConnDone) {
		err = cerr
	}
	return err
}

// lister can run statements and read rows: a connection or a transaction.
type lister interface {
	execer
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// setConn is what a Set runs its statements on.
type setConn interface {
	lister
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dropTemp drops the temporary views and tables named prefix or prefix_…: what stage one
// made for a Set or for the cache's build.
func dropTemp(ctx context.Context, conn lister, prefix string) error {
	var drops []string
	rows, err := conn.QueryContext(ctx, `SELECT 'VIEW ' || view_name FROM duckdb_views() WHERE temporary AND (view_name = $1 OR starts_with(view_name, $1 || '_'))
		UNION ALL SELECT 'TABLE ' || table_name FROM duckdb_tables() WHERE temporary AND (table_name = $1 OR starts_with(table_name, $1 || '_'))`, prefix)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return err
		}
		drops = append(drops, "DROP "+d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Views first: they read the tables.
	slices.SortStableFunc(drops, func(a, b string) int { return strings.Compare(b[:10], a[:10]) })
	return execAll(ctx, conn, drops...)
}

// statement renders a stage-two query: key is a grouping expression over the columns of
// the count tables it reads, table the row count table (time or groups) and grain the
// time tables' grain.
func (s *Set) statement(name, key, table string, grain int) (string, error) {
	var q bytes.Buffer
	suffix := grainSuffix(grain)
	if table == "groups" {
		suffix = "" // the logical tables grouped by columns, whatever their grain
	}
	counts := s.table + "_" + table + suffix
	if table == "routes" {
		counts = cacheName + "_" + routeTotals.Name // every row's, stored (partials.go)
	}
	err := sqlTmpl.ExecuteTemplate(&q, name, struct{ Key, Table, Counts, Logical, Firsts, Throttle string }{
		key, s.table, counts, s.table + "_logical" + suffix, s.table + "_firsts" + suffix, s.throttle})
	if err != nil {
		return "", err
	}
	return q.String(), nil
}

// prepareLiterals are values the program formats into prepare.sql itself: parsed times,
// a number and a boolean, never text a user typed.
type prepareLiterals struct {
	Since, Until, MaxGap, Infer string
	Before, After               string // the context around the range: rows read to link it
	HasRoute, HasMethod         bool   // filter on the route, the method in _p
	Cached                      bool   // the count tables are the stored cache's (see prepare_rows)
	Bounded                     bool   // a cached Set's range leaves rows out: its tables are cut to it
	Sorted                      bool   // the count tables are stored: built in the order ranges cut them by (cacheOrder)
	Where                       string // one more condition on the rows (cache.go's update)
	From                        string // the table of rows to read instead of requests (cache.go's update)
	Layers                      bool   // the rows hold traces and gateway lines: the lines of the spans' attempts are joined into them (prepareGrain sets it)
	Coarse                      string // the table of loads timed to the second, when built before (parts.go)
	Parts, Part                 int    // how many parts prepare_parts makes, and the one prepare_part reads (parts.go)
	Whole                       string // the Set whose parts prepare_part reads
}

// wholeMinute reports whether t is a whole minute (or open): a range bound the cache's
// minute buckets can cut at.
func wholeMinute(t time.Time) bool {
	return t.Equal(t.Truncate(time.Minute))
}

// moved is t moved by d; a zero t (an open bound) stays zero.
func moved(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}

// timeLiteral formats t as a DuckDB TIMESTAMP literal (UTC), or open when t is zero.
func timeLiteral(t time.Time, open string) string {
	if t.IsZero() {
		return open
	}
	return "TIMESTAMP '" + t.UTC().Format("2006-01-02 15:04:05.999999") + "'"
}

// Group is the metrics of one value of a grouping (--by).
type Group struct {
	Key string // "GET /api/users/:id" for routes; the status, attempt or host otherwise
	judge.Metrics
}

// Groupings are the values --by accepts, with the row expression each groups by.
var Groupings = map[string]string{
	"route":   "coalesce(method, '-') || ' ' || coalesce(route, '-')",
	"method":  "coalesce(method, '-')",
	"status":  "coalesce(CAST(status AS VARCHAR), '-')",
	"attempt": "coalesce(CAST(attempt AS VARCHAR), 'untagged')",
	"host":    "coalesce(host, upstream_addr, '-')",
}

// Summary returns the metrics over the whole Set: the sum of its time table (see
// buckets), rows without a time included.
func (s *Set) Summary(ctx context.Context) (judge.Metrics, error) {
	bs, err := s.bucketsOf(ctx, minuteGrain)
	if err != nil {
		return judge.Metrics{}, err
	}
	var c counts
	for _, b := range bs {
		c.add(b.c)
	}
	return c.metrics(s.rules), nil
}

// bucket is the counts of one time bucket; valid is false for the rows without a time.
type bucket struct {
	start time.Time
	valid bool
	c     counts
}

// bucketsOf returns the counts per time bucket of grain seconds, computed once per Set
// and grain: the summary and every window add them up. A grain finer than a minute
// builds the time-keyed count tables again at that grain, from the Set's linked rows.
func (s *Set) bucketsOf(ctx context.Context, grain int) ([]bucket, error) {
	if bs, ok := s.buckets[grain]; ok {
		return bs, nil
	}
	bs, err := answered(ctx, s, fmt.Sprintf("Buckets %d", grain), func() ([]bucket, error) { return s.countBuckets(ctx, grain) })
	if err == nil {
		s.buckets[grain] = bs
	}
	return bs, err
}

func (s *Set) countBuckets(ctx context.Context, grain int) ([]bucket, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if grain != minuteGrain {
		if err := s.withRows(ctx); err != nil {
			return nil, err
		}
		steps := buildSteps(func(t CountTable) bool { return t.Timed })
		if err := prepareGrain(ctx, s.conn, s.table, "TEMP TABLE", s.lit, nil, steps, grain); err != nil {
			return nil, err
		}
		if err := s.addCounted(ctx, grain); err != nil {
			return nil, err
		}
	}
	entries, err := s.grouped(ctx, "ts", "time", grain, nil, func() any { return new(sql.NullTime) })
	if err != nil {
		return nil, err
	}
	bs := make([]bucket, len(entries))
	for i, e := range entries {
		t := e.k.(*sql.NullTime)
		bs[i] = bucket{start: t.Time.UTC(), valid: t.Valid, c: e.c}
	}
	return bs, nil
}

// Windows returns the metrics per time bucket of the given width, for the buckets that
// have rows, oldest first. Buckets start on whole multiples of the width since the epoch,
// shifted by offset (a time zone's offset from UTC, so that days start at local
// midnight). A logical request belongs to the window of its first attempt. Windows add up
// the time table's buckets: a minute's, or for widths and offsets that are not whole
// minutes, the largest grain that divides them and a minute (docs/internals.md).
func (s *Set) Windows(ctx context.Context, width, offset time.Duration) ([]judge.Window, error) {
	if width < time.Second || width%time.Second != 0 || offset%time.Second != 0 {
		return nil, fmt.Errorf("window %v at offset %v: want whole numbers of seconds", width, offset)
	}
	w, off := int64(width/time.Second), int64(offset/time.Second)
	grain := int(gcd(gcd(minuteGrain, w), off))
	bs, err := s.bucketsOf(ctx, grain)
	if err != nil {
		return nil, err
	}
	var ws []judge.Window
	var cs []counts
	for _, b := range bs {
		if !b.valid {
			continue // rows without a time belong to no window
		}
		u := b.start.Unix() + off
		start := time.Unix(u-((u%w)+w)%w-off, 0).UTC()
		if n := len(ws); n == 0 || !ws[n-1].Start.Equal(start) {
			ws = append(ws, judge.Window{Start: start})
			cs = append(cs, counts{})
		}
		cs[len(cs)-1].add(b.c)
	}
	for i := range ws {
		ws[i].Metrics = cs[i].metrics(s.rules)
	}
	return ws, nil
}

// gcd is the greatest common divisor of |a| and |b|.
func gcd(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// GroupingKey returns the row expression for a grouping: one name of Groupings, or
// several joined by commas ("route,status,attempt"), whose values are then joined by
// spaces.
func GroupingKey(by string) (string, error) {
	var parts []string
	for _, name := range strings.Split(by, ",") {
		key, ok := Groupings[strings.TrimSpace(name)]
		if !ok {
			return "", fmt.Errorf("unknown grouping %q", name)
		}
		parts = append(parts, key)
	}
	return strings.Join(parts, " || ' ' || "), nil
}

// Groups returns the metrics per value of a grouping (see GroupingKey), the most retries
// first, each judged against the alert rules on its own minutes.
func (s *Set) Groups(ctx context.Context, by string) ([]Group, error) {
	gs, _, err := s.TopGroups(ctx, by, 0)
	return gs, err
}

// TopGroups is Groups cut to the first top groups with retries (0: every group), what a
// table shows: only those are counted in full and judged on their minutes, the work that
// grows with the groups. more is how many groups with retries it left out.
func (s *Set) TopGroups(ctx context.Context, by string, top int) (gs []Group, more int, err error) {
	r, err := s.rankedGroups(ctx, by, top)
	gs = make([]Group, len(r.Groups))
	for i, g := range r.Groups {
		gs[i] = g.group(s.rules)
	}
	return gs, r.More, err
}

// rankedGroups is TopGroups's answer: the groups' counts, before their figures are
// computed (which answers that are only stored need not: every endpoint's took 100 MB).
func (s *Set) rankedGroups(ctx context.Context, by string, top int) (rankedGroups, error) {
	return answered(ctx, s, fmt.Sprintf("TopGroups %q %d", by, top), func() (r rankedGroups, err error) {
		r.Groups, r.More, err = s.topGroups(ctx, by, top)
		return r, err
	})
}

type rankedGroups struct {
	Groups []groupCounts
	More   int
}

// groupCounts is what a Group is computed from: its key, its counts, and the alert rules
// that fired on its minutes. Stored answers keep groups so (answers.go): a third of the
// JSON of their metrics, which every endpoint of 100K routes took a second to decode.
type groupCounts struct {
	key   string
	c     counts
	fired []string
}

func (g groupCounts) group(rules []judge.Rule) Group {
	return Group{Key: g.key, Metrics: judge.Judged(g.c.metrics(rules), g.fired, rules)}
}

// DefaultTop is how many endpoints with retries a report's table shows by default.
const DefaultTop = 10

func (s *Set) topGroups(ctx context.Context, by string, top int) (gs []groupCounts, more int, err error) {
	key, err := GroupingKey(by)
	if err != nil {
		return nil, 0, err
	}
	table, only := "groups", []string(nil)
	// Every row of the stored cache, by route: the stored route totals rank the routes and
	// count those shown; only the alerts read their minutes.
	totals := top > 0 && by == "route" && s.storedParts && !s.lit.Bounded
	counts := "groups"
	if totals {
		counts = "routes"
	}
	// keep makes the Set's table name of the rows of from in the groups shown
	keep := func(name, from string) error {
		q := "CREATE OR REPLACE TEMP TABLE " + s.table + "_" + name + " AS SELECT * FROM " + from + " WHERE (" + key + ") IN (SELECT unnest($1::VARCHAR[]))"
		_, err := s.conn.ExecContext(ctx, q, only)
		return err
	}
	if top > 0 {
		rank, err := s.statement("rank_groups.sql", key, counts, minuteGrain)
		if err != nil {
			return nil, 0, err
		}
		retried := 0
		only = []string{}
		err = s.rowsOf(ctx, "rank_groups.sql", rank, []any{top}, func(rows *sql.Rows) error {
			var k string
			err := rows.Scan(&k, &retried)
			only = append(only, k)
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		more = retried - len(only)
		// the rows of those groups, which the counts and the alerts below read
		table, counts = "gtop", "gtop"
		from := s.table + "_groups"
		if totals {
			counts, from = "rtop", cacheName+"_"+routeTotals.Name
		}
		if err := keep(counts, from); err != nil {
			return nil, 0, err
		}
	}
	entries, err := s.grouped(ctx, key, counts, minuteGrain, only, func() any { return new(sql.NullString) })
	if err != nil {
		return nil, 0, err
	}
	gs = make([]groupCounts, len(entries))
	for i, e := range entries {
		gs[i] = groupCounts{key: e.k.(*sql.NullString).String, c: e.c}
	}
	sortGroups(gs)
	var before func() error
	if totals {
		before = func() error { return keep("gtop", s.table+"_groups") }
	}
	fired, err := s.groupAlerts(ctx, key, table, gs, before)
	for i := range gs {
		if rules := fired[gs[i].key]; len(rules) > 0 {
			gs[i].fired = rules
		}
	}
	return gs, more, err
}

// Alerts evaluates the Set's alert rules on its one-minute windows and on those of the
// context around its range (the edges table), and returns the alerts that overlap the
// range: one that fires across a bound is reported by each side, as a report over every
// row reports it in both windows.
func (s *Set) Alerts(ctx context.Context) ([]judge.Alert, error) {
	return answered(ctx, s, "Alerts", func() ([]judge.Alert, error) { return s.alerts(ctx) })
}

func (s *Set) alerts(ctx context.Context) ([]judge.Alert, error) {
	bs, err := s.bucketsOf(ctx, minuteGrain)
	if err != nil {
		return nil, err
	}
	byMinute := map[time.Time]*counts{}
	add := func(start time.Time, c counts) {
		if byMinute[start] == nil {
			byMinute[start] = &counts{}
		}
		byMinute[start].add(c)
	}
	for _, b := range bs {
		if b.valid {
			add(b.start, b.c)
		}
	}
	var sc countScan
	err = s.queryOn(ctx, "metrics.sql", "ts", "edges", minuteGrain, nil, func(rows *sql.Rows) error {
		var start sql.NullTime
		var c counts
		if err := sc.scan(rows, &start, &c); err != nil {
			return err
		}
		if start.Valid {
			add(start.Time.UTC(), c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	minutes := make([]judge.Window, 0, len(byMinute))
	for start, c := range byMinute {
		minutes = append(minutes, judge.Window{Start: start, Metrics: c.metrics(s.rules)})
	}
	slices.SortFunc(minutes, func(a, b judge.Window) int { return a.Start.Compare(b.Start) })
	return judge.AlertsIn(minutes, time.Minute, s.rules, s.since, s.until), nil
}

// groupAlerts returns, per group of gs (grouped by the row expression key), the rules that
// fired on the group's own minutes: the verdict of a group follows the same alerts as the
// range's and the windows'. Only the minutes of groups that have a minute with the
// evidence an alert needs are read (alert_groups.sql), among the groups whose totals have
// it: a report of 100K routes has a few of them, not millions of minutes.
//
// before, when set, is run first when some group has that evidence: it makes table.
func (s *Set) groupAlerts(ctx context.Context, key, table string, gs []groupCounts, before func() error) (map[string][]string, error) {
	first, retries := judge.LeastEvidence(s.rules)
	fired := map[string][]string{}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	var keys []string // a minute has at most its group's first attempts and retries
	for _, g := range gs {
		if first >= 0 && g.c.first >= first && g.c.retries >= retries {
			keys = append(keys, g.key)
		}
	}
	if len(keys) == 0 {
		return fired, nil
	}
	if before != nil {
		if err := before(); err != nil {
			return nil, err
		}
	}
	candidates := s.table + "_galert_keys"
	q, err := s.statement("alert_groups.sql", key, table, minuteGrain)
	if err != nil {
		return nil, err
	}
	if _, err := s.conn.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+candidates+" AS "+q, first, retries, keys); err != nil {
		return nil, fmt.Errorf("alert_groups.sql: %w", err)
	}
	view := "CREATE OR REPLACE TEMP VIEW " + s.table + "_galert AS SELECT * FROM " + s.table + "_" + table + " WHERE (" + key + ") IN (SELECT k FROM " + candidates + ")"
	if _, err := s.conn.ExecContext(ctx, view); err != nil {
		return nil, err
	}
	minutes := map[string][]judge.Window{}
	var sc countScan
	err = s.queryOn(ctx, "metrics.sql", "CAST(epoch_ms(ts) AS VARCHAR) || ' ' || ("+key+")", "galert", minuteGrain, nil, func(rows *sql.Rows) error {
		var k sql.NullString
		var c counts
		if err := sc.scan(rows, &k, &c); err != nil {
			return err
		}
		ms, g, ok := strings.Cut(k.String, " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !k.Valid || !ok || err != nil {
			return nil // rows without a time belong to no minute
		}
		minutes[g] = append(minutes[g], judge.Window{Start: time.UnixMilli(n).UTC(), Metrics: c.metrics(s.rules)})
		return nil
	})
	for g, ms := range minutes {
		slices.SortFunc(ms, func(a, b judge.Window) int { return a.Start.Compare(b.Start) })
		fired[g] = judge.Fired(judge.Alerts(ms, s.rules))
	}
	return fired, err
}

// keyCounts are the counts of one group (grouped). A slice of pointers: one of 100K
// counts took half a second to grow.
type keyCounts struct {
	k any
	c counts
}

// grouped runs the row and logical metrics grouped by key over the count tables (table:
// "time" at grain, or "groups" or a table of its rows) and adds them up by group (a NULL
// key can come back twice from logical.sql's full join: added, not replaced). only, when
// not nil, are the groups to read the logical counts of (text keys).
func (s *Set) grouped(ctx context.Context, key, table string, grain int, only []string, newKey func() any) ([]*keyCounts, error) {
	var entries []*keyCounts
	byKey := map[string]int{}
	var rowScan, logicalScan countScan
	err := s.queryOn(ctx, "metrics.sql", key, table, grain, nil, func(rows *sql.Rows) error {
		e := &keyCounts{k: newKey()}
		if err := rowScan.scan(rows, e.k, &e.c); err != nil {
			return err
		}
		id := keyID(e.k)
		if i, ok := byKey[id]; ok {
			entries[i].c.add(e.c)
			return nil
		}
		byKey[id] = len(entries)
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	logicalQ, err := s.statement("logical.sql", key, table, grain)
	if err != nil {
		return nil, err
	}
	var args []any
	if only != nil {
		logicalQ, args = "SELECT * FROM ("+logicalQ+") WHERE k IN (SELECT unnest($1::VARCHAR[]))", []any{only}
	}
	err = s.rowsOf(ctx, "logical.sql", logicalQ, args, func(rows *sql.Rows) error {
		k := newKey()
		var c counts
		if err := logicalScan.scan(rows, k, &c); err != nil {
			return err
		}
		if i, ok := byKey[keyID(k)]; ok {
			entries[i].c.add(c)
		}
		return nil
	})
	return entries, err
}

// keyID is a group key as a map key: fmt.Sprint costs more than the query on 100K routes.
func keyID(k any) string {
	switch k := k.(type) {
	case *sql.NullString:
		if !k.Valid {
			return "\x00null"
		}
		return k.String
	case *sql.NullTime:
		if !k.Valid {
			return "\x00null"
		}
		return strconv.FormatInt(k.Time.UnixNano(), 10)
	}
	return fmt.Sprint(k)
}

// Span returns the first and last request time in the Set.
func (s *Set) Span(ctx context.Context) (from, to time.Time, err error) {
	span, err := answered(ctx, s, "Span", func() (span [2]time.Time, err error) {
		span[0], span[1], err = s.span(ctx)
		return span, err
	})
	return span[0], span[1], err
}

func (s *Set) span(ctx context.Context) (from, to time.Time, err error) {
	if err := s.ready(ctx); err != nil {
		return from, to, err
	}
	var f, t sql.NullTime
	if s.counted {
		// the rows counted elsewhere with the range's own
		err = s.conn.QueryRowContext(ctx, `SELECT least(min(ts), (SELECT first FROM counted_span)), greatest(max(ts), (SELECT last FROM counted_span))
			FROM `+s.table+"_lines WHERE in_range").Scan(&f, &t)
		if err != nil {
			return from, to, fmt.Errorf("span: %w", err)
		}
		return f.Time.UTC(), t.Time.UTC(), nil
	}
	// From the range's rows: every one of them is in the Set once, and the plain view
	// lets DuckDB read the ts column alone (the Set's own view took 0.7 s on 10M rows).
	err = s.conn.QueryRowContext(ctx, "SELECT min(ts), max(ts) FROM "+s.table+"_lines WHERE in_range").Scan(&f, &t)
	if err != nil {
		return from, to, fmt.Errorf("span: %w", err)
	}
	return f.Time.UTC(), t.Time.UTC(), nil
}

// Linking counts logical requests by what linked their attempts, and says how good the
// linking is.
type Linking struct {
	IdempotencyKey int64
	InvocationID   int64
	RequestID      int64
	Heuristic      int64
	Inferred       int64
	// Retries is the retries (tagged or inferred attempts ≥ 1), HeuristicRetries those the
	// heuristic linked (client, method and URI: an estimate), Orphans those with no
	// earlier attempt to link to.
	Retries, HeuristicRetries, Orphans int64
	// UntaggedFirsts is the first attempts logged without the attempt header, numbered 0
	// because a tagged retry carries their key.
	UntaggedFirsts int64
	// After2xx is the retries the heuristic linked to an attempt logged 2xx: the client had
	// given up on an answer the gateway logged (a timeout race).
	After2xx int64
}

// HeuristicShare is the share of retries the heuristic linked; above a tenth the logical
// figures are estimates (docs/metrics.md).
func (l Linking) HeuristicShare() float64 {
	if l.Retries == 0 {
		return 0
	}
	return float64(l.HeuristicRetries) / float64(l.Retries)
}

// Strong is the logical requests linked by a key the client sent.
func (l Linking) Strong() int64 { return l.IdempotencyKey + l.InvocationID + l.RequestID }

// Linking returns how the Set's logical requests were linked.
func (s *Set) Linking(ctx context.Context) (Linking, error) {
	return answered(ctx, s, "Linking", func() (Linking, error) { return s.linking(ctx) })
}

func (s *Set) linking(ctx context.Context) (Linking, error) {
	var l Linking
	err := s.merged(ctx, "linking", nil, func(rows *sql.Rows) error {
		var by string
		var n, retries, orphans, untaggedFirsts, after2xx int64
		if err := rows.Scan(&by, &n, &retries, &orphans, &untaggedFirsts, &after2xx); err != nil {
			return err
		}
		l.After2xx += after2xx
		l.Retries += retries
		l.Orphans += orphans
		l.UntaggedFirsts += untaggedFirsts
		switch by {
		case "idempotency_key":
			l.IdempotencyKey = n
		case "invocation_id":
			l.InvocationID = n
		case "request_id":
			l.RequestID = n
		case "heuristic":
			l.Heuristic, l.HeuristicRetries = n, retries
		case "inferred":
			l.Inferred = n
		}
		return nil
	}, need{name: "linking"})
	return l, err
}

// query runs a stage-two statement that reads the Set's tables by name.
func (s *Set) query(ctx context.Context, name string, args []any, each func(*sql.Rows) error) error {
	return s.queryOn(ctx, name, "", "time", minuteGrain, args, each)
}

func (s *Set) queryOn(ctx context.Context, name, key, table string, grain int, args []any, each func(*sql.Rows) error) error {
	q, err := s.statement(name, key, table, grain)
	if err != nil {
		return err
	}
	return s.rowsOf(ctx, name, q, args, each)
}

// rowsOf runs the statement q (of the file name, for errors) and calls each on its rows.
func (s *Set) rowsOf(ctx context.Context, name, q string, args []any, each func(*sql.Rows) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	rows, err := s.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func ptr(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}

// EachAttempt calls fn with the attempt number of every row of the Set (NULL when
// untagged) and whether it was inferred, by file and line: for measuring inference
// against logs whose attempt numbers are known.
func (s *Set) EachAttempt(ctx context.Context, fn func(fileID, line int64, attempt sql.NullInt64, inferred bool)) error {
	if err := s.withRows(ctx); err != nil {
		return err
	}
	rows, err := s.conn.QueryContext(ctx, "SELECT file_id, line, attempt, inferred FROM "+s.table+" WHERE in_range")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f, l int64
		var a sql.NullInt64
		var inf bool
		if err := rows.Scan(&f, &l, &a, &inf); err != nil {
			return err
		}
		fn(f, l, a, inf)
	}
	return rows.Err()
}

// Attempt is one tagged row for a replay: which logical request, which attempt, when it
// started and ended, and what it got.
type Attempt struct {
	Key        string
	N          int
	Start, End time.Time
	Status     int // -1 when the line had none
	RetryAfter string
	Client     string // the client's address, "" when the line had none: its budget's instance
	ErrorCode  string // the upstream's error code where logged: throttles that are not 429
}

// Attempts returns the Set's tagged rows ordered by start time, for replaying them.
func (s *Set) Attempts(ctx context.Context) ([]Attempt, error) {
	if err := s.withRows(ctx); err != nil {
		return nil, err
	}
	rows, err := s.conn.QueryContext(ctx, "SELECT lkey, attempt, started, ts, coalesce(status, -1), coalesce(retry_after, ''), "+
		"coalesce(remote_addr, ''), coalesce(error_code, '') FROM "+
		s.table+" WHERE in_range AND attempt IS NOT NULL AND ts IS NOT NULL ORDER BY started, lkey, attempt")
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.Key, &a.N, &a.Start, &a.End, &a.Status, &a.RetryAfter, &a.Client, &a.ErrorCode); err != nil {
			return nil, err
		}
		a.Start, a.End = a.Start.UTC(), a.End.UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

// Run runs any SQL statement on db (retrylens query) and returns its columns and rows,
// each value as the driver gives it.
func Run(ctx context.Context, db *sql.DB, q string) (cols []string, rows [][]any, err error) {
	return run(db.QueryContext(ctx, q))
}

// Counts returns the rows of the Set's count table name (CountTables), summed by its
// keys and sorted: what every store's stage one must agree on, whichever rows it counted
// where (backend's conformance test).
func (s *Set) Counts(ctx context.Context, name string) (cols []string, rows [][]any, err error) {
	if err := s.ready(ctx); err != nil {
		return nil, nil, err
	}
	for _, t := range CountTables {
		if t.Name != name {
			continue
		}
		q := "SELECT * FROM " + s.table + "_" + name + " ORDER BY ALL"
		if len(t.Keys) > 0 {
			sums := make([]string, len(t.Sums))
			for i, c := range t.Sums {
				sums[i] = fmt.Sprintf("sum(%s)::BIGINT AS %s", c, c)
			}
			q = fmt.Sprintf("SELECT %s, %s FROM %s_%s GROUP BY ALL ORDER BY ALL", strings.Join(t.Keys, ", "), strings.Join(sums, ", "), s.table, name)
		}
		return run(s.conn.QueryContext(ctx, q))
	}
	return nil, nil, fmt.Errorf("no count table %q", name)
}

func run(rs *sql.Rows, err error) (cols []string, rows [][]any, _ error) {
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	if cols, err = rs.Columns(); err != nil {
		return nil, nil, err
	}
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		rows = append(rows, vals)
	}
	return cols, rows, rs.Err()
}

// Layered reports whether the database holds attempts read from traces: a gateway's lines
// of the same attempts, if any, are then joined into the spans (prepare.sql's
// prepare_rows; docs/metrics.md, "Layers"), and the spans are counted (Set.Layers), traces
// alone too.
func Layered(ctx context.Context, conn execer) (bool, error) {
	q, ok := conn.(querier)
	if !ok {
		return false, fmt.Errorf("layers: %T cannot read", conn)
	}
	var layered bool
	err := q.QueryRowContext(ctx, `SELECT coalesce(bool_or(format = 'otel'), false) FROM files`).Scan(&layered)
	if err != nil {
		return false, fmt.Errorf("layers: %w", err)
	}
	return layered, nil
}
