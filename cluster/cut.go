package cluster

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
)

// A cluster's stored cache. A report of a range links the range's rows, which on a
// cluster means reading them from the shards and linking them in the reporting process;
// a DuckDB file's reads its stored cache cut to the range instead (query.Options.Cut).
// So ingest, when it stores the answers (answers.go), also stores the tables of
// the Set it asked them of, the cache's tables (query.CutTables), on the URL's server:
// cache_<name>, with DuckDB's columns (a TIMESTAMP as microseconds), sorted by the minute
// of what a range cuts them by, and cache_tables (name, program, version, columns: the
// DuckDB table's), all before cache_state. A report of a range of whole minutes with the
// default linking, while the version is the cluster's, reads the cut of each table into
// DuckDB and nothing of the shards but the range's span.

// cutListTable lists the stored tables.
const cutListTable = "cache_tables"

// cutBatch is how many rows of a stored table one INSERT sends.
const cutBatch = 1 << 14

// clickHouseTypes are the ClickHouse types the cache's DuckDB columns are stored as
// (Nullable), each read back as the same Go type (scanSlot), a TIMESTAMP as microseconds.
var clickHouseTypes = map[string]string{
	"BOOLEAN": "UInt8", "SMALLINT": "Int16", "INTEGER": "Int32", "BIGINT": "Int64", "UBIGINT": "UInt64",
	"DOUBLE": "Float64", "VARCHAR": "String", "TIMESTAMP": "Int64",
}

