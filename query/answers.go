package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrylens/retrylens/internal/duckerr"
)

// Stored answers. Some figures of a report are not sums of count rows: the 429 loops,
// the policy findings, hedging, backoff and linking read every attempt of the retried
// requests, and the endpoints are ranked, counted and judged on their minutes route by
// route; over every row of a large log they are most of a report's time, the same at
// every report until the next load. Refresh therefore asks them with a report's default
// options (defaultQuestions) on the cache it has just built, and stores each answer as
// JSON in cache_answers under its question's name (answerName: the call, its arguments,
// the rules, the throttling statuses, the SQL), the program that answered (ProgramID) and
// the cache's version. A Set over every row of a fresh cache reads an answer stored under
// the name of what it is asked; any other question, a range or another option, is
// computed as before. A cluster stores the same answers (Answer) and a whole report
// there looks them up through Options.Answers. An answer is stored only when its JSON reads back as the same
// value (a string that is not UTF-8 would not), so reading one changes nothing but speed.
const answersTable = cacheName + "_answers"

// defaultQuestions asks s what a report and check ask with the default options
// (cmd/retrylens's flags), and with everyEndpoint every endpoint, as JSON has them: a DuckDB
// file leaves that out (100K routes' answer, 55 MB of JSON when groups were stored with
// their figures, took as long to read back as to compute, and doubled the memory of
// ingest), a cluster keeps it (11 MB since groups are stored as their counts).
func defaultQuestions(ctx context.Context, s *Set, everyEndpoint bool) error {
	asks := []func() error{
		func() error { _, _, err := s.Span(ctx); return err },
		func() error { _, err := s.bucketsOf(ctx, minuteGrain); return err },
		func() error { _, err := s.Alerts(ctx); return err },
		func() error { _, err := s.AttemptCounts(ctx); return err },
		func() error { _, err := s.Gaps(ctx); return err },
		func() error { _, err := s.Loops(ctx); return err },
		func() error { _, err := s.Findings(ctx, DefaultMaxAttempts); return err },
		func() error { _, err := s.Hedging(ctx); return err },
		func() error { _, err := s.Linking(ctx); return err },
		func() error { _, err := s.Backoff(ctx, 0, 0); return err },
		func() error { _, err := s.rankedGroups(ctx, "route", DefaultTop); return err },
	}
	if everyEndpoint {
		asks = append(asks, func() error { _, err := s.rankedGroups(ctx, "route", 0); return err })
	}
	for _, ask := range asks {
		if err := ask(); err != nil {
			return err
		}
	}
	return nil
}

// answered returns the answer stored under name when s has stored answers (every row of a
// fresh cache, or Options.Answers), else what compute returns; a Set that records
// (answerDefaults) keeps what it computes.
func answered[T any](ctx context.Context, s *Set, name string, compute func() (T, error)) (T, error) {
	if s.answers != nil && s.recorded == nil {
		var v T
		b, ok, err := s.answers(ctx, s.answerName(name))
		if err != nil {
			return v, fmt.Errorf("%s: %w", answersTable, err)
		}
		if ok && json.Unmarshal(b, &v) == nil {
			return v, nil
		}
	}
	v, err := compute()
	if err != nil || s.recorded == nil {
		return v, err
	}
	// stored only if it reads back the same
	if b, err := json.Marshal(v); err == nil {
		var back T
		if json.Unmarshal(b, &back) == nil && reflect.DeepEqual(back, v) {
			s.recorded[s.answerName(name)] = b
		}
	}
	return v, nil
}

// storedAnswer looks up an answer in the cache the Set reads (Options.Answers).
func (s *Set) storedAnswer(ctx context.Context, name string) ([]byte, bool, error) {
	var b []byte
	err := s.conn.QueryRowContext(ctx, "SELECT answer FROM "+answersTable+
		" WHERE name = $1 AND program = $2 AND version = (SELECT version FROM "+cacheName+"_state)", name, ProgramID()).Scan(&b)
	if err == sql.ErrNoRows || duckerr.Missing(err) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// answerName names a question: what was asked of the Set (call), with the options the Set
// holds that change its answer, and the statements that answer it.
func (s *Set) answerName(call string) string {
	return fmt.Sprintf("%s rules=%+v throttle=%s sql=%s", call, s.rules, s.throttle, statementsDigest)
}

// statementsDigest changes with any statement file.
var statementsDigest = func() string {
	h := sha256.New()
	err := fs.WalkDir(sqlFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sqlFiles, path)
		h.Write([]byte(path + "\x00"))
		h.Write(b)
		return err
	})
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}()

