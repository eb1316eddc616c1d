package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
)

// Partial answers. An answer that is not a sum of count rows (the 429 loops, ...) is kept
// as partial answers per minute of its requests' first attempt, in a table whose rows merge
// into the answer of any range of whole minutes: counts add up, maxima take the largest,
// the longest few keep the first of each minute's own longest few. A minute's partial is
// computed from the attempts of the requests that began in it alone (a request lives in
// one minute), so that an update recomputes the minutes its rows touched and only those
// (updatePartials), and a report merges the minutes of its range.
//
// Each answer is two statements of one file: <name>_partial, the partials of a Set's
// requests (or of those that began in the minutes of .Touched), and the file itself, their
// merge from .Parts where .Within. The cache stores the partials of every row
// (cache_p_<name>) with the default options; a Set that reads the stored cache in the same
// database merges them, cut to its range; any other Set (a range linked again, other
// options, a cluster's rows) computes its own into a temporary table and merges those.
var partials = []partial{
	{name: "loops", args: []any{worstLoops}},
}

// A partial is an answer kept per minute: its file (<name>.sql) and the arguments both of
// its statements take.
type partial struct {
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
	Touched         string // a table of minutes (m): only the requests that began in them
	Parts, Within   string // the partials the merge reads, and the condition on their minute
}

func renderPartial(name string, d partialData) (string, error) {
	var q bytes.Buffer
	if err := sqlTmpl.ExecuteTemplate(&q, name, d); err != nil {
		return "", err
	}
	return q.String(), nil
}

// partialsDigest changes with the partial statements: the cache's version carries it, so
// that partials another retrylens stored are built again (sqlDigest).
func partialsDigest() string {
	h := sha256.New()
	for _, p := range partials {
		b, err := fs.ReadFile(sqlFiles, p.name+".sql")
		if err != nil {
			panic(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// buildPartials stores the partials of every row of the cache (cacheName's tables), in place
// of any it held.
func buildPartials(ctx context.Context, tx execer) error {
	for _, p := range partials {
		q, err := renderPartial(p.name+"_partial", partialData{Table: cacheName, Throttle: defaultThrottle})
		if err != nil {
			return err
		}
		t := cacheName + "_p_" + p.name
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "CREATE TABLE "+t+" AS "+q, p.args...); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// updatePartials computes again the stored partials of the minutes in the table touched
// (m), from the cache's tables as they are now.
func updatePartials(ctx context.Context, tx execer, touched string) error {
	for _, p := range partials {
		q, err := renderPartial(p.name+"_partial", partialData{Table: cacheName, Throttle: defaultThrottle, Touched: touched})
		if err != nil {
			return err
		}
		t := cacheName + "_p_" + p.name
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE minute IN (SELECT m FROM "+touched+")"); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+" "+q, p.args...); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

// StoredTables are every table of the stored cache after "cache_" that the rows alone
// decide (not its state or its answers): the chain, the count tables and the partials.
func StoredTables() []string { return slices.Concat(cachedTables(), partialTables()) }

// partialTables are the stored partials' tables after cacheName.
func partialTables() []string {
	var names []string
	for _, p := range partials {
		names = append(names, "p_"+p.name)
	}
	return names
}

// merged runs the merge of the partial answer name for s and scans its one row into dest:
// from the stored partials when s reads the stored cache with the default options (cut to
// its range), else from partials computed from s's own tables.
func (s *Set) merged(ctx context.Context, name string, dest ...any) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	var p partial
	for _, q := range partials {
		if q.name == name {
			p = q
		}
	}
	d := partialData{Table: s.table, Throttle: s.throttle, Within: "true"}
	if s.storedParts && s.throttle == defaultThrottle {
		d.Parts = cacheName + "_p_" + name
		if s.lit.Bounded {
			d.Within = "minute >= " + s.lit.Since + " AND minute < " + s.lit.Until
		}
	} else {
		q, err := renderPartial(name+"_partial", d)
		if err != nil {
			return err
		}
		d.Parts = s.table + "_p_" + name
		if _, err := s.conn.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+d.Parts+" AS "+q, p.args...); err != nil {
			return fmt.Errorf("%s_partial: %w", name, err)
		}
	}
	q, err := renderPartial(name+".sql", d)
	if err != nil {
		return err
	}
	if err := s.conn.QueryRowContext(ctx, q, p.args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s.sql: %w", name, err)
	}
	return nil
}

// checkPartials compares the stored partials with those of the tables built again under
// the prefix again (CheckCache), row by row, and names each that differs.
func checkPartials(ctx context.Context, tx querier, again string) ([]string, error) {
	var problems []string
	for _, p := range partials {
		q, err := renderPartial(p.name+"_partial", partialData{Table: again, Throttle: defaultThrottle})
		if err != nil {
			return nil, err
		}
		stored, built := cacheName+"_p_"+p.name, again+"_p_"+p.name
		if _, err := tx.ExecContext(ctx, "CREATE TEMP TABLE "+built+" AS "+q, p.args...); err != nil {
			return nil, fmt.Errorf("%s: %w", built, err)
		}
		d, err := differ(ctx, tx, stored, built)
		if err != nil {
			return nil, err
		}
		if d != "" {
			problems = append(problems, d)
		}
	}
	return problems, nil
}

// defaultThrottle is the throttling statuses a Set counts without --throttle-status.
const defaultThrottle = "429"
