package ingest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/retrylens/retrylens/parse"
)

// Options controls a load.
type Options struct {
	// Format parses every file; nil detects the format of each file from its first lines.
	Format *parse.Format
	// Samples is how many rejected lines of each file are kept in full (default 20).
	// Every rejected line is counted whatever this says.
	Samples int
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Spool is where a stream (stdin, a pipe, a FIFO) is copied before it is loaded: a
	// path prefix, the file being Spool + a random suffix. Spool files a killed run left
	// are removed first. "" copies into $TMPDIR and removes nothing else.
	Spool string
	// Now is the clock for loaded_at; nil means time.Now.
	Now func() time.Time
	// Router turns URIs into routes; nil applies the built-in rules only.
	Router *Router
	// MaxRoutes is the number of distinct routes past which the result names hotspots
	// (default 500): routes are what endpoint tables group by.
	MaxRoutes int64
	// ChunkBytes is about how much of a file each transaction loads (default 256 MiB): a
	// load killed half way resumes after the last chunk that committed.
	ChunkBytes int64
	// Progress, when set, is given each file's path and the bytes about to be loaded
	// (-1: unknown) and returns a writer that is sent those bytes as they are read.
	Progress func(path string, size int64) io.WriteCloser
	// Dedupe leaves out the rows that repeat rows of earlier loads (see repeats); without
	// it they are loaded and counted in File.Repeats.
	Dedupe bool
	// NoAnswers leaves out, when the report cache is brought up to date after the load,
	// the answers whole reports read (query.RefreshAfterLoad): retrylens watch's batches.
	NoAnswers bool
	// Step, when set, is called at each step of a chunk's transaction (see Step), so that
	// crash tests can kill a load exactly there. Nil in the product.
	Step func(step Step)
	// Positions, when set, remembers where each file's loads ended, so that the next load
	// of a file that only grew reads its new bytes only (retrylens watch).
	Positions *Positions
}

// Step names a point in a chunk's transaction.
type Step string

// The steps of a chunk, in order; StepRows comes every stepRows rows parsed (on a cluster,
// after each batch of rows the shards took).
const (
	StepBegun      Step = "begun"      // the transaction is open, nothing written
	StepRows       Step = "rows"       // the INSERT is under way: stepRows more rows handed to DuckDB
	StepInserted   Step = "inserted"   // every row inserted, the registry entry not yet
	StepRegistered Step = "registered" // registry entry and rejects written, COMMIT next
	StepCommitted  Step = "committed"  // COMMIT returned
)

// stepRows is how many rows pass between two StepRows: about two of DuckDB's row groups,
// which the INSERT writes to the file before the commit.
const stepRows = 1 << 18