// storeCut returns what stores a table of the cache (query.Answer's cut) on the URL's
// server, and lists it in cutListTable with version v; reset drops what was stored
// before and creates the list.
func (c *store) storeCut(ctx context.Context, v string) (reset func() error, store func(query.CutTable, query.CutRows) error) {
	reset = func() error {
		qs := []string{"DROP TABLE IF EXISTS " + c.cl.Table(cutListTable)}
		for _, t := range query.CutTables() {
			qs = append(qs, "DROP TABLE IF EXISTS "+c.cl.Table("cache_"+t.Name))
		}
		qs = append(qs, "CREATE TABLE "+c.cl.Table(cutListTable)+" (name String, program String, version String, columns String) ENGINE = MergeTree() ORDER BY name")
		for _, q := range qs {
			if err := c.cl.Conn.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	store = func(t query.CutTable, rows query.CutRows) error {
		types, err := rows.ColumnTypes()
		if err != nil {
			return err
		}
		var duck, ch, names []string
		stamp := make([]bool, len(types))
		for i, ct := range types {
			chType, ok := clickHouseTypes[ct.DatabaseTypeName()]
			if !ok {
				return fmt.Errorf("column %s: cannot store DuckDB type %s", ct.Name(), ct.DatabaseTypeName())
			}
			stamp[i] = ct.DatabaseTypeName() == "TIMESTAMP"
			duck = append(duck, fmt.Sprintf("%q %s", ct.Name(), ct.DatabaseTypeName()))
			ch = append(ch, fmt.Sprintf("`%s` Nullable(%s)", ct.Name(), chType))
			names = append(names, "`"+ct.Name()+"`")
		}
		table := "cache_" + t.Name
		if err := c.cl.Conn.Exec(ctx, "CREATE TABLE "+c.cl.Table(table)+" ("+strings.Join(ch, ", ")+") ENGINE = MergeTree() ORDER BY "+
			MinuteOf("`"+t.By+"`")); err != nil {
			return err
		}
		vals := make([]any, len(types))
		dest := make([]any, len(types))
		for i := range vals {
			dest[i] = &vals[i]
		}
		more := rows.Next()
		for more {
			err := c.insert(ctx, table+" ("+strings.Join(names, ", ")+")", func(add func(...any) error) error {
				for n := 0; more && n < cutBatch; n, more = n+1, rows.Next() {
					if err := rows.Scan(dest...); err != nil {
						return err
					}
					for i, v := range vals {
						switch x := v.(type) {
						case time.Time:
							if stamp[i] {
								vals[i] = x.UnixMicro()
							}
						case bool:
							vals[i] = uint8(0)
							if x {
								vals[i] = uint8(1)
							}
						}
					}
					if err := add(vals...); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return c.insert(ctx, cutListTable+" (name, program, version, columns)", func(add func(...any) error) error {
			return add(t.Name, query.ProgramID(), v, strings.Join(duck, ", "))
		})
	}
	return reset, store
}

// cutTables returns the DuckDB columns of each stored table this program stored for
// version v, and false unless it stored them all.
func (c *store) cutTables(ctx context.Context, v string) (map[string]string, bool, error) {
	rows, err := c.cl.Conn.Query(ctx, "SELECT name, columns FROM "+c.cl.Table(cutListTable)+" WHERE program = ? AND version = ?", query.ProgramID(), v)
	if err != nil {
		return nil, false, nil // none, or another retrylens's layout: read the shards
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var name, c string
		if err := rows.Scan(&name, &c); err != nil {
			return nil, false, err
		}
		cols[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	for _, t := range query.CutTables() {
		if _, ok := cols[t.Name]; !ok {
			return nil, false, nil
		}
	}
	return cols, true, nil
}

// cutRange reports whether a Set of qo can read the stored cache cut to its range
// (query.Options.Cut): a range of whole minutes, the default linking.
func cutRange(qo query.Options) bool {
	whole := func(t time.Time) bool { return t.Equal(t.Truncate(time.Minute)) }
	return (!qo.Since.IsZero() || !qo.Until.IsZero()) && whole(qo.Since) && whole(qo.Until) && defaultLinking(qo)
}

// cutInto reads into db, an in-memory DuckDB database, each stored table (cols: their
// DuckDB columns) cut to o's range, as cache_<name>, and the range's span from the shards.
func cutInto(ctx context.Context, cl *Cluster, db *sql.DB, o query.Options, cols map[string]string) (traffic, error) {
	var tr traffic
	before, after := o.Context()
	span, err := spanJob(ctx, cl, db, o)
	if err != nil {
		return tr, err
	}
	jobs := []copyJob{span}
	for _, t := range query.CutTables() {
		table := "cache_" + t.Name
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" ("+cols[t.Name]+")"); err != nil {
			return tr, err
		}
		from, to := o.Since, o.Until
		if t.Context {
			from, to = before, after
		}
		sel, fix := storedColumns(cols[t.Name])
		q := sel + " FROM " + cl.Table(table) + " WHERE " + between("`"+t.By+"`", usOf(from, math.MinInt64), usOf(to, math.MaxInt64))
		jobs = append(jobs, copyJob{"read the stored " + table, table, q, nil, fix, new(int64), new(time.Duration), nil})
	}
	start := time.Now()
	err = copyAll(ctx, cl, db, jobs)
	tr.CountsTime = time.Since(start)
	for _, j := range jobs[1:] {
		tr.CountRows += *j.n
	}
	return tr, err
}

// readCut returns an in-memory DuckDB database with the stored cache cut to qo's range
// (see cutInto), and false, with no database, when the cache stored is not of the
// cluster's version by this program, before and after reading it (an ingest in between
// rewrites it: the state goes first and comes back last).
func (c *store) readCut(ctx context.Context, qo query.Options) (*sql.DB, bool, error) {
	v, err := clusterVersion(ctx, c.cl)
	if err != nil {
		return nil, false, err
	}
	stored := func() (map[string]string, bool, error) {
		if s, err := storedVersion(ctx, c.cl); err != nil || s != v {
			return nil, false, err
		}
		return c.cutTables(ctx, v)
	}
	cols, ok, err := stored()
	if err != nil || !ok {
		return nil, false, err
	}
	db, err := ingest.Open(ctx, "")
	if err != nil {
		return nil, false, err
	}
	c.read = append(c.read, db)
	tr, err := cutInto(ctx, c.cl, db, qo, cols)
	if err != nil {
		return nil, false, err
	}
	if _, ok, err := stored(); err != nil || !ok {
		return nil, false, err
	}
	if c.trace != nil {
		fmt.Fprintf(c.trace, "retrylens: from the cluster: the cache stored at ingest (version %s) cut to the range: %d rows (%.1fs)\n",
			v, tr.CountRows, tr.CountsTime.Seconds())
	}
	return db, true, nil
}

// checkStored compares the answers and the cache this program stored for the cluster's
// version with what its rows give now (as ingest computes them), and says so, a line
// each; differ is whether any differs.
func (c *store) checkStored(ctx context.Context) (lines []string, differ bool, err error) {
	v, err := clusterVersion(ctx, c.cl)
	if err != nil {
		return nil, false, err
	}
	if s, err := storedVersion(ctx, c.cl); err != nil || s != v {
		return []string{"answers and cache for reports: none of the rows as they are (reports read the shards until the next ingest stores them)"}, false, err
	}
	cols, ok, err := c.cutTables(ctx, v)
	if err != nil {
		return nil, false, err
	}
	other := []string{"answers and cache for reports: stored by another retrylens, which this one does not read (the next ingest stores its own)"}
	if !ok {
		return other, false, nil // and perhaps in another layout
	}
	stored, err := c.storedAnswers(ctx, v, math.MaxInt64)
	if err != nil {
		return nil, false, err
	}
	if len(stored) == 0 {
		return other, false, nil
	}
	qo := query.Options{MaxGap: query.DefaultMaxGap, PartRows: partRows(c.cl)}
	db, done, _, err := materialize(ctx, c.cl, qo, false)
	if err != nil {
		return nil, false, err
	}
	defer done()
	qo.Counted = true
	answers, err := answerWithin(ctx, db, qo, func() error { differ, lines = false, nil; return nil }, func(t query.CutTable, rows query.CutRows) error {
		n, sum, err := digestRows(rows.Next, rows.Scan, len(strings.Split(cols[t.Name], ", ")))
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return err
		}
		sn, ssum, err := c.storedDigest(ctx, "cache_"+t.Name, cols[t.Name])
		if err != nil {
			return err
		}
		if n != sn || sum != ssum {
			differ = true
			lines = append(lines, fmt.Sprintf("cache_%s: %d rows stored, the rows give %d, and they differ", t.Name, sn, n))
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	var names []string
	for name, b := range answers {
		if !bytes.Equal(stored[name], b) {
			call, _, _ := strings.Cut(name, " rules=")
			names = append(names, fmt.Sprintf("%s: the stored answer to %s differs from the rows' own", answersTable, call))
		}
	}
	slices.Sort(names)
	lines = append(lines, names...)
	if len(names) > 0 {
		differ = true
	}
	if !differ {
		lines = append(lines, fmt.Sprintf("answers and cache for reports: %d answers and %d tables, as the rows give them: ok", len(answers), len(query.CutTables())))
	}
	return lines, differ, nil
}

// storedColumns is the SELECT list of a stored table of the cache whose DuckDB columns
// are cols (cache_tables' list), and what turns a row of it into DuckDB's values: its
// times, stored as microseconds, back into times.
func storedColumns(cols string) (sel string, fix func([]any) []any) {
	var names []string
	var stamps []int
	for i, c := range strings.Split(cols, ", ") {
		name, typ, _ := strings.Cut(c, " ")
		names = append(names, "`"+strings.Trim(name, `"`)+"`")
		if typ == "TIMESTAMP" {
			stamps = append(stamps, i)
		}
	}
	return "SELECT " + strings.Join(names, ", "), func(v []any) []any {
		for _, i := range stamps {
			if us, ok := v[i].(int64); ok {
				v[i] = time.UnixMicro(us).UTC()
			}
		}
		return v
	}
}

// storedDigest is digestRows of a stored table of the cache (cols: its DuckDB columns),
// each value read as cutInto reads it.
func (c *store) storedDigest(ctx context.Context, table, cols string) (n int64, sum uint64, err error) {
	sel, fix := storedColumns(cols)
	rows, err := c.cl.Conn.Query(ctx, sel+" FROM "+c.cl.Table(table))
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	scan, err := scanner(rows)
	if err != nil {
		return 0, 0, err
	}
	n, sum, err = digestRows(rows.Next, func(out ...any) error {
		vals, err := scan()
		if err != nil {
			return err
		}
		for i, v := range fix(vals) {
			*out[i].(*any) = v
		}
		return nil
	}, len(rows.ColumnTypes()))
	if err == nil {
		err = rows.Err()
	}
	return n, sum, err
}

// digestRows counts the rows next and scan give (width values each) and sums a hash of
// each, which does not depend on their order.
func digestRows(next func() bool, scan func(...any) error, width int) (n int64, sum uint64, err error) {
	vals := make([]any, width)
	dest := make([]any, width)
	for i := range vals {
		dest[i] = &vals[i]
	}
	h := fnv.New64a()
	for next() {
		if err := scan(dest...); err != nil {
			return 0, 0, err
		}
		h.Reset()
		for _, v := range vals {
			if t, ok := v.(time.Time); ok {
				v = t.UnixMicro()
			}
			fmt.Fprintf(h, "%#v\x00", v)
		}
		n, sum = n+1, sum+h.Sum64()
	}
	return n, sum, nil
}
