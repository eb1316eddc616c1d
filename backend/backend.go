// Package backend is where retrylens's rows live, behind one interface: a DuckDB file,
// or a ClickHouse cluster (docs/scale.md). A store is opened by its location, as restic
// opens a repository: a URL whose scheme names a registered backend, else a DuckDB
// file's path. Commands reach storage only through here; the loading engine (ingest) and
// the counting (query) do the work.
package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
)

// Store is an open retrylens database.
type Store interface {
	// Ingest loads files exactly once, repairing first what a killed load left, and
	// brings what reports read up to date. Its error says what did not load; the
	// result holds what did.
	Ingest(ctx context.Context, files []string, opt ingest.Options, ev Events) (Ingested, error)
	// Health is what a report on the store should say beside its figures.
	Health(ctx context.Context) Health
	// Rows returns the database a report of qo counts (query.Open), and sets qo to read
	// it: its endpoint resolved to a method and route with route, and where the store
	// counts on its own side, qo.Counted. With every, every row is there (budget
	// replays each attempt). The store closes it.
	Rows(ctx context.Context, qo *query.Options, route func(string) string, every bool) (*sql.DB, error)
	// Verify checks the rows against the registry of loads and, where the store keeps
	// one, the report cache against the rows; with repair it fixes what it finds.
	Verify(ctx context.Context, repair bool) (Verified, error)
	// Run runs one statement in the store's own SQL.
	Run(ctx context.Context, q string) (cols []string, rows [][]any, err error)
	// Close closes the store; for a file, what Close returns says whether it was written.
	Close() error
	// String is where the store is, for messages (a URL without its password).
	String() string
}

// Mode is what an open may do.
type Mode int

const (
	// ReadOnly changes nothing, not even an old database's schema: reports, query and
	// verify. The store must exist.
	ReadOnly Mode = iota
	// ReadWrite may change an existing store (query --write, verify --repair).
	ReadWrite
	// Create may also create the store (ingest).
	Create
)

// Options are how to open a store.
type Options struct {
	Mode Mode
	// Trace, when set, is told what a report read from where (a cluster: the rows and
	// count rows that travelled), for measurements.
	Trace io.Writer
	// Wait is how long to wait for a file another process holds (DuckDB allows one
	// writer, or readers: a report waits for a watch's batch, docs/live.md); 0 fails at once.
	Wait time.Duration
	// Waiting, when set, is called once when the open starts waiting, with why.
	Waiting func(err error)
	// Getenv, when set, is the environment a store reads its measurement knobs from (a
	// cluster's RETRYLENS_PART_ROWS and RETRYLENS_COUNT_ROWS: docs/scale.md).
	Getenv func(string) string
}

// Events are called during an ingest, for what a command shows while it runs.
type Events struct {
	// Loaded is called when the lines are loaded, before the store's own work after it
	// (a DuckDB file's report cache).
	Loaded func(res ingest.Result)
	// Caching is called before a report cache build that has rows to link.
	Caching func()
}

// Ingested is what an ingest did.
type Ingested struct {
	Load ingest.Result
	// Removed: nothing loaded into a store the ingest created, so it was removed (a
	// later report would read an empty file as a quiet, healthy log).
	Removed bool
	// Cache is how the report cache was brought up to date (query.CacheRebuilt,
	// CacheUpdated; "" when nothing was to do or the store keeps none), in CacheTime.
	Cache     string
	CacheTime time.Duration
	// CacheErr is why the cache could not be built: reports are slower, not wrong.
	CacheErr error
}

// Health is what a report should say beside the figures.
type Health struct {
	Rejected, Lines int64 // lines ingest rejected, of those it read
	Kept            int64 // rejected lines kept in full (the rejects table): the first of each file
	// Repeats are rows that repeat rows of another load: the same traffic logged twice,
	// counted twice by every figure.
	Repeats int64
	// Mismatch, when not "", is how the rows differ from the registry (a killed load the
	// next ingest repairs).
	Mismatch string
}