// defaults fills in what was left zero.
func (o *Options) defaults() {
	if o.Samples == 0 {
		o.Samples = 20
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 256 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) step(s Step) {
	if o.Step != nil {
		o.Step(s)
	}
}

// Reject is a malformed line.
type Reject struct {
	Path    string
	Line    int
	Reason  string // parse.Error.Reason
	Message string
	Excerpt string // the line's first bytes, as written (sanitise before display)
}

// File is what happened to one input.
type File struct {
	Path     string
	Format   string
	Skipped  bool   // its content was loaded before (maybe under another name)
	SameAs   string // the path its known part was loaded under, when Skipped or From > 0
	From     int64  // lines loaded before: this load is the file's tail after line From
	Bytes    int64
	Lines    int64 // physical lines, blank ones included
	Rows     int64
	Rejected int64
	// Repeats are rows that repeat rows of earlier loads: the same traffic logged twice
	// (see repeats). With Options.Dedupe they were left out, else loaded.
	Repeats int64
	Deduped bool
	Reasons map[string]int64
	Samples []Reject
	First   time.Time
	Last    time.Time
	// Unfinished is the first line of a trace document the file ends inside (still being
	// written), whose spans are read once it is complete; 0 when none.
	Unfinished int
}

// Result sums up a load.
type Result struct {
	Files   []File
	Elapsed time.Duration
	// Routes is the number of distinct routes in the database after the load; when it
	// passes Options.MaxRoutes, Hotspots names the path prefixes that produced most.
	Routes   int64
	Hotspots []Hotspot
	// Repaired is what the check before the load found wrong and repaired (see Check),
	// RepairedRows the rows that took out.
	Repaired     Damage
	RepairedRows int64
}

// Hotspot is a path prefix (a route without its last segment) with many distinct routes: ids the
// built-in rules did not recognise, a case for --route.
type Hotspot struct {
	Prefix  string
	Routes  int64
	Example string
}

// Totals adds up the loaded (not skipped) files.
func (r *Result) Totals() File {
	t := File{Reasons: map[string]int64{}}
	for _, f := range r.Files {
		if f.Skipped {
			continue
		}
		t.Bytes += f.Bytes
		t.Lines += f.Lines
		t.Repeats += f.Repeats
		t.addParsed(f)
	}
	return t
}

// addParsed adds what f's lines parsed to: rows, rejects (with their samples) and times.
func (c *File) addParsed(f File) {
	c.Rows += f.Rows
	c.Rejected += f.Rejected
	for k, v := range f.Reasons {
		c.Reasons[k] += v
	}
	c.Samples = append(c.Samples, f.Samples...)
	if !f.First.IsZero() && (c.First.IsZero() || f.First.Before(c.First)) {
		c.First = f.First
	}
	if f.Last.After(c.Last) {
		c.Last = f.Last
	}
}

// excerptLen is how much of a rejected line is kept.
const excerptLen = 160

// Load parses each path and loads its rows into db. Each file's rows, rejects and
// registry entry commit in one transaction, so a file is loaded wholly or not at all. A
// file whose content was loaded before adds nothing. Malformed lines never stop a load:
// they are counted and sampled. An error that stops one file (it cannot be opened, its
// format cannot be detected) is returned after the other files were loaded, joined
// with any others.
//
// DuckDB gets the threads the load needs, then those that what follows (the report cache,
// a report) needs for the rows it left (fitThreads).
func Load(ctx context.Context, db *sql.DB, paths []string, opt Options) (Result, error) {
	if err := fitThreads(ctx, db, inputRows(paths)); err != nil {
		return Result{}, err
	}
	res, err := load(ctx, duck{db}, paths, opt)
	if ferr := fitThreads(context.WithoutCancel(ctx), db, 0); err == nil {
		err = ferr
	}
	return res, err
}

// load is Load into either store.
func load(ctx context.Context, st store, paths []string, opt Options) (Result, error) {
	start := time.Now()
	opt.defaults()
	var res Result
	removeSpools(opt.Spool)
	// Rows are never trusted to match the registry after a crash: repair first, so that a
	// killed load's rows cannot stay beside the same lines loaded again.
	d, err := st.check(ctx)
	if err != nil {
		return res, err
	}
	if !d.OK() {
		n, err := st.repair(ctx, d)
		if err != nil {
			return res, fmt.Errorf("the %s's rows do not match its registry (%s) and the repair failed: %w", st, strings.Join(d.Problems(), "; "), err)
		}
		res.Repaired, res.RepairedRows = d, n
	}
	errs := loadAll(ctx, st, paths, opt, &res)
	if ctx.Err() != nil {
		res.Elapsed = time.Since(start) // an interrupted load's summary says how long it ran
		return res, errors.Join(errs...)
	}
	// Routes change only with new rows: a run that adds none (ingest again over logs
	// already loaded, the usual loop during an incident) skips the count, a pass over
	// every row's route (about 1 s on 10M rows).
	if t := res.Totals(); t.Rows > 0 {
		if err := st.routeCheck(ctx, &res, opt.MaxRoutes); err != nil {
			errs = append(errs, err)
		}
	}
	res.Elapsed = time.Since(start)
	return res, errors.Join(errs...)
}

// loadAll loads each path into st and adds its File to res: the errors that stopped a
// file, except an interruption, which ends the load and is the only error returned.
func loadAll(ctx context.Context, st store, paths []string, opt Options, res *Result) []error {
	var errs []error
	for _, p := range paths {
		f, err := loadFile(ctx, st, p, opt)
		if err != nil {
			if ctx.Err() != nil {
				if f.Lines > 0 {
					res.Files = append(res.Files, f)
				}
				return []error{fmt.Errorf("interrupted while loading %s, after %d of its lines were committed (%w); "+
					"what committed stays, and the same ingest run again resumes after it", p, f.Lines, ctx.Err())}
			}
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			if !errors.Is(err, ErrTruncated) {
				continue // a truncated file's readable lines were loaded
			}
		}
		res.Files = append(res.Files, f)
	}
	return errs
}

// store is where loads go: the DuckDB file (duck) or a Target (target). Its String names
// it in messages ("database", "cluster").
type store interface {
	// check compares the rows with the registry (Check); repair deletes what it found.
	check(ctx context.Context) (Damage, error)
	repair(ctx context.Context, d Damage) (int64, error)
	// registered returns every loaded prefix.
	registered(ctx context.Context) ([]prefix, error)
	// loadChunk loads a chunk's rows, rejects and registry entry, all or nothing.
	loadChunk(ctx context.Context, r io.Reader, h *countingHash, format *parse.Format, path string, offset, line int64, opt Options) (*chunk, error)
	// routeCheck counts the distinct routes into res and, past max, names hotspots.
	routeCheck(ctx context.Context, res *Result, max int64) error
	// lockFile holds the file at src, loaded as path, against other loaders
	// (Target.LockFile).
	lockFile(ctx context.Context, src, path string) (unlock func(), err error)
	String() string
}

// duck is the DuckDB file as a store.
type duck struct{ db *sql.DB }

func (d duck) String() string { return "database" }

// check is Check; it also records the line sums of sound loads an older retrylens
// registered without them.
func (d duck) check(ctx context.Context) (Damage, error) {
	dm, err := Check(ctx, d.db, false)
	if err == nil && len(dm.unsummed) > 0 {
		if err := fillLineSums(ctx, d.db, dm.unsummed); err != nil {
			return dm, fmt.Errorf("record line sums: %w", err)
		}
	}
	return dm, err
}

func (d duck) repair(ctx context.Context, dm Damage) (int64, error) { return Repair(ctx, d.db, dm) }

func (d duck) registered(ctx context.Context) ([]prefix, error) { return registered(ctx, d.db) }

func (d duck) loadChunk(ctx context.Context, r io.Reader, h *countingHash, format *parse.Format, path string, offset, line int64, opt Options) (*chunk, error) {
	return loadChunk(ctx, d.db, r, h, format, path, offset, line, opt)
}

func (d duck) routeCheck(ctx context.Context, res *Result, max int64) error {
	return routeCheck(ctx, d.db, res, max)
}

// lockFile holds nothing: a DuckDB file has one writer, this process.
func (d duck) lockFile(context.Context, string, string) (func(), error) { return func() {}, nil }

// routeCheck counts distinct routes and, past max, finds the prefixes behind them.
func routeCheck(ctx context.Context, db *sql.DB, res *Result, max int64) error {
	if max <= 0 {
		max = 500
	}
	if err := db.QueryRowContext(ctx, "SELECT count(DISTINCT route) FROM requests").Scan(&res.Routes); err != nil {
		return fmt.Errorf("count routes: %w", err)
	}
	if res.Routes <= max {
		return nil
	}
	// The prefixes are cut from the distinct routes, not from every row: a tenth of the
	// work on the 1M-line benchmark log.
	rows, err := db.QueryContext(ctx, `
		WITH r AS (SELECT DISTINCT route FROM requests WHERE route IS NOT NULL)
		SELECT coalesce(nullif(regexp_replace(route, '/[^/]*$', ''), ''), '/') AS prefix, count(*) AS n, min(route)
		FROM r GROUP BY prefix ORDER BY n DESC, prefix LIMIT 5`)
	if err != nil {
		return fmt.Errorf("route hotspots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h Hotspot
		if err := rows.Scan(&h.Prefix, &h.Routes, &h.Example); err != nil {
			return err
		}
		res.Hotspots = append(res.Hotspots, h)
	}
	return rows.Err()
}

func loadFile(ctx context.Context, st store, path string, opt Options) (File, error) {
	out := File{Path: path, Reasons: map[string]int64{}}
	// A stream (stdin, a pipe, a FIFO, <(…)) can be read once: it is copied whole to a
	// spool file first and then loaded like a file, registered under its own name. Its
	// last line counts even without a newline: the stream has ended.
	src, stream, err := spoolStream(ctx, path, opt)
	if err != nil {
		return out, err
	}
	if stream {
		defer os.Remove(src)
	}
	// OpenTelemetry traces become attempt lines in a spool file, loaded as the otel
	// preset: the same traces give the same lines, and a file that grew lines that start
	// with them (package traces), so the registry knows what it loaded.
	format := opt.Format
	spans, read, err := spoolTraces(ctx, src, opt)
	if err != nil {
		return out, err
	}
	out.Unfinished = read.Unfinished
	if spans != "" {
		defer os.Remove(spans)
		src, stream = spans, true
		if format, err = parse.Preset("otel"); err != nil {
			return out, err
		}
	}
	// What to load: only what no load has covered yet, up to the file's last newline (a
	// last line still being written is left for the next run), in chunks that each
	// commit with their registry entry; read once no other loader holds the file.
	unlock, err := st.lockFile(ctx, src, path)
	if err != nil {
		return out, err
	}
	defer unlock()
	known, err := st.registered(ctx)
	if err != nil {
		return out, err
	}
	// A file this process loaded before and that only grew since goes on from there
	// (Positions); any other is planned from its content.
	resumed, rh, ok := opt.Positions.resume(src, known)
	var sc scan
	if ok && !stream {
		sc, err = planResumed(src, resumed)
	} else {
		rh = nil
		sc, err = planFile(src, known)
	}
	if err != nil {
		return out, err
	}
	if stream && sc.end < sc.size && !sc.truncated {
		sc.end = sc.size
	}
	from := sc.matched
	if from.bytes >= sc.end {
		// Nothing new: the content, up to its last newline, was loaded before.
		out.Skipped, out.SameAs, out.Bytes = from.bytes > 0, from.path, sc.size
		return out, truncated(sc)
	}
	out.From, out.SameAs = from.lines, from.path
	in, err := openInput(src, nil)
	if err != nil {
		return out, err
	}
	defer in.Close()
	h := &countingHash{Hash: sha256.New()}
	if rh != nil {
		// Resumed: the hash of the loaded prefix is known, the file is read from its end.
		f, _ := in.c.(*os.File)
		if f == nil || in.gz != nil {
			return out, fmt.Errorf("resume %s: not a plain file", path)
		}
		if _, err := f.Seek(from.bytes, io.SeekStart); err != nil {
			return out, err
		}
		in.r.Reset(f)
		h = rh
	} else if from.bytes > 0 {
		// The loaded prefix still goes into the hash of [0, end).
		if _, err := io.CopyN(h, in.r, from.bytes); err != nil {
			return out, fmt.Errorf("skip the %d bytes loaded before: %w", from.bytes, err)
		}
	}
	if opt.Progress != nil {
		bar := opt.Progress(path, sc.end-from.bytes)
		defer bar.Close()
		in.r = bufio.NewReaderSize(io.TeeReader(in.r, bar), 256<<10)
	}
	if format == nil {
		if format, err = Detect(in.r); err != nil {
			return out, err
		}
	} else if err := checkFormat(in.r, format); err != nil {
		return out, err
	}
	out.Format, out.Deduped = format.Name, opt.Dedupe
	// Each chunk is parsed while DuckDB inserts its rows, and commits with its registry
	// entry.
	pos, line := from.bytes, from.lines
	for pos < sc.end {
		r := &chunkReader{r: in.r, want: opt.ChunkBytes - 1, left: sc.end - pos}
		p, err := st.loadChunk(ctx, r, h, format, path, pos, line, opt)
		if err != nil {
			return out, err
		}
		if p.end <= pos {
			break // nothing more to read: the file is shorter than it was
		}
		pos, line = p.end, line+p.out.Lines
		c := p.out
		out.Lines += c.Lines
		out.Rows += c.Rows
		out.Rejected += c.Rejected
		out.Repeats += c.Repeats
		out.Bytes += c.Bytes
		for k, v := range c.Reasons {
			out.Reasons[k] += v
		}
		if room := opt.Samples - len(out.Samples); room > 0 {
			out.Samples = append(out.Samples, c.Samples[:min(room, len(c.Samples))]...)
		}
		if !c.First.IsZero() && (out.First.IsZero() || c.First.Before(out.First)) {
			out.First = c.First
		}
		if c.Last.After(out.Last) {
			out.Last = c.Last
		}
	}
	if !stream && in.gz == nil {
		opt.Positions.remember(src, pos, line, h)
	}
	return out, truncated(sc)
}

// repeats finds the rows of load id that repeat a row of an earlier load: the same second,
// key (idempotency key, invocation id or request id), attempt, status, method and URI, and
// the same client where both lines name one. That is the same traffic logged twice, as
// by a text and a JSON access_log of one server. It counts them in c.out.Repeats; with
// dedupe it deletes them, so that the chunk registers the rows it keeps. A chunk where
// none of every 64th row repeats counts none: a stray coincidence of two servers' keyless
// lines is not worth a pass over every row.
func repeats(ctx context.Context, conn *sql.Conn, id int64, c *chunk, dedupe bool) error {
	out := &c.out
	if out.Rows == 0 || out.First.IsZero() {
		return nil
	}
	const match = `FROM requests n WHERE n.file_id = $1 AND EXISTS (
		SELECT 1 FROM requests o
		WHERE o.file_id <> $1 AND o.ts >= $2 AND o.ts < $3
		  AND date_trunc('second', o.ts) = date_trunc('second', n.ts)
		  AND o.uri IS NOT DISTINCT FROM n.uri AND o.method IS NOT DISTINCT FROM n.method
		  AND o.status IS NOT DISTINCT FROM n.status AND o.attempt IS NOT DISTINCT FROM n.attempt
		  AND coalesce(o.idempotency_key_hash, o.invocation_id_hash, o.request_id_hash) IS NOT DISTINCT FROM coalesce(n.idempotency_key_hash, n.invocation_id_hash, n.request_id_hash)
		  AND (o.remote_addr IS NULL OR n.remote_addr IS NULL OR o.remote_addr = n.remote_addr))`
	// Earlier rows can only match within the chunk's own seconds: when no load overlaps
	// them, nothing is read. Else, in a large chunk, one row in 64 is looked for first
	// (about a third of the time): the same traffic logged twice repeats nearly every row.
	from, to := out.First.Truncate(time.Second), out.Last.Truncate(time.Second).Add(time.Second)
	var overlap, sample int64 // a small chunk is looked at whole
	err := conn.QueryRowContext(ctx, "SELECT count(*) FROM files WHERE first_ts < $2 AND last_ts >= $1", from, to).Scan(&overlap)
	sample = overlap
	if err == nil && overlap > 0 && out.Rows >= 1<<16 {
		err = conn.QueryRowContext(ctx, "SELECT count(*) "+strings.Replace(match, "n.file_id = $1 AND", "n.file_id = $1 AND n.line % 64 = 0 AND", 1), id, from, to).Scan(&sample)
	}
	if err != nil {
		return fmt.Errorf("look for repeated lines: %w", err)
	}
	if sample == 0 {
		return nil
	}
	var n, lines int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(line), 0)::BIGINT "+match, id, from, to).Scan(&n, &lines); err != nil {
		return fmt.Errorf("look for repeated lines: %w", err)
	}
	out.Repeats, out.Deduped = n, dedupe
	if n == 0 || !dedupe {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM requests WHERE file_id = $1 AND line IN (SELECT line "+match+")", id, from, to); err != nil {
		return fmt.Errorf("leave out repeated lines: %w", err)
	}
	out.Rows -= n
	c.lineSum -= lines
	return nil
}

