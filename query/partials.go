package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/retrylens/retrylens/internal/duckerr"
)

// Partial answers. An answer that is not a sum of count rows (the 429 loops, the policy
// findings, hedging, the backoff profile and gap histogram, the attempt counts, linking) is
// kept as partial answers per minute of its requests' first attempt, in tables whose rows
// merge into the answer of any range of whole minutes: counts add up, maxima take the
// largest, the longest few and the smallest examples keep the first of each minute's own,
// and what only the whole can tell (quantiles, a median and what lies near it) reads the
// minutes' values themselves (gaps_partial, hedging's delays). A minute's partials are
// computed from the attempts of the requests that began in it alone (a request lives in
// one minute), so that an update recomputes the minutes its rows touched and only those
// (updatePartials), and a report merges the minutes of its range.
//
// Each partial table is built by the statement <name>_partial, from a Set's attempts (or
// those of the requests that began in .Touched's minutes); each answer is a statement file
// that merges the partials it names ({{.Part "name"}}) where .Within. The cache stores the
// partials of every row (cache_p_<name>) with the default options; a Set that reads the
// stored cache of its own database merges them, cut to its range; any other Set (a range
// linked again, other options, a cluster's rows) computes its own into temporary tables.
var partials = []partial{
	{name: "loops", args: []any{worstLoops}, throttled: true},
	{name: "findings", args: []any{DefaultMaxAttempts}, throttled: true},
	{name: "gaps"},
	{name: "hedging"},
	{name: "attempt_counts"},
	{name: "linking"},
}

// A partial is a table of partial answers: <name>_partial builds it, with args as the stored
// one is built (the default options); throttled when it reads the throttling statuses.
type partial struct {
	name      string
	args      []any
	throttled bool
}

// need is a partial table a merge reads, with the arguments it asks it for.
type need struct {
	name string
	args []any
}

// minuteSQL is the minute a time belongs to; a row without a time is in the minute
// -infinity, which only a report over every row reads.
func minuteSQL(col string) string {
	return "coalesce(date_trunc('minute', " + col + "), '-infinity'::TIMESTAMP)"
}

// partialData is what the partial statements are rendered with.
type partialData struct {
	Table, Throttle string
	Touched         string            // a condition on first_ts: only the requests that began in an update's minutes (touchedMinutes; "true": all)
	Within          string            // a merge's condition on the partials' minute
	parts           map[string]string // the partial tables a merge reads, by name
}

// Part is the table of the partial answers name a merge reads.
func (d partialData) Part(name string) string { return d.parts[name] }

func renderPartial(name string, d partialData) (string, error) {
	if d.Touched == "" {
		d.Touched = "true"
	}
	var q bytes.Buffer
	if err := sqlTmpl.ExecuteTemplate(&q, name, d); err != nil {
		return "", err
	}
	return q.String(), nil
}

// writePartial runs into (CREATE TABLE t AS, INSERT INTO t) with p's statement over d.
func writePartial(ctx context.Context, tx execer, into string, p partial, d partialData, args []any) error {
	q, err := renderPartial(p.name+"_partial", d)
	if err == nil {
		_, err = tx.ExecContext(ctx, into+" "+q, args...)
	}
	if err != nil {
		return fmt.Errorf("%s_partial: %w", p.name, err)
	}
	return nil
}

// partsTable holds the cache version the stored partials and route totals describe: they
// are kept up to date by the loads that store the answers, not by watch's batches, whose
// reports (ranges) compute their own; the next ingest builds them again.
const partsTable = cacheName + "_parts"

// partsFresh reports whether the stored partials describe the cache's version.
func partsFresh(ctx context.Context, q querier) (bool, error) {
	var fresh bool
	err := q.QueryRowContext(ctx, "SELECT count(*) > 0 FROM "+partsTable+" WHERE version = (SELECT version FROM "+cacheName+"_state)").Scan(&fresh)
	if duckerr.Missing(err) {
		return false, nil
	}
	return fresh, err
}

// setParts records that the stored partials describe the cache's version v ("": none).
func setParts(ctx context.Context, tx execer, v string) error {
	if err := execAll(ctx, tx, "CREATE TABLE IF NOT EXISTS "+partsTable+" (version VARCHAR NOT NULL)", "DELETE FROM "+partsTable); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO "+partsTable+" VALUES ($1)", v)
	return err
}