// Warnings are what a report on the store says beside its figures, a line each: rows
// that do not match the registry (a killed load, until the next ingest repairs it),
// rows loaded twice (counted twice), and with notes the lines ingest rejected (in no
// figure): the postmortem says so every time, a check or a budget only when they are 1 %
// of the lines or more.
func (h Health) Warnings(notes bool) []string {
	var w []string
	if h.Mismatch != "" {
		w = append(w, fmt.Sprintf("warning: the database's rows do not match its registry (%s): figures may be off; run 'retrylens verify --repair' (or any ingest)", h.Mismatch))
	}
	if share := float64(h.Rejected) / float64(max(h.Lines, 1)); h.Rejected > 0 && h.Lines > 0 && (notes || share >= 0.01) {
		n := fmt.Sprintf("note: ingest rejected %d of the %d lines loaded (%.1f%%): they are in no figure; by reason: retrylens query 'SELECT * FROM reject_counts'",
			h.Rejected, h.Lines, 100*share)
		if h.Kept > 0 {
			n += fmt.Sprintf(", the %d kept in full with file and line: 'SELECT * FROM rejects'", h.Kept)
		}
		w = append(w, n)
	}
	if h.Repeats > 0 {
		w = append(w, fmt.Sprintf("warning: %d rows repeat rows of another load (the same traffic logged twice?): every figure counts them twice; "+
			"load the logs into a new --db with 'retrylens ingest --dedupe'", h.Repeats))
	}
	return w
}

// Verified is what Verify found and did, a line each, for a person.
type Verified struct {
	Lines []string
	// Damaged: damage was found and is still there (Verify was not asked to repair).
	Damaged bool
}

var (
	// ErrNoDatabase means a store that must exist does not, or holds nothing yet.
	ErrNoDatabase = errors.New("no database")
	// ErrUnsupported means the store cannot do what was asked (a flag it does not take).
	ErrUnsupported = errors.New("not supported")
)

// Opener opens a store at a registered scheme's location.
type Opener func(ctx context.Context, location string, o Options) (Store, error)

// schemes are the registered URL schemes (Register); any other location is a DuckDB
// file's path.
var schemes = map[string]Opener{}

// Register makes Open open locations of scheme ("clickhouse" for clickhouse://…) with
// open: a store's package registers itself when it is imported (package cluster), as a
// database/sql driver does, so that only the commands link its client.
func Register(scheme string, open Opener) { schemes[strings.ToLower(scheme)] = open }

var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// Open opens the store at location: clickhouse://HOST:PORT/DATABASE?cluster=NAME, or a
// DuckDB file's path.
func Open(ctx context.Context, location string, o Options) (Store, error) {
	if m := urlScheme.FindStringSubmatch(location); m != nil {
		open, ok := schemes[strings.ToLower(m[1])]
		if !ok {
			return nil, fmt.Errorf("--db %q: %w: want a DuckDB file's path, or clickhouse://HOST:PORT/DATABASE?cluster=NAME",
				location, ingest.ErrNotDuckDB)
		}
		return open(ctx, location, o)
	}
	deadline := time.Now().Add(o.Wait)
	for {
		st, err := openFile(ctx, location, o)
		if !errors.Is(err, ingest.ErrLocked) || !time.Now().Before(deadline) {
			return st, err
		}
		if o.Waiting != nil {
			o.Waiting(err)
			o.Waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsFile reports whether location is a DuckDB file's path rather than a URL.
func IsFile(location string) bool { return urlScheme.FindStringSubmatch(location) == nil }

// Temp loads files into a private in-memory store, for a report on FILE arguments. Its
// error says what did not load (the result says what did).
func Temp(ctx context.Context, files []string, opt ingest.Options) (Store, ingest.Result, error) {
	return loadTemp(ctx, files, opt)
}

// Counts are the count tables a report of qo reads from st (query.CountTables), each
// summed by its keys and sorted, its first row the column names: what every store's stage
// one must agree on for the same rows, whichever rows it counted where.
func Counts(ctx context.Context, st Store, qo query.Options) (map[string][][]any, error) {
	db, err := st.Rows(ctx, &qo, nil, false)
	if err != nil {
		return nil, err
	}
	set, err := query.Open(ctx, db, qo)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	out := map[string][][]any{}
	for _, table := range query.CountTables {
		cols, rows, err := set.Counts(ctx, table.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table.Name, err)
		}
		header := make([]any, len(cols))
		for i, c := range cols {
			header[i] = c
		}
		out[table.Name] = append([][]any{header}, rows...)
	}
	return out, nil
}