// dropped is how many of a chunk's lines were left out as repeats.
func dropped(f *File) int64 {
	if f.Deduped {
		return f.Repeats
	}
	return 0
}

// ErrTruncated means a gzip file ends before its stream does: the lines before the break
// were loaded.
var ErrTruncated = errors.New("truncated")

// truncated is the error for a gzip file that ended early, nil for one that did not.
func truncated(sc scan) error {
	if !sc.truncated {
		return nil
	}
	return fmt.Errorf("the gzip stream is %w after line %d (%d bytes decompressed, then: %v): the lines before were loaded; the rest of the file cannot be read",
		ErrTruncated, sc.lines, sc.size, sc.broken)
}

// chunk is what a loaded chunk of a file was.
type chunk struct {
	out          File
	offset, line int64  // where the chunk starts: byte offset, lines before it
	end          int64  // the byte offset it ends at
	sum          string // SHA-256 of the file's content up to end
	lineSum      int64  // the sum of its rows' line numbers, which Check compares
}

// loadChunk parses the lines of r, which start at byte offset and after line line of the
// file, and loads their rows, rejects and registry entry in one transaction. The hash h,
// which has seen every byte of the file before r, then covers [0, end): what the registry
// entry records.
func loadChunk(ctx context.Context, db *sql.DB, r io.Reader, h *countingHash, format *parse.Format, path string, offset, line int64, opt Options) (*chunk, error) {
	c := &chunk{out: File{Path: path, Reasons: map[string]int64{}}, offset: offset, line: line}
	out := &c.out
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	opt.step(StepBegun)
	var id int64
	// A new id is above every id in the rows too, registered or not.
	if err := conn.QueryRowContext(ctx, `SELECT greatest((SELECT coalesce(max(file_id), 0) FROM files),
			(SELECT coalesce(max(file_id), 0) FROM requests)) + 1`).Scan(&id); err != nil {
		return nil, err
	}

	// The parser sends batches of records; DuckDB's threads take them through
	// retrylens_rows while the INSERT runs. When the INSERT ends, whether early on an
	// error or because the parser closed the channel, the parser is stopped and waited
	// for: the chunk commits only if the parser read all of it and DuckDB inserted every
	// row it parsed.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	batches := make(chan *batch, 4)
	free := make(chan *batch, 8)
	source, drop := newRowSource(ctx, batches, free)
	defer drop()
	parsed := make(chan error, 1)
	go func() {
		defer close(batches)
		parsed <- readAll(pctx, r, h, format, line, out, &c.lineSum, opt, batches, free)
	}()
	res, err := conn.ExecContext(ctx, rowsInsert(source, id))
	stop()
	perr := <-parsed
	switch {
	case perr != nil && !errors.Is(perr, context.Canceled):
		return nil, perr // the input failed: the reason the rows stopped
	case err != nil:
		return nil, fmt.Errorf("load the rows: %w", err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	// Never commit part of a chunk as if it were all of it: the rows inserted must be the
	// rows parsed.
	inserted, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("load the rows: %w", err)
	}
	if perr != nil || inserted != out.Rows {
		return nil, fmt.Errorf("load the rows: DuckDB inserted %d of the %d rows parsed", inserted, out.Rows)
	}
	// What was hashed is exactly what was read, up to the chunk's end: the readers ahead
	// of the parser may have buffered more of the file, but not of the chunk.
	c.end = h.n
	out.Bytes = h.n - offset
	c.sum = hex.EncodeToString(h.Sum(nil))
	if err := repeats(ctx, conn, id, c, opt.Dedupe); err != nil {
		return nil, err
	}
	opt.step(StepInserted)

	_, err = conn.ExecContext(ctx, `INSERT INTO files (file_id, path, sha256, offset_bytes, bytes, first_line, lines_end,
			format, lines, rows, rejected, first_ts, last_ts, loaded_at, line_sum, duplicates, repeats) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, path, c.sum, c.offset, c.end, c.line+1, c.line+out.Lines, format.Name, out.Lines, out.Rows, out.Rejected,
		nullTime(out.First), nullTime(out.Last), opt.Now().UTC(), c.lineSum, dropped(out), out.Repeats-dropped(out))
	if err != nil {
		return nil, err
	}
	reasons := make([]string, 0, len(out.Reasons))
	for r := range out.Reasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		if _, err := conn.ExecContext(ctx, `INSERT INTO reject_counts VALUES (?, ?, ?)`, id, r, out.Reasons[r]); err != nil {
			return nil, err
		}
	}
	for _, s := range out.Samples {
		if _, err := conn.ExecContext(ctx, `INSERT INTO rejects VALUES (?, ?, ?, ?, ?)`, id, s.Line, s.Reason, s.Message, s.Excerpt); err != nil {
			return nil, err
		}
	}
	opt.step(StepRegistered)
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, err
	}
	committed = true
	opt.step(StepCommitted)
	return c, nil
}

// countingHash is a hash that counts the bytes written to it.
type countingHash struct {
	hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.Hash.Write(p)
}

// registered returns every loaded prefix.
func registered(ctx context.Context, db *sql.DB) ([]prefix, error) {
	rows, err := db.QueryContext(ctx, registeredQuery)
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	defer rows.Close()
	return prefixes(rows)
}

// registeredQuery reads the loaded prefixes from the registry.
const registeredQuery = "SELECT bytes, sha256, lines_end, path, offset_bytes FROM files WHERE bytes > 0"

// prefixes reads registeredQuery's rows, from either engine's driver.
func prefixes(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) ([]prefix, error) {
	var ps []prefix
	for rows.Next() {
		var p prefix
		if err := rows.Scan(&p.bytes, &p.sum, &p.lines, &p.path, &p.from); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// batchSize is how many records the parser hands DuckDB at a time: a DataChunk's capacity.
var batchSize = duckdb.GetDataChunkCapacity()

type batch struct {
	recs   []parse.Record
	lines  []int64
	routes []string
}

func nullTime(t time.Time) driver.Value {
	if t.IsZero() {
		return nil
	}
	return t
}

// validUTF8 escapes bytes that are not UTF-8 as \xXX: DuckDB's VARCHAR takes only UTF-8,
// and a reject sample must keep what was there.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, "\\x%02x", s[i])
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}
