// Package query computes retrylens's metrics from the database with SQL. It is, with
// ingest, the only code that talks to DuckDB; the SQL lives in the .sql files beside it.
//
// A report opens a Set: one connection holding a temporary table of the range's rows with
// their logical-request keys (prepare.sql). Every figure is then a query over that table,
// so linking is computed once per report. A Set of every row with the default linking
// reads instead what ingest stored once for all reports (cache.go): linking then costs
// nothing, and the row metrics add up stored counts.
package query

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"time"
)

//go:embed *.sql
var sqlFiles embed.FS

// sqlTmpl holds every statement. Template fields are chosen by the program, never by the
// user: {{.Key}} a grouping expression, {{.Table}} the Set's table.
var sqlTmpl = template.Must(template.ParseFS(sqlFiles, "*.sql"))

// Options selects the rows of a Set and how they are linked.
type Options struct {
	Since, Until  time.Time     // [Since, Until); a zero bound is open
	Route         string        // only this route; "" for all
	Method        string        // only this method; "" for all
	MaxGap        time.Duration // heuristic links and inference: at most this between attempts (default 60 s)
	InferAttempts bool          // give untagged rows inferred attempt numbers
	NoCache       bool          // link the rows again even when the stored cache would do
	Rules         []Rule        // the alert rules, which give verdicts too; nil: DefaultRules
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

// Set is the rows of one report, prepared once. Close it.
type Set struct {
	conn   *sql.Conn
	table  string
	cached bool   // linking read from the stored cache (see Refresh): _chain and _multi are views
	cube   string // the stored minute cube the row metrics add up; "" to read the rows
	gcube  string // the stored cube by grouping columns, for Groups; "" to read the rows

	minuteCounts []bucket // see minutes
	rules        []Rule   // for verdicts
}

var setID atomic.Int64

// Open prepares the rows selected by o on a connection of its own.
func Open(ctx context.Context, db *sql.DB, o Options) (*Set, error) {
	if o.MaxGap <= 0 {
		o.MaxGap = DefaultMaxGap
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s := &Set{conn: conn, table: fmt.Sprintf("report_rows_%d", setID.Add(1)), rules: o.Rules}
	if s.rules == nil {
		s.rules = DefaultRules()
	}
	var route, method any
	if o.Route != "" {
		route = o.Route
	}
	if o.Method != "" {
		method = o.Method
	}
	lit := prepareLiterals{
		Since:     timeLiteral(o.Since, "TIMESTAMP '0001-01-01'"),
		Until:     timeLiteral(o.Until, "TIMESTAMP '9999-12-31'"),
		MaxGap:    strconv.FormatFloat(o.MaxGap.Seconds(), 'f', -1, 64),
		Infer:     strconv.FormatBool(o.InferAttempts),
		HasRoute:  o.Route != "",
		HasMethod: o.Method != "",
	}
	steps := []string{"prepare_params", "prepare_rows", "prepare_chain", "prepare_all", "prepare_multi"}
	if o.defaultLinking() && !o.NoCache {
		all, err := o.whole(), error(nil)
		if !all { // --since/--until around every row select them all too
			all, err = coversAll(ctx, conn, o.Since, o.Until)
		}
		fresh := false
		if err == nil && all {
			fresh, err = cacheFresh(ctx, conn)
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		if fresh {
			s.cached, s.cube, s.gcube = true, cacheName+"_cube", cacheName+"_gcube"
			steps = []string{"prepare_params", "prepare_rows", "cached_chain", "prepare_all", "cached_multi"}
		}
	}
	if err := prepare(ctx, conn, s.table, "TEMP TABLE", lit, []any{route, method}, steps); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// prepare runs the named statements of prepare.sql for table, creating its tables as kind
// ("TEMP TABLE" for a Set, "TABLE" for the cache).
func prepare(ctx context.Context, conn execer, table, kind string, lit prepareLiterals, params []any, steps []string) error {
	if params == nil {
		params = []any{nil, nil} // every route and method
	}
	for i, name := range steps {
		var q bytes.Buffer
		err := sqlTmpl.ExecuteTemplate(&q, name, struct {
			Table, Kind, Cache string
			prepareLiterals
		}{table, kind, cacheName, lit})
		if err == nil {
			var args []any
			if i == 0 {
				args = params
			}
			_, err = conn.ExecContext(ctx, q.String(), args...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Cached reports whether the Set reads the stored cache (see Refresh) rather than
// linking its rows again.
func (s *Set) Cached() bool { return s.cached }

// Close drops the Set's tables and views and releases its connection.
func (s *Set) Close() error {
	ctx := context.Background()
	var first error
	drops := []string{"TABLE IF EXISTS %s_multi", "VIEW IF EXISTS %s", "TABLE IF EXISTS %s_chain", "VIEW IF EXISTS %s_rows", "TABLE IF EXISTS %s_p"}
	if s.cached {
		drops[0], drops[2] = "VIEW IF EXISTS %s_multi", "VIEW IF EXISTS %s_chain"
	}
	for _, drop := range drops {
		if _, err := s.conn.ExecContext(ctx, "DROP "+fmt.Sprintf(drop, s.table)); err != nil && first == nil {
			first = err
		}
	}
	if err := s.conn.Close(); first == nil {
		first = err
	}
	return first
}

// statement renders a query: key is a grouping expression, cube the cache's cube to read
// the row metrics from ("" for the rows; see cache.go).
func (s *Set) statement(name, key, cube string) (string, error) {
	var q bytes.Buffer
	lcube := "" // the logical cubes: by minute and grouping columns both
	if cube != "" {
		lcube = cacheName + "_cube"
	}
	if err := sqlTmpl.ExecuteTemplate(&q, name, struct{ Key, Table, Cube, LCube string }{key, s.table, cube, lcube}); err != nil {
		return "", err
	}
	return q.String(), nil
}

// prepareLiterals are values the program formats into prepare.sql itself: parsed times,
// a number and a boolean, never text a user typed.
type prepareLiterals struct {
	Since, Until, MaxGap, Infer string
	HasRoute, HasMethod         bool   // filter on the route, the method in _p
	Where                       string // one more condition on the rows (cache.go's update)
	From                        string // the table of rows to read instead of requests (cache.go's update)
}

// timeLiteral formats t as a DuckDB TIMESTAMP literal (UTC), or open when t is zero.
func timeLiteral(t time.Time, open string) string {
	if t.IsZero() {
		return open
	}
	return "TIMESTAMP '" + t.UTC().Format("2006-01-02 15:04:05.999999") + "'"
}

// Metrics are the metrics of docs/metrics.md for a set of rows. Ratios are nil when their
// denominator is zero.
type Metrics struct {
	Requests         int64
	Untagged         int64
	Inferred         int64 // rows whose attempt number was inferred (--infer-attempts)
	FirstAttempts    int64
	Retries          int64
	Amplification    *float64
	RetryRate        *float64
	RetrySuccessRate *float64
	ExtraLoad        *float64
	ActualSuccess    *float64
	Recovered        int64    // logical requests whose first attempt failed and a retry succeeded
	Exhausted        int64    // logical requests that retried and never got 2xx
	EffectiveSuccess *float64 // 2xx share of logical requests' final attempts
	Status5xx        Split
	Status429        Split
	Status499        Split
	// ProxyAmplification is upstream tries per line, over lines that record them (nginx's
	// $upstream_status list): the gateway's own retries, kept apart from the client's.
	ProxyAmplification *float64
	Verdict            string // see Verdict
}

// Split is a count split between first attempts and retries.
type Split struct {
	First, Retry int64
}

// Total is First + Retry.
func (s Split) Total() int64 { return s.First + s.Retry }

// Window is the metrics of one time bucket.
type Window struct {
	Start time.Time
	Metrics
}

// Group is the metrics of one value of a grouping (--by).
type Group struct {
	Key string // "GET /api/users/:id" for routes; the status, attempt or host otherwise
	Metrics
}

// Groupings are the values --by accepts, with the row expression each groups by.
var Groupings = map[string]string{
	"route":   "coalesce(method, '-') || ' ' || coalesce(route, '-')",
	"method":  "coalesce(method, '-')",
	"status":  "coalesce(CAST(status AS VARCHAR), '-')",
	"attempt": "coalesce(CAST(attempt AS VARCHAR), 'untagged')",
	"host":    "coalesce(host, upstream_addr, '-')",
}

// Summary returns the metrics over the whole Set: the sum of its minutes (see minutes),
// rows without a time included.
func (s *Set) Summary(ctx context.Context) (Metrics, error) {
	ms, err := s.minutes(ctx)
	if err != nil {
		return Metrics{}, err
	}
	var c counts
	for _, b := range ms {
		c.add(b.c)
	}
	return c.metrics(s.rules), nil
}

// bucket is the counts of one minute; valid is false for the rows without a time.
type bucket struct {
	start time.Time
	valid bool
	c     counts
}

// minutes returns the counts per minute, computed once per Set: the summary and every
// window a whole number of minutes wide add them up instead of reading the rows again.
func (s *Set) minutes(ctx context.Context) ([]bucket, error) {
	if s.minuteCounts != nil {
		return s.minuteCounts, nil
	}
	out := []bucket{}
	err := s.grouped(ctx, "time_bucket(to_seconds(60), ts, TIMESTAMP '1970-01-01')", s.cube, func(k any, c counts) {
		t := k.(*sql.NullTime)
		out = append(out, bucket{start: t.Time.UTC(), valid: t.Valid, c: c})
	}, func() any { return new(sql.NullTime) })
	if err != nil {
		return nil, err
	}
	s.minuteCounts = out
	return out, nil
}

// Windows returns the metrics per time bucket of the given width, for the buckets that
// have rows, oldest first. Buckets start on whole multiples of the width since the epoch,
// shifted by offset (a time zone's offset from UTC, so that days start at local
// midnight). A logical request belongs to the window of its first attempt. Widths and
// offsets of whole minutes add up the Set's minutes; others read the rows.
func (s *Set) Windows(ctx context.Context, width, offset time.Duration) ([]Window, error) {
	if width < time.Second || width%time.Second != 0 {
		return nil, fmt.Errorf("window %v: want a whole number of seconds", width)
	}
	if width%time.Minute == 0 && offset%time.Minute == 0 {
		ms, err := s.minutes(ctx)
		if err != nil {
			return nil, err
		}
		var ws []Window
		var cs []counts
		w, off := int64(width/time.Second), int64(offset/time.Second)
		for _, b := range ms {
			if !b.valid {
				continue // rows without a time belong to no window
			}
			u := b.start.Unix() + off
			start := time.Unix(u-((u%w)+w)%w-off, 0).UTC()
			if n := len(ws); n == 0 || !ws[n-1].Start.Equal(start) {
				ws = append(ws, Window{Start: start})
				cs = append(cs, counts{})
			}
			cs[len(cs)-1].add(b.c)
		}
		for i := range ws {
			ws[i].Metrics = cs[i].metrics(s.rules)
		}
		return ws, nil
	}
	return s.windowsSQL(ctx, width, offset)
}

// windowsSQL computes Windows from the rows.
func (s *Set) windowsSQL(ctx context.Context, width, offset time.Duration) ([]Window, error) {
	key := fmt.Sprintf("time_bucket(to_seconds(%d), ts, TIMESTAMP '1970-01-01' - to_seconds(%d))", int64(width/time.Second), int64(offset/time.Second))
	var ws []Window
	err := s.grouped(ctx, key, "", func(k any, c counts) { // the cube is in minutes: the rows
		t := k.(*sql.NullTime)
		if t.Valid { // rows without a time belong to no window
			ws = append(ws, Window{Start: t.Time.UTC(), Metrics: c.metrics(s.rules)})
		}
	}, func() any { return new(sql.NullTime) })
	return ws, err
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
// first.
func (s *Set) Groups(ctx context.Context, by string) ([]Group, error) {
	key, err := GroupingKey(by)
	if err != nil {
		return nil, err
	}
	var gs []Group
	err = s.grouped(ctx, key, s.gcube, func(k any, c counts) {
		gs = append(gs, Group{Key: k.(*sql.NullString).String, Metrics: c.metrics(s.rules)})
	}, func() any { return new(sql.NullString) })
	sortGroups(gs)
	return gs, err
}

// grouped runs the row and logical metrics grouped by key and adds them up by group (a
// NULL key can come back twice from logical.sql's full join: added, not replaced). The
// metrics add up the cache's cubes when cube names one.
func (s *Set) grouped(ctx context.Context, key, cube string, each func(k any, c counts), newKey func() any) error {
	type entry struct {
		k any
		c counts
	}
	var order []string
	byKey := map[string]*entry{}
	err := s.queryOn(ctx, "metrics.sql", key, cube, nil, func(rows *sql.Rows) error {
		e := &entry{k: newKey()}
		if err := scanCounts(rows, e.k, &e.c); err != nil {
			return err
		}
		id := keyID(e.k)
		if prev, ok := byKey[id]; ok {
			prev.c.add(e.c)
			return nil
		}
		order = append(order, id)
		byKey[id] = e
		return nil
	})
	if err != nil {
		return err
	}
	err = s.queryOn(ctx, "logical.sql", key, cube, nil, func(rows *sql.Rows) error {
		k := newKey()
		var c counts
		if err := rows.Scan(k, &c.recovered, &c.exhausted, &c.logical, &c.finalOK, &c.multiFirsts, &c.multiFirstsOK); err != nil {
			return err
		}
		if e, ok := byKey[keyID(k)]; ok {
			e.c.add(c)
		}
		return nil
	})
	for _, id := range order {
		each(byKey[id].k, byKey[id].c)
	}
	return err
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
	var f, t sql.NullTime
	// From the range's rows: every one of them is in the Set once, and the plain view
	// lets DuckDB read the ts column alone (the Set's own view took 0.7 s on 10M rows).
	err = s.conn.QueryRowContext(ctx, "SELECT min(ts), max(ts) FROM "+s.table+"_rows").Scan(&f, &t)
	if err != nil {
		return from, to, fmt.Errorf("span: %w", err)
	}
	return f.Time.UTC(), t.Time.UTC(), nil
}

// Linking counts logical requests by what linked their attempts.
type Linking struct {
	IdempotencyKey int64
	InvocationID   int64
	RequestID      int64
	Heuristic      int64
	Inferred       int64
}

// Strong is the logical requests linked by a key the client sent.
func (l Linking) Strong() int64 { return l.IdempotencyKey + l.InvocationID + l.RequestID }

// Linking returns how the Set's logical requests were linked.
func (s *Set) Linking(ctx context.Context) (Linking, error) {
	var l Linking
	q, err := s.statement("linking.sql", "", s.cube)
	if err != nil {
		return l, err
	}
	rows, err := s.conn.QueryContext(ctx, q)
	if err != nil {
		return l, fmt.Errorf("linking.sql: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var by string
		var n int64
		if err := rows.Scan(&by, &n); err != nil {
			return l, err
		}
		switch by {
		case "idempotency_key":
			l.IdempotencyKey = n
		case "invocation_id":
			l.InvocationID = n
		case "request_id":
			l.RequestID = n
		case "heuristic":
			l.Heuristic = n
		case "inferred":
			l.Inferred = n
		}
	}
	return l, rows.Err()
}

func (s *Set) query(ctx context.Context, name, key string, args []any, each func(*sql.Rows) error) error {
	return s.queryOn(ctx, name, key, s.cube, args, each)
}

func (s *Set) queryOn(ctx context.Context, name, key, cube string, args []any, each func(*sql.Rows) error) error {
	q, err := s.statement(name, key, cube)
	if err != nil {
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

func scanCounts(rows *sql.Rows, key any, c *counts) error {
	return rows.Scan(key, &c.requests, &c.untagged, &c.inferred, &c.tagged, &c.first, &c.retries, &c.second,
		&c.retriesOK, &c.taggedOK, &c.s5xx.First, &c.s5xx.Retry, &c.s429.First, &c.s429.Retry,
		&c.s499.First, &c.s499.Retry, &c.proxied, &c.tries, &c.strongFirsts, &c.strongFirstsOK)
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
	rows, err := s.conn.QueryContext(ctx, "SELECT file_id, line, attempt, inferred FROM "+s.table)
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
}

// Attempts returns the Set's tagged rows ordered by start time, for replaying them.
func (s *Set) Attempts(ctx context.Context) ([]Attempt, error) {
	rows, err := s.conn.QueryContext(ctx, "SELECT lkey, attempt, started, ts, coalesce(status, -1), coalesce(retry_after, '') FROM "+
		s.table+" WHERE attempt IS NOT NULL AND ts IS NOT NULL ORDER BY started, lkey, attempt")
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.Key, &a.N, &a.Start, &a.End, &a.Status, &a.RetryAfter); err != nil {
			return nil, err
		}
		a.Start, a.End = a.Start.UTC(), a.End.UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}