// ProgramID names this build of retrylens, so that an upgrade does not read what the last
// version answered: the commit it was built from, or, from a tree with changes (or built
// without its history, as by go test), the executable's size and time; an executable it
// cannot stat gets a name nothing else has.
var ProgramID = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		modified := true
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value == "true"
			}
		}
		if rev != "" && !modified {
			return rev
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			return strconv.FormatInt(fi.Size(), 10) + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
		}
	}
	return "pid" + strconv.Itoa(os.Getpid())
})

// storeAnswers asks the default questions of every row of the cache tx has just brought
// to version, and stores the answers in place of those it held.
func storeAnswers(ctx context.Context, tx *sql.Tx, version string) error {
	const table = "cache_answering"
	s, _, _ := newSet(tx, table, Options{MaxGap: DefaultMaxGap})
	s.cached, s.storedParts = true, true
	err := s.build(ctx, nil, nil)
	var answers map[string][]byte
	if err == nil {
		answers, err = s.answerDefaults(ctx, false)
	}
	if err != nil { // (its temporary tables go with refresh's connection)
		return fmt.Errorf("answers: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+answersTable); err != nil {
		return err
	}
	for name, b := range answers {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+answersTable+" VALUES ($1, $2, $3, $4)", name, ProgramID(), version, b); err != nil {
			return err
		}
	}
	return nil
}

// answerDefaults asks s the default questions and returns the answers it can store, by name.
func (s *Set) answerDefaults(ctx context.Context, everyEndpoint bool) (map[string][]byte, error) {
	s.recorded = map[string][]byte{}
	defer func() { s.recorded = nil }()
	err := defaultQuestions(ctx, s, everyEndpoint)
	return s.recorded, err
}

// Answer opens a Set of every row of db (o: the default linking, as a cluster's rows are
// counted, see Options.Counted) and returns, by name, the answers to the default
// questions and every endpoint: what a cluster stores for Options.Answers. Then it calls
// cut, if set, with the rows of each of the Set's CutTables: what a cluster stores for
// Options.Cut.
func Answer(ctx context.Context, db *sql.DB, o Options, cut func(CutTable, CutRows) error) (map[string][]byte, error) {
	if o.MaxGap <= 0 {
		o.MaxGap = DefaultMaxGap
	}
	if !o.whole() {
		return nil, errors.New("query: answers are of every row, with the default linking")
	}
	s, err := Open(ctx, db, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	answers, err := s.answerDefaults(ctx, true)
	if err != nil || cut == nil {
		return answers, err
	}
	for _, t := range CutTables() {
		rows := &sliceRows{ctx: ctx, conn: s.conn, table: s.table + "_" + t.Name}
		err := cut(t, rows)
		if cerr := rows.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("cache_%s: %w", t.Name, err)
		}
	}
	return answers, nil
}

