// Package cluster is retrylens's database on a ClickHouse cluster (docs/scale.md), all
// of it: the connection, loading (an ingest.Target), checking and repairing the rows, and
// the store that reports read (a backend.Store). Importing it registers the
// clickhouse:// scheme with package backend; nothing else links ClickHouse's driver.
package cluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/sanitize"
	"github.com/retrylens/retrylens/query"
)

func init() { backend.Register("clickhouse", openCluster) }

// store is a ClickHouse cluster as a backend.Store: the rows sharded by link key, the
// registry on the server the URL names, no report cache (reports count on the shards).
type store struct {
	cl    *Cluster
	url   string // redacted
	trace io.Writer
	read  []*sql.DB // what Rows handed out, closed with the store
	write bool      // opened to change it: Run's statements may (query --write)
}

func openCluster(ctx context.Context, location string, o backend.Options) (backend.Store, error) {
	cl, err := OpenCluster(ctx, location)
	if err != nil {
		return nil, err
	}
	cl.Wait, cl.Waiting = o.Wait, o.Waiting
	if o.Getenv != nil {
		// measurement and test knobs: how the loader cuts its work (read.go)
		cl.PartRows, _ = strconv.Atoi(o.Getenv("RETRYLENS_PART_ROWS"))
		cl.CountRows, _ = strconv.Atoi(o.Getenv("RETRYLENS_COUNT_ROWS"))
	}
	c := &store{cl: cl, url: RedactURL(location), trace: o.Trace, write: o.Mode != backend.ReadOnly}
	if o.Mode != backend.Create {
		if n, err := cl.Loads(ctx); err != nil || n == 0 {
			cl.Close()
			return nil, errors.Join(err, fmt.Errorf("%w: nothing was loaded into %s yet: run 'retrylens ingest --db URL FILE…' first",
				backend.ErrNoDatabase, sanitize.Text(c.url)))
		}
	}
	return c, nil
}

func (c *store) String() string { return c.url }

func (c *store) Close() error {
	for _, db := range c.read {
		db.Close()
	}
	c.read = nil
	if c.cl == nil {
		return nil
	}
	err := c.cl.Close()
	c.cl = nil
	return err
}

func (c *store) Ingest(ctx context.Context, files []string, opt ingest.Options, ev backend.Events) (backend.Ingested, error) {
	if opt.Dedupe {
		return backend.Ingested{}, fmt.Errorf("--dedupe works on a DuckDB database, %w yet on a ClickHouse cluster", backend.ErrUnsupported)
	}
	opt.Spool = "" // streams are copied into $TMPDIR
	res, err := LoadCluster(ctx, c.cl, files, opt)
	if ev.Loaded != nil {
		ev.Loaded(res)
	}
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("some input was not loaded:\n%w", err)
	}
	out := backend.Ingested{Load: res}
	if ctx.Err() != nil || opt.NoAnswers {
		return out, err
	}
	// The answers of whole reports (answers.go), for what did load even when some
	// input failed; without them reports read the shards, as slow as before, not wrong.
	if ev.Caching != nil && res.Totals().Rows > 0 {
		ev.Caching()
	}
	took, aerr := c.storeAnswers(ctx, false)
	switch {
	case aerr != nil && ctx.Err() != nil:
		return out, errors.Join(err, aerr)
	case aerr != nil:
		out.CacheErr = aerr
	case took > 0:
		out.Cache, out.CacheTime = query.CacheRebuilt, took
	}
	return out, err
}

func (c *store) Health(ctx context.Context) backend.Health {
	var h backend.Health
	if d, err := CheckCluster(ctx, c.cl); err == nil && !d.OK() {
		h.Mismatch = d.Found()
	}
	c.cl.Conn.QueryRow(ctx, "SELECT toInt64(sum(rejected)), toInt64(sum(lines)) FROM "+c.cl.Table("files")).Scan(&h.Rejected, &h.Lines)
	c.cl.Conn.QueryRow(ctx, "SELECT toInt64(count()) FROM "+c.cl.Table("rejects")).Scan(&h.Kept)
	return h
}

