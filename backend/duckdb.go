package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/sanitize"
	"github.com/retrylens/retrylens/query"
)

// file is a DuckDB file: the rows, the registry of loads and the report cache in one
// database (docs/internals.md).
type file struct {
	db    *sql.DB
	path  string // "" for a private in-memory database
	mode  Mode
	fresh bool // this open created it
}

func openFile(ctx context.Context, path string, o Options) (Store, error) {
	_, err := os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if missing && o.Mode != Create {
		return nil, fmt.Errorf("%w at %s: run 'retrylens ingest FILE…' first", ErrNoDatabase, path)
	}
	open := ingest.Open
	if o.Mode == ReadOnly {
		open = ingest.OpenReadOnly
	}
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	return &file{db: db, path: path, mode: o.Mode, fresh: missing}, nil
}

func loadTemp(ctx context.Context, files []string, opt ingest.Options) (Store, ingest.Result, error) {
	db, err := ingest.Open(ctx, "")
	if err != nil {
		return nil, ingest.Result{}, err
	}
	// Load in parallel (see LoadTuned), then give the queries their default back.
	if _, err := db.ExecContext(ctx, "SET preserve_insertion_order = false"); err != nil {
		db.Close()
		return nil, ingest.Result{}, err
	}
	res, err := ingest.Load(ctx, db, files, opt)
	if _, rerr := db.ExecContext(ctx, "RESET preserve_insertion_order"); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		db.Close()
		return nil, res, fmt.Errorf("some input was not loaded:\n%w", err)
	}
	return &file{db: db, mode: Create}, res, nil
}

func (f *file) String() string {
	if f.path == "" {
		return "the temporary database"
	}
	return f.path
}

func (f *file) Close() error {
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}

func (f *file) Ingest(ctx context.Context, files []string, opt ingest.Options, ev Events) (Ingested, error) {
	opt.Spool = f.path + ".stream-" // a stream is copied beside the database, once
	res, loadErr := ingest.LoadTuned(ctx, f.db, files, opt)
	out := Ingested{Load: res}
	if ev.Loaded != nil {
		ev.Loaded(res)
	}
	if f.fresh && ingest.RemoveIfEmpty(ctx, f.db, f.path) {
		f.db, out.Removed = nil, true
		if loadErr != nil {
			return out, fmt.Errorf("nothing loaded, so no database was created at %s:\n%w", f.path, loadErr)
		}
		return out, nil
	}
	if loadErr != nil && ctx.Err() != nil {
		return out, loadErr
	}
	// What a whole-database report would link again every time, stored once (see
	// query.Refresh), for what did load even when some input failed. A cache that could
	// not be built costs reports speed, not correctness: the load stands, unless the
	// file itself is damaged.
	if ev.Caching != nil && res.Totals().Rows > 0 {
		ev.Caching()
	}
	start := time.Now()
	how, err := query.RefreshAfterLoad(ctx, f.db, !opt.NoAnswers)
	switch {
	case err != nil && (ingest.Damaged(err) || ctx.Err() != nil):
		return out, errors.Join(loadErr, err)
	case err != nil:
		out.CacheErr = err
	default:
		out.Cache, out.CacheTime = how, time.Since(start)
	}
	if loadErr != nil {
		return out, fmt.Errorf("some input was not loaded:\n%w", loadErr)
	}
	return out, nil
}

func (f *file) Health(ctx context.Context) Health {
	var h Health
	// A killed ingest can leave rows no load registered until the next ingest repairs
	// them (35 ms on 10M rows). A database too old for the check is left to ingest and
	// verify, and one from before a column has no count of it.
	if d, err := ingest.Check(ctx, f.db, false); err == nil && !d.OK() {
		h.Mismatch = d.Found()
	}
	f.db.QueryRowContext(ctx, "SELECT coalesce(sum(rejected), 0), coalesce(sum(lines), 0) FROM files").Scan(&h.Rejected, &h.Lines)
	f.db.QueryRowContext(ctx, "SELECT coalesce(sum(repeats), 0) FROM files").Scan(&h.Repeats)
	f.db.QueryRowContext(ctx, "SELECT count(*) FROM rejects").Scan(&h.Kept)
	return h
}

func (f *file) Rows(ctx context.Context, qo *query.Options, route func(string) string, _ bool) (*sql.DB, error) {
	if qo.Route != "" {
		var err error
		if qo.Method, qo.Route, err = query.ResolveEndpoint(ctx, f.db, qo.Route, route); err != nil {
			return nil, err
		}
	}
	return f.db, nil
}

func (f *file) Run(ctx context.Context, q string) ([]string, [][]any, error) {
	cols, vals, err := query.Run(ctx, f.db, q)
	if err != nil && f.mode == ReadOnly && strings.Contains(err.Error(), "read-only mode") {
		// DuckDB names every statement it refuses here "EXECUTE" (it runs as a prepared one)
		verb := "this statement"
		if w := strings.Fields(q); len(w) > 0 {
			verb = "a " + strings.ToUpper(w[0])
		}
		return nil, nil, fmt.Errorf("%s would change the database, which query opens read-only: add --write to allow it", verb)
	}
	return cols, vals, err
}

func (f *file) Verify(ctx context.Context, repair bool) (Verified, error) {
	var v Verified
	say := func(format string, args ...any) { v.Lines = append(v.Lines, fmt.Sprintf(format, args...)) }
	if repair && f.mode == ReadOnly {
		return v, errors.New("verify --repair needs the database opened for writing")
	}
	var loads, rows int64
	if err := f.db.QueryRowContext(ctx, "SELECT count(*), (SELECT count(*) FROM requests) FROM files").Scan(&loads, &rows); err != nil {
		return v, err
	}
	// Every block of every table is read back first: a damaged file fails here, whatever
	// the registry says.
	if err := ingest.ReadAll(ctx, f.db); err != nil {
		return v, err
	}
	damage, err := ingest.Check(ctx, f.db, true)
	if err != nil {
		return v, err
	}
	for _, p := range damage.Problems() {
		say("%s", sanitize.Text(p))
	}
	if damage.OK() {
		say("registry: %d loads, %d rows, each line once: ok", loads, rows)
	}
	if repair && !damage.OK() {
		n, err := ingest.Repair(ctx, f.db, damage)
		if err != nil {
			return v, err
		}
		say("repaired: %s (%d rows deleted)", damage.Summary(), n)
	}
	if err := query.SetCacheMemory(ctx, f.db); err != nil {
		return v, err
	}
	state, diffs, err := query.CheckCache(ctx, f.db)
	if err != nil {
		return v, fmt.Errorf("report cache: %w", err)
	}
	for _, d := range diffs {
		say("report cache: %s", d)
	}
	switch state {
	case query.CacheMatches:
		say("report cache: matches the rows")
	case query.CacheNone:
		say("report cache: none (reports link the rows themselves)")
	case query.CacheStale:
		say("report cache: out of date, not read by reports (the next ingest rebuilds it)")
	}
	if repair && state != query.CacheMatches {
		if err := query.Rebuild(ctx, f.db); err != nil {
			return v, fmt.Errorf("rebuild the report cache: %w", err)
		}
		say("repaired: report cache rebuilt from the rows")
	}
	v.Damaged = !repair && (!damage.OK() || state == query.CacheDiffers)
	return v, nil
}
