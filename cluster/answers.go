package cluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/retrylens/retrylens/query"
)

// A cluster's stored answers. A whole report (every row, the default linking) asks the
// same questions until the next load, and on a cluster each one cost reading the rows
// to link from the shards and linking them in the reporting process. So ingest, after a
// load, does that once and stores the answers of every row, as a DuckDB file's ingest
// does (query/answers.go), with every endpoint, on the URL's server: cache_answers (name,
// program, version, answer), then cache_state (version), the commit point. The version
// names the registry and the rows on the shards: a report reads the answers only while it
// matches, so a load, a crash or a repair since makes it read the shards as before. A
// Set over them (query.Options.Answers) reads the shards itself at the first question
// they do not hold (another --window grain, --by, a rules file): the same figures, at the
// old cost.

// largeAnswer is the size from which an answer is read only when asked for.
const largeAnswer = 1 << 20

// The tables, on the URL's server.
const (
	answersTable = "cache_answers"
	stateTable   = "cache_state"
)

// clusterVersion names what the cluster holds: its registry and the rows on its shards.
func clusterVersion(ctx context.Context, cl *Cluster) (string, error) {
	var reg string
	var rows uint64
	err := cl.Conn.QueryRow(ctx, "SELECT concat(toString(count()), ':', toString(max(file_id)), ':', toString(sum(rows))) FROM "+cl.Table("files")).Scan(&reg)
	if err == nil {
		err = cl.Conn.QueryRow(ctx, "SELECT count() FROM "+cl.Table("requests")).Scan(&rows)
	}
	if err != nil {
		return "", fmt.Errorf("the cluster's version: %w", err)
	}
	return fmt.Sprintf("%s:%d", reg, rows), nil
}

// storedVersion is the version the stored answers are of, "" when there are none.
func storedVersion(ctx context.Context, cl *Cluster) (string, error) {
	var exists uint8
	if err := cl.Conn.QueryRow(ctx, "EXISTS TABLE "+cl.Table(stateTable)).Scan(&exists); err != nil || exists == 0 {
		return "", err
	}
	var v string
	err := cl.Conn.QueryRow(ctx, "SELECT any(version) FROM "+cl.Table(stateTable)).Scan(&v)
	return v, err
}

// wholeDefault reports whether qo selects every row with the default linking: what the
// stored answers are of.
func wholeDefault(qo query.Options) bool {
	return qo.Since.IsZero() && qo.Until.IsZero() && defaultLinking(qo)
}

// defaultLinking reports whether qo selects every route and links as ingest did when it
// stored the answers and the cache.
func defaultLinking(qo query.Options) bool {
	return qo.Route == "" && qo.Method == "" && (qo.MaxGap <= 0 || qo.MaxGap == query.DefaultMaxGap) && !qo.InferAttempts && !qo.NoCache
}