func (c *store) Rows(ctx context.Context, qo *query.Options, route func(string) string, every bool) (*sql.DB, error) {
	if qo.Route != "" {
		routes, err := clusterRoutes(ctx, c.cl)
		if err != nil {
			return nil, err
		}
		qo.Method, qo.Route, err = query.ResolveEndpoint(ctx, routes, qo.Route, route)
		routes.Close()
		if err != nil {
			return nil, err
		}
	}
	// read copies into db what a Set of o reads from the shards (with the range's span
	// unless a cut of the stored cache read it).
	read := func(ctx context.Context, db *sql.DB, o query.Options, span bool) error {
		tr, err := fill(ctx, c.cl, db, o, every, span)
		if err == nil && c.trace != nil {
			fmt.Fprintf(c.trace, "retrylens: from the cluster: %d rows to link (%.1fs), %d count rows standing for %d rows (%.1fs)\n",
				tr.Rows, tr.RowsTime.Seconds(), tr.CountRows, tr.CountedRows, tr.CountsTime.Seconds())
		}
		return err
	}
	if !every && cutRange(*qo) {
		// The stored cache cut to the range (cut.go), and the shards for questions
		// that read rows.
		db, ok, err := c.readCut(ctx, *qo)
		if err != nil {
			return nil, err
		}
		if ok {
			o := *qo
			qo.Counted, qo.Cut = true, true
			qo.Fill = func(ctx context.Context) error { return read(ctx, db, o, false) }
			return db, nil
		}
	}
	if !every && wholeDefault(*qo) {
		// The answers ingest stored (answers.go), and the shards for any other.
		answers, ok, err := c.answers(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			db, err := ingest.Open(ctx, "") // empty until Fill
			if err != nil {
				return nil, err
			}
			c.read = append(c.read, db)
			o := *qo
			qo.Counted, qo.Answers = true, answers
			qo.Fill = func(ctx context.Context) error { return read(ctx, db, o, true) }
			return db, nil
		}
	}
	db, err := ingest.Open(ctx, "")
	if err != nil {
		return nil, err
	}
	c.read = append(c.read, db)
	if err := read(ctx, db, *qo, true); err != nil {
		return nil, err
	}
	qo.Counted = true
	return db, nil
}

func (c *store) Run(ctx context.Context, q string) ([]string, [][]any, error) {
	return runCluster(ctx, c.cl, q, c.write)
}

func (c *store) Verify(ctx context.Context, repair bool) (backend.Verified, error) {
	var v backend.Verified
	damage, err := CheckCluster(ctx, c.cl)
	if err != nil {
		return v, err
	}
	for _, p := range damage.Problems() {
		v.Lines = append(v.Lines, sanitize.Text(p))
	}
	switch {
	case damage.OK():
		v.Lines = append(v.Lines, "registry: every load's rows on the shards as registered: ok")
	case repair:
		n, err := RepairCluster(ctx, c.cl, damage)
		if err != nil {
			return v, err
		}
		v.Lines = append(v.Lines, fmt.Sprintf("repaired: %s (%d rows deleted)", damage.Summary(), n))
	default:
		v.Damaged = true
	}
	lines, differ, err := c.checkStored(ctx)
	if err != nil {
		return v, fmt.Errorf("the answers and cache stored for reports: %w", err)
	}
	v.Lines = append(v.Lines, lines...)
	if differ && repair {
		if _, err := c.storeAnswers(ctx, true); err != nil {
			return v, fmt.Errorf("store the answers and cache again: %w", err)
		}
		v.Lines = append(v.Lines, "repaired: the answers and cache stored again from the rows")
	}
	v.Damaged = v.Damaged || differ && !repair
	return v, nil
}