// partialsDigest changes with the partial statements and the route totals': the cache's
// version carries it, so that those another retrylens stored are built again (sqlDigest).
func partialsDigest() string {
	h := sha256.New()
	h.Write([]byte(totalsOf("t")))
	for _, p := range partials {
		q, err := renderPartial(p.name+"_partial", partialData{Table: "t", Throttle: defaultThrottle, Touched: "c"})
		if err != nil {
			panic(err)
		}
		h.Write([]byte(q))
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// routeTotals is the cache's table of the counts per route of every row: the groups
// table summed over its minutes, hosts and ways of linking, keeping what metrics.sql reads
// (route_totals in rank_groups.sql). A whole report ranks the endpoints by it and counts
// the ten it shows from it; it is the merge of every minute's, kept by adding and taking
// out what an update's rows count for (the groups table's own delta), so that no load sums
// every row's counts by route again.
var routeTotals = CountTable{Name: "routes",
	Keys: []string{"method", "route", "attempt", "status", "inferred", "strong", "cancelled"},
	Sums: []string{"n", "proxied", "tries", "gw_retried", "below_cap", "uncoded"}}

// totalsOf is the route totals of the groups table from.
func totalsOf(from string) string {
	var q bytes.Buffer
	if err := sqlTmpl.ExecuteTemplate(&q, "route_totals", struct{ Counts string }{from}); err != nil {
		panic(err) // a template of the program's own, with the fields it reads
	}
	return q.String()
}

// buildPartials stores the partials of every row of the cache (cacheName's tables), and its
// route totals, in place of any it held.
func buildPartials(ctx context.Context, tx execer) error {
	t := cacheName + "_" + routeTotals.Name
	if err := execAll(ctx, tx, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" AS "+totalsOf(cacheName+"_groups")); err != nil {
		return err
	}
	for _, p := range partials {
		t := cacheName + "_p_" + p.name
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return err
		}
		if err := writePartial(ctx, tx, "CREATE TABLE "+t+" AS", p, partialData{Table: cacheName, Throttle: defaultThrottle}, p.args); err != nil {
			return err
		}
	}
	return nil
}

// updatePartials computes again the stored partials of the minutes in the table touched
// (m), from the cache's tables as they are now, and adds to the route totals what the
// groups table's rows linked again (under the prefix before, as they counted, and after, as
// they count now) changed.
func updatePartials(ctx context.Context, tx setConn, touched, before, after string) error {
	totals := cacheName + "_" + routeTotals.Name
	err := execAll(ctx, tx, sumInto(totals, routeTotals, map[string]int{totals: 1,
		"(" + totalsOf(after+"_groups") + ")": 1, "(" + totalsOf(before+"_groups") + ")": -1})...)
	if err != nil {
		return err
	}
	cond, err := touchedMinutes(ctx, tx, touched)
	if err != nil {
		return err
	}
	d := partialData{Table: cacheName, Throttle: defaultThrottle, Touched: cond}
	for _, p := range partials {
		t := cacheName + "_p_" + p.name
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE minute IN (SELECT m FROM "+touched+")"); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		if err := writePartial(ctx, tx, "INSERT INTO "+t, p, d, p.args); err != nil {
			return err
		}
	}
	return nil
}

// StoredTables are every table of the stored cache after "cache_" that the rows alone
// decide (not its state or its answers): the chain, the count tables and the partials.
func StoredTables() []string { return slices.Concat(cachedTables(), partialTables()) }

// touchedMinutes is the condition on first_ts that selects the minutes of the table touched
// (m): the runs of consecutive minutes as literal ranges, which DuckDB skips the stored
// table's other row groups by (it is kept in first_ts order); past maxRanges runs, the
// minutes themselves from the first on.
func touchedMinutes(ctx context.Context, tx setConn, touched string) (string, error) {
	const maxRanges = 256
	var runs []string
	var untimed bool
	var start, end time.Time
	flush := func() {
		if !start.IsZero() {
			runs = append(runs, "(first_ts >= "+timeLiteral(start, "")+" AND first_ts < "+timeLiteral(end, "")+")")
		}
	}
	var minutes []time.Time
	err := func() error {
		rows, err := tx.QueryContext(ctx, "SELECT m FROM "+touched+" WHERE m > '-infinity'::TIMESTAMP ORDER BY m")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m time.Time
			if err := rows.Scan(&m); err != nil {
				return err
			}
			minutes = append(minutes, m)
			if !m.Equal(end) {
				flush()
				start = m
			}
			end = m.Add(time.Minute)
		}
		flush()
		return rows.Err()
	}()
	if err != nil {
		return "", err
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) > 0 FROM "+touched+" WHERE m = '-infinity'::TIMESTAMP").Scan(&untimed); err != nil {
		return "", err
	}
	if len(runs) > maxRanges {
		runs = []string{"(first_ts >= " + timeLiteral(minutes[0], "") + " AND " + minuteSQL("first_ts") + " IN (SELECT m FROM " + touched + "))"}
	}
	if untimed {
		runs = append(runs, "first_ts IS NULL")
	}
	if len(runs) == 0 {
		return "false", nil
	}
	return "(" + strings.Join(runs, " OR ") + ")", nil
}