// storeAnswers stores the answers of every row and the cache (cut.go), unless
// this program stored those of the cluster's version already and again is false. It
// returns how long it took, zero when nothing was to do.
func (c *store) storeAnswers(ctx context.Context, again bool) (time.Duration, error) {
	start := time.Now()
	// One loader at a time (lock.go); the next finds what the last stored, and stores
	// again only when more rows came in between.
	if err := c.cl.join(ctx); err != nil {
		return 0, err
	}
	defer c.cl.leave(ctx)
	unlock, _, err := c.cl.lock(ctx, "answers", "the answers for reports", -1)
	if err != nil {
		return 0, err
	}
	defer unlock()
	v, err := clusterVersion(ctx, c.cl)
	if err != nil {
		return 0, err
	}
	if stored, err := storedVersion(ctx, c.cl); err != nil || stored == v && !again {
		var n uint64
		if err == nil {
			err = c.cl.Conn.QueryRow(ctx, "SELECT count() FROM "+c.cl.Table(answersTable)+" WHERE program = ? AND version = ?", query.ProgramID(), v).Scan(&n)
		}
		if err != nil || n > 0 {
			return 0, err
		}
	}
	qo := query.Options{MaxGap: query.DefaultMaxGap, PartRows: partRows(c.cl)}
	db, done, _, err := materialize(ctx, c.cl, qo, false)
	if err != nil {
		return 0, err
	}
	defer done()
	// The state goes first and comes back last: in between no report reads answers or
	// the stored cache.
	if err := c.cl.Conn.Exec(ctx, "DROP TABLE IF EXISTS "+c.cl.Table(stateTable)); err != nil {
		return 0, err
	}
	reset, cut := c.storeCut(ctx, v)
	if err := reset(); err != nil {
		return 0, err
	}
	qo.Counted = true
	answers, err := answerWithin(ctx, db, qo, reset, cut)
	if err != nil {
		return 0, err
	}
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + c.cl.Table(answersTable),
		// a granule a row: a question reads its own answer, not every endpoint's 11 MB
		"CREATE TABLE " + c.cl.Table(answersTable) + " (name String, program String, version String, bytes UInt64, answer String) ENGINE = MergeTree() ORDER BY name SETTINGS index_granularity = 1",
		"CREATE TABLE " + c.cl.Table(stateTable) + " (version String) ENGINE = MergeTree() ORDER BY version",
	} {
		if err := c.cl.Conn.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	err = c.insert(ctx, answersTable+" (name, program, version, bytes, answer)", func(add func(...any) error) error {
		for name, b := range answers {
			if err := add(name, query.ProgramID(), v, uint64(len(b)), string(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = c.insert(ctx, stateTable+" (version)", func(add func(...any) error) error { return add(v) })
	}
	if err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// storedAnswers reads the answers under limit bytes this program stored for version v,
// by name.
func (c *store) storedAnswers(ctx context.Context, v string, limit uint64) (map[string][]byte, error) {
	rows, err := c.cl.Conn.Query(ctx, "SELECT name, answer FROM "+c.cl.Table(answersTable)+" PREWHERE bytes < ? WHERE program = ? AND version = ?",
		limit, query.ProgramID(), v)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	answers := map[string][]byte{}
	for rows.Next() {
		var name, answer string
		if err := rows.Scan(&name, &answer); err != nil {
			return nil, err
		}
		answers[name] = []byte(answer)
	}
	return answers, rows.Err()
}

// insert sends the rows rows adds to a table of the URL's server (named with its columns)
// in one batch: the native protocol's INSERT takes its rows as blocks.
func (c *store) insert(ctx context.Context, table string, rows func(add func(...any) error) error) error {
	batch, err := c.cl.Conn.PrepareBatch(ctx, "INSERT INTO "+c.cl.DB+"."+table)
	if err != nil {
		return err
	}
	if err := rows(batch.Append); err != nil {
		batch.Abort()
		return err
	}
	return batch.Send()
}

// answers returns a lookup of the answers this program stored for the cluster's
// version, and false when it stored none. The small ones are read at once; a large one
// (every endpoint of 100K routes: 11 MB) only when it is asked for.
func (c *store) answers(ctx context.Context) (func(context.Context, string) ([]byte, bool, error), bool, error) {
	v, err := clusterVersion(ctx, c.cl)
	if err != nil {
		return nil, false, err
	}
	if stored, err := storedVersion(ctx, c.cl); err != nil || stored != v {
		return nil, false, err
	}
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1}))
	small, err := c.storedAnswers(ctx, v, largeAnswer)
	if err != nil {
		// answers another retrylens stored in another layout: read the shards
		if c.trace != nil {
			fmt.Fprintf(c.trace, "retrylens: from the cluster: the stored answers cannot be read (%v)\n", err)
		}
		return nil, false, nil
	}
	if c.trace != nil {
		fmt.Fprintf(c.trace, "retrylens: from the cluster: answers stored at ingest (version %s), %d read at once\n", v, len(small))
	}
	return func(ctx context.Context, name string) ([]byte, bool, error) {
		if b, ok := small[name]; ok {
			return b, true, nil
		}
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1}))
		var answer string
		err := c.cl.Conn.QueryRow(ctx, "SELECT answer FROM "+c.cl.Table(answersTable)+" WHERE name = ? AND program = ? AND version = ?",
			name, query.ProgramID(), v).Scan(&answer)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		return []byte(answer), err == nil, err
	}, true, nil
}