// CutRows are the rows of a table of the cache that Answer gives its cut function.
type CutRows interface {
	ColumnTypes() ([]*sql.ColumnType, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// sliceRows reads a table a slice of rows at a time, by rowid (DuckDB skips the other
// row groups): the driver holds a query's whole result in memory, outside DuckDB's
// limit, and the attempts of 10M lines took 450 MB so.
type sliceRows struct {
	ctx   context.Context
	conn  setConn
	table string
	rows  *sql.Rows
	from  int64          // the rowid the current slice starts at
	last  *sql.NullInt64 // the table's last rowid, once read
	err   error
}

// rowSlice is how many rows sliceRows reads at a time.
const rowSlice = 1 << 14

func (r *sliceRows) query() bool {
	if r.last == nil {
		// rowids have gaps where rows were deleted (sumInto), so the end is the last
		r.last = new(sql.NullInt64)
		if r.err = r.conn.QueryRowContext(r.ctx, "SELECT max(rowid) FROM "+r.table).Scan(r.last); r.err != nil {
			return false
		}
	}
	r.rows, r.err = r.conn.QueryContext(r.ctx, fmt.Sprintf("SELECT * FROM %s WHERE rowid >= %d AND rowid < %d", r.table, r.from, r.from+rowSlice))
	return r.err == nil
}

func (r *sliceRows) ColumnTypes() ([]*sql.ColumnType, error) {
	if r.rows == nil && !r.query() {
		return nil, r.err
	}
	return r.rows.ColumnTypes()
}

func (r *sliceRows) Next() bool {
	for r.err == nil {
		if r.rows == nil && !r.query() {
			return false
		}
		if r.rows.Next() {
			return true
		}
		r.from += rowSlice
		if r.err = r.close(); r.err != nil || !r.last.Valid || r.from > r.last.Int64 {
			return false
		}
	}
	return false
}

func (r *sliceRows) Scan(dest ...any) error { return r.rows.Scan(dest...) }

func (r *sliceRows) Err() error { return r.err }

func (r *sliceRows) close() error {
	if r.rows == nil {
		return nil
	}
	err := errors.Join(r.rows.Err(), r.rows.Close())
	r.rows = nil
	return err
}

// checkAnswers compares the answers this program stored with those s, a Set of every row
// linked again, gives, and names the questions whose answers differ.
func checkAnswers(ctx context.Context, tx *sql.Tx, s *Set) ([]string, error) {
	answers, err := s.answerDefaults(ctx, false)
	if err != nil {
		return nil, err
	}
	var differ []string
	for name, b := range answers {
		var stored []byte
		err := tx.QueryRowContext(ctx, "SELECT answer FROM "+answersTable+" WHERE name = $1 AND program = $2", name, ProgramID()).Scan(&stored)
		switch {
		case err == sql.ErrNoRows:
		case err != nil:
			return nil, err
		case !bytes.Equal(stored, b):
			call, _, _ := strings.Cut(name, " rules=")
			differ = append(differ, fmt.Sprintf("%s: the stored answer to %s differs from the rows' own", answersTable, call))
		}
	}
	slices.Sort(differ)
	return differ, nil
}

// ensureAnswers creates the answers' table where there is none, so that a query of it
// in a transaction cannot fail (a statement that fails ends the transaction).
func ensureAnswers(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+answersTable+
		" (name VARCHAR NOT NULL, program VARCHAR NOT NULL, version VARCHAR NOT NULL, answer BLOB NOT NULL)")
	return err
}

// answersStored reports whether this program has stored answers for the cache's version.
func answersStored(ctx context.Context, q querier, version string) (bool, error) {
	var n int64
	err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+answersTable+" WHERE program = $1 AND version = $2", ProgramID(), version).Scan(&n)
	if duckerr.Missing(err) {
		return false, nil
	}
	return n > 0, err
}

// countsList is c as JSON keeps it in the answers: its counts in countColumns' order.
func countsList(c counts) []int64 {
	l := make([]int64, len(countColumns))
	for i, col := range countColumns {
		l[i] = *col.place(&c)
	}
	return l
}

// countsOf is the counts of a countsList.
func countsOf(l []int64) (counts, error) {
	var c counts
	if len(l) != len(countColumns) {
		return c, fmt.Errorf("%d counts, want %d", len(l), len(countColumns))
	}
	for i, col := range countColumns {
		*col.place(&c) = l[i]
	}
	return c, nil
}

// A bucket as JSON, for the answers.
type bucketJSON struct {
	Start  time.Time
	Valid  bool
	Counts []int64
}

func (b bucket) MarshalJSON() ([]byte, error) {
	return json.Marshal(bucketJSON{Start: b.start, Valid: b.valid, Counts: countsList(b.c)})
}

func (b *bucket) UnmarshalJSON(data []byte) error {
	var v bucketJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	c, err := countsOf(v.Counts)
	*b = bucket{start: v.Start, valid: v.Valid, c: c}
	return err
}

// A group's counts as JSON, for the answers.
type groupJSON struct {
	Key    string
	Counts []int64
	Fired  []string `json:",omitempty"`
}

func (g groupCounts) MarshalJSON() ([]byte, error) {
	return json.Marshal(groupJSON{Key: g.key, Counts: countsList(g.c), Fired: g.fired})
}

func (g *groupCounts) UnmarshalJSON(data []byte) error {
	var v groupJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	c, err := countsOf(v.Counts)
	*g = groupCounts{key: v.Key, c: c, fired: v.Fired}
	return err
}