// partialTables are the stored partials' tables after cacheName, and the route totals.
func partialTables() []string {
	names := []string{routeTotals.Name}
	for _, p := range partials {
		names = append(names, "p_"+p.name)
	}
	return names
}

// merged runs the merge file (<file>.sql, with args) over the partial tables it needs and
// calls each on its rows: the stored partials when s reads the stored cache of its database
// and asks them with the options they were stored with (cut to its range), else partials
// computed from s's own tables, once per Set.
func (s *Set) merged(ctx context.Context, file string, args []any, each func(*sql.Rows) error, needs ...need) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	d := partialData{Table: s.table, Throttle: s.throttle, Within: "true", parts: map[string]string{}}
	if s.storedParts && s.lit.Bounded {
		d.Within = "minute >= " + s.lit.Since + " AND minute < " + s.lit.Until
	}
	for _, n := range needs {
		p := partialNamed(n.name)
		if s.storedParts && reflect.DeepEqual(n.args, p.args) && (!p.throttled || s.throttle == defaultThrottle) {
			d.parts[n.name] = cacheName + "_p_" + n.name
			continue
		}
		// the Set's own, named by what it was asked (another Set's within the transaction
		// storeAnswers runs in has another name)
		t := fmt.Sprintf("%s_p_%s%s", s.table, n.name, argsSuffix(n.args))
		if !s.ownParts[t] {
			err := writePartial(ctx, s.conn, "CREATE OR REPLACE TEMP TABLE "+t+" AS", p, partialData{Table: s.table, Throttle: s.throttle}, n.args)
			if err != nil {
				return err
			}
			if s.ownParts == nil {
				s.ownParts = map[string]bool{}
			}
			s.ownParts[t] = true
		}
		d.parts[n.name] = t
	}
	q, err := renderPartial(file+".sql", d)
	if err != nil {
		return err
	}
	return s.rowsOf(ctx, file+".sql", q, args, each)
}

// argsSuffix names a partial table by the arguments it was built with.
func argsSuffix(args []any) string {
	var b strings.Builder
	for _, a := range args {
		fmt.Fprintf(&b, "_%v", a)
	}
	return b.String()
}

func partialNamed(name string) partial {
	for _, p := range partials {
		if p.name == name {
			return p
		}
	}
	panic("no partial " + name)
}

// checkPartials compares the stored partials with those of the tables built again under
// the prefix again (CheckCache), row by row, and names each that differs.
func checkPartials(ctx context.Context, tx querier, again string) ([]string, error) {
	var problems []string
	compare := func(stored, built string) error {
		d, err := differ(ctx, tx, stored, built)
		if d != "" {
			problems = append(problems, d)
		}
		return err
	}
	totals, built := cacheName+"_"+routeTotals.Name, again+"_"+routeTotals.Name
	if _, err := tx.ExecContext(ctx, "CREATE TEMP TABLE "+built+" AS "+totalsOf(again+"_groups")); err != nil {
		return nil, fmt.Errorf("%s: %w", built, err)
	}
	if err := compare(totals, built); err != nil {
		return nil, err
	}
	for _, p := range partials {
		built := again + "_p_" + p.name
		if err := writePartial(ctx, tx, "CREATE TEMP TABLE "+built+" AS", p, partialData{Table: again, Throttle: defaultThrottle}, p.args); err != nil {
			return nil, err
		}
		if err := compare(cacheName+"_p_"+p.name, built); err != nil {
			return nil, err
		}
	}
	return problems, nil
}

// defaultThrottle is the throttling statuses a Set counts without --throttle-status.
const defaultThrottle = "429"
