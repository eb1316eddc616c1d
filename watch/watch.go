// Package watch follows access logs as they are written, loads their new lines into a
// store at every interval through the same exactly-once ingest as retrylens ingest, and
// keeps the figures of what is final for Prometheus (docs/live.md): counters of every
// logical request whose chain can no longer grow, the last closed window's verdict and
// alerts, the health of the ingest.
package watch

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/sanitize"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/report"
)

// Options are what a watch follows, where it loads, and how it judges.
type Options struct {
	Location string   // the store (backend.Open)
	Args     []string // files and globs, expanded again at every batch
	Load     ingest.Options
	// Open opens the store; nil is backend.Open.
	Open     func(ctx context.Context, location string, o backend.Options) (backend.Store, error)
	Interval time.Duration // between batches
	// Figures are the options that change a figure, exactly as a report takes them (the
	// command fills them from the flags report and check share): Query's rules, linking
	// (MaxGap, also how long after its last attempt a logical request is final) and
	// throttle statuses, and MaxAttempts. The range, the width and the charts are the
	// watch's own.
	Figures postmortem.Options
	// Settle is how long a line may take from its time to the file (a buffered
	// access_log's flush=): lines are final that much later.
	Settle       time.Duration
	Width        time.Duration // the windows whose last closed one the gauges show
	MaxEndpoints int           // endpoints with series of their own; the rest are "other"
	HTMLWindow   time.Duration // how much the page at / shows, up to the last closed minute
	Now          func() time.Time
	// Log gets a line per batch that failed, argument that names no file, rotation,
	// repair of what a killed load left, batch with late lines and batch slower than
	// Interval; nothing otherwise.
	Log io.Writer
}

// Watcher follows the logs and holds the latest figures.
type Watcher struct {
	o      Options
	follow *follower

	mu   sync.Mutex
	snap *snapshot // nil until a batch has closed a minute
	last time.Time // the last request counted
	// page is the HTML report of the last hours as of pageUntil, built by the batches
	// while / is asked for (asked: when it last was).
	page             []byte
	pageUntil, asked time.Time
	// named are the endpoints with series of their own, in the order they were first
	// seen (a series never moves to "other" and back); the rest are counted in other.
	named map[string]bool
	ovf   map[string]bool // the endpoints counted in "other"
	stats batchStats
}

// batchStats are the ingest's own figures, for the health metrics.
type batchStats struct {
	batches, failed int64
	lastBatch       time.Time
	lastDuration    time.Duration
	loadedLines     int64 // lines read in the files table: what every load counted
	rejected        int64
	rotations       int64
	late            int64 // rows loaded after the minute they belong to had been counted
	// the last batch: lines it loaded and from how many files (Summary)
	lastLines, lastFiles int64
}

// New checks o and returns a Watcher; Run starts it.
func New(o Options) (*Watcher, error) {
	if len(o.Args) == 0 {
		return nil, errors.New("nothing to watch: give log files or globs")
	}
	if o.Open == nil {
		o.Open = backend.Open
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Figures.Query.MaxGap <= 0 {
		o.Figures.Query.MaxGap = query.DefaultMaxGap
	}
	if o.Figures.Query.Rules == nil {
		o.Figures.Query.Rules = judge.DefaultRules()
	}
	if o.Figures.MaxAttempts <= 0 {
		o.Figures.MaxAttempts = query.DefaultMaxAttempts
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Load.Positions == nil {
		// a file that grew is read from where its last load ended, not hashed from its start
		o.Load.Positions = ingest.NewPositions()
	}
	return &Watcher{o: o, follow: newFollower(o.Args), named: map[string]bool{}, ovf: map[string]bool{}}, nil
}

// Run loads a batch at every interval until ctx ends; a batch under way when it ends is
// finished first (its chunks commit), then Run returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		start := time.Now()
		if err := w.Batch(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(w.o.Log, "retrylens watch: %s\n", sanitize.Text(err.Error()))
		}
		t.Reset(max(0, w.o.Interval-time.Since(start)))
	}
}

// lockWait is how long a batch waits for the store while another process (a report)
// holds it.
const lockWait = 30 * time.Second

// Batch loads what the files hold beyond what was loaded, then computes the figures
// of every logical request final by now and of the last closed window.
func (w *Watcher) Batch(ctx context.Context) error {
	started := w.o.Now()
	files := w.follow.inputs()
	for _, a := range w.follow.newlyMissing() {
		// a typo would otherwise be watched in silence
		fmt.Fprintf(w.o.Log, "retrylens watch: %s names no file yet: waiting for it\n", sanitize.Text(a))
	}
	for _, r := range w.follow.rotatedNames() {
		w.logf("rotation: %s; the file it named is read to its end", r)
	}
	err := w.batch(ctx, files, started)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.batches++
	w.stats.lastBatch, w.stats.lastDuration = started, w.o.Now().Sub(started)
	w.stats.rotations = w.follow.rotationsSeen()
	if err != nil {
		w.stats.failed++
		return err
	}
	if w.o.Interval > 0 && w.stats.lastDuration > w.o.Interval {
		w.logf("slow batch: %s, longer than --interval %s: the next starts at once", w.stats.lastDuration.Round(10*time.Millisecond), w.o.Interval)
	}
	w.follow.loaded()
	return nil
}

// logf writes a line on Log, stamped with the time.
func (w *Watcher) logf(format string, args ...any) {
	fmt.Fprintf(w.o.Log, "retrylens watch: %s %s\n", w.o.Now().UTC().Format(time.TimeOnly), sanitize.Text(fmt.Sprintf(format, args...)))
}

// Summary is what the last batch did, for --once: lines loaded and from how many files,
// what the counters hold and up to when.
func (w *Watcher) Summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	files := "files"
	if w.stats.lastFiles == 1 {
		files = "file"
	}
	s := fmt.Sprintf("loaded %d lines from %d %s in %s", w.stats.lastLines, w.stats.lastFiles, files, w.stats.lastDuration.Round(time.Millisecond))
	if w.snap == nil {
		return s + "; nothing in the database yet"
	}
	var c judge.Counts = w.snap.total
	return s + fmt.Sprintf("; %d first attempts and %d retries final, up to %s (requests after it may still grow)",
		c.Get("first_attempts"), c.Get("retries"), w.snap.until.UTC().Format(time.RFC3339))
}

func (w *Watcher) batch(ctx context.Context, files []string, started time.Time) error {
	mode := backend.Create
	if len(files) == 0 {
		mode = backend.ReadWrite // nothing to load: no database is made for it
	}
	st, err := w.o.Open(ctx, w.o.Location, backend.Options{Mode: mode, Wait: lockWait})
	if errors.Is(err, backend.ErrNoDatabase) {
		return nil
	}
	if err != nil {
		return err
	}
	defer st.Close()
	w.mu.Lock()
	w.stats.lastLines, w.stats.lastFiles = 0, 0
	counted := time.Time{} // what the counters hold: before it, a new row is late
	if w.snap != nil {
		counted = w.snap.until
	}
	w.mu.Unlock()
	before := int64(-1) // no late rows to look for: nothing counted yet
	if len(files) > 0 {
		if !counted.IsZero() {
			if before, err = maxFileID(ctx, st); err != nil {
				return err
			}
		}
		load := w.o.Load
		load.NoAnswers = true // its reports are ranges, which compute theirs
		done, err := st.Ingest(ctx, files, load, backend.Events{})
		if err != nil {
			return err
		}
		if done.Removed {
			return nil // nothing loaded yet, and no database made for it
		}
		if !done.Load.Repaired.OK() {
			w.logf("recovered: %s (%d rows a killed load left deleted; they are loaded again)", done.Load.Repaired.Summary(), done.Load.RepairedRows)
		}
		t := done.Load.Totals()
		w.mu.Lock()
		w.stats.lastLines, w.stats.lastFiles = t.Lines, int64(len(done.Load.Files))
		w.mu.Unlock()
	}
	recount := false // late rows: the counters are counted again, every closed request
	if before >= 0 {
		late, err := lateRows(ctx, st, w.o.Location, before, counted)
		if err != nil {
			return err
		}
		if late > 0 {
			w.mu.Lock()
			w.stats.late += late
			w.mu.Unlock()
			recount = true
			w.logf("late lines: %d rows of this batch are older than %s, what the counters held: every closed request counted again (retrylens_late_rows_total)",
				late, counted.UTC().Format(time.TimeOnly))
		}
	}
	h := st.Health(ctx)
	w.mu.Lock()
	w.stats.loadedLines, w.stats.rejected = h.Lines, h.Rejected
	w.mu.Unlock()
	qo := w.o.Figures.Query
	qo.Since, qo.Until = time.Time{}, time.Time{}
	// build is the postmortem of a range. A file's reports all read the file; a
	// cluster's read what each range needs from the shards (docs/live.md).
	build := func(q query.Options, charts bool) (*postmortem.Result, error) {
		db, err := st.Rows(ctx, &q, nil, false)
		if err != nil {
			return nil, err
		}
		return postmortem.Build(ctx, db, w.report(q, charts))
	}
	// Everything before the last whole minute (or window, under a minute) at or before
	// where chains stop growing. A report up to a whole minute reads what the stored
	// cache holds of those minutes; one up to a window inside a minute links the rows
	// again (slower on a large database, the same figures). A cluster keeps no linking
	// to read it from: ten gaps before the horizon (query.Closed without a cache).
	var linked *sql.DB
	if backend.IsFile(w.o.Location) {
		if linked, err = st.Rows(ctx, &qo, nil, false); err != nil {
			return err
		}
	}
	closed, err := query.Closed(ctx, linked, started.Add(-w.o.Settle-qo.MaxGap), qo.MaxGap)
	if err != nil {
		return err
	}
	// The last whole window (a minute, or the width under a minute): adjacent ranges add up
	// to the whole (docs/metrics.md, "Ranges"; synchronised, which does not, is not served).
	until := closed.UTC().Truncate(min(w.o.Width, time.Minute))
	// The endpoints of the rows still open get their series now, at 0, before any of
	// their requests closes: Prometheus takes a series' first sample as its start, so
	// counts that first appear already grown are never in an increase().
	open, err := openEndpoints(ctx, st, w.o.Location, until)
	if err != nil {
		return err
	}
	defer w.seed(open)
	w.mu.Lock()
	prev := w.snap
	w.mu.Unlock()
	if recount {
		// A late line may be a request of its own or an attempt of one counted already
		// (whose outcome it can change): the counters become the report of every row
		// before until again, as a restart's first batch counts them.
		prev = nil
	}
	if prev != nil && !until.After(prev.until) {
		return w.buildPage(qo, build)
	}
	// The figures of what closed since the last batch, added to the counters.
	inc := qo
	inc.Until = until
	if prev != nil {
		inc.Since = prev.until
	}
	pm, err := build(inc, true)
	if err != nil {
		return err
	}
	if prev == nil && pm.From.IsZero() {
		// nothing final yet: the counters start at 0, up to until
		w.mu.Lock()
		w.snap = w.add(nil, pm, until)
		w.mu.Unlock()
		return nil
	}
	// The gauges' window, when it started before what this batch added (windows wider
	// than a minute).
	wstart := until.Truncate(w.o.Width).Add(-w.o.Width)
	var win *postmortem.Result
	if wstart.Before(inc.Since) {
		wq := qo
		wq.Since, wq.Until = wstart, wstart.Add(w.o.Width)
		if win, err = build(wq, false); err != nil {
			return err
		}
	}
	w.mu.Lock()
	next := w.add(prev, pm, until)
	if win != nil {
		for _, x := range win.Windows {
			if x.Start.Equal(wstart) {
				next.window = x
			}
		}
	}
	if pm.To.After(w.last) {
		w.last = pm.To
	}
	w.snap = next
	w.mu.Unlock()
	return w.buildPage(qo, build)
}

// maxFileID is the last load the registry holds (0: none): a batch's rows are those of
// the loads after it.
func maxFileID(ctx context.Context, st backend.Store) (int64, error) {
	return scalar(ctx, st, "SELECT coalesce(max(file_id), 0) FROM files")
}

// lateRows counts the rows of the loads after file id before that are older than
// counted: lines that reached the log after the minute they belong to was counted.
func lateRows(ctx context.Context, st backend.Store, location string, before int64, counted time.Time) (int64, error) {
	return scalar(ctx, st, fmt.Sprintf("SELECT count(*) FROM requests WHERE file_id > %d AND %s", before, since(location, counted, "<")))
}

// since is the condition on a row's time against t (op: "<", ">="), in the store's SQL: a
// file's ts, a cluster's microseconds ts_us.
func since(location string, t time.Time, op string) string {
	if backend.IsFile(location) {
		return fmt.Sprintf("ts %s TIMESTAMP '%s'", op, t.UTC().Format("2006-01-02 15:04:05.000000"))
	}
	return fmt.Sprintf("ts_us %s %d", op, t.UnixMicro())
}

// scalar runs q, a query of one integer, on st.
func scalar(ctx context.Context, st backend.Store, q string) (int64, error) {
	_, rows, err := st.Run(ctx, q)
	if err != nil {
		return 0, err
	}
	if len(rows) == 1 && len(rows[0]) == 1 {
		switch v := rows[0][0].(type) {
		case int64:
			return v, nil
		case int32:
			return int64(v), nil
		case uint64:
			return int64(v), nil
		}
	}
	return 0, fmt.Errorf("%s: not one integer: %v", q, rows)
}

// openEndpoints are the endpoints ("METHOD route", as a report's rows name them) of the
// rows at or after until: lines whose requests are not final yet.
func openEndpoints(ctx context.Context, st backend.Store, location string, until time.Time) ([]string, error) {
	// concat and coalesce: both DuckDB's and ClickHouse's
	q := "SELECT DISTINCT concat(coalesce(method, '-'), ' ', coalesce(route, '-')) FROM requests WHERE " + since(location, until, ">=")
	_, rows, err := st.Run(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("the open rows' endpoints: %w", err)
	}
	keys := make([]string, 0, len(rows))
	for _, r := range rows {
		if k, ok := r[0].(string); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // named in a stable order when several appear in one batch
	return keys, nil
}

// seed gives each endpoint of keys its series at 0 (a name, and counts in the snapshot),
// up to MaxEndpoints; past them they are counted in "other".
func (w *Watcher) seed(keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		if !w.named[k] && len(w.named) < w.o.MaxEndpoints {
			w.named[k] = true
		}
		if !w.named[k] {
			w.ovf[k] = true
			continue
		}
		if w.snap != nil && w.snap.endpoints[k] == nil {
			w.snap.endpoints[k] = &judge.Counts{}
		}
	}
}

// report is the postmortem a batch asks for: the rows of qo, judged with the figures'
// options, at the watch's width.
func (w *Watcher) report(qo query.Options, charts bool) postmortem.Options {
	o := w.o.Figures
	o.Query, o.Width, o.Charts = qo, w.o.Width, charts
	return o
}

// pageWanted is how long after / was last asked for the batches still build its report.
const pageWanted = 5 * time.Minute

// buildPage renders the HTML report of the last HTMLWindow that has lines, up to the last
// closed minute, when / was asked for lately (it costs a report).
func (w *Watcher) buildPage(qo query.Options, build func(query.Options, bool) (*postmortem.Result, error)) error {
	w.mu.Lock()
	want := w.o.HTMLWindow > 0 && w.snap != nil && !w.asked.IsZero() && w.o.Now().Sub(w.asked) < pageWanted &&
		!(w.pageUntil.Equal(w.snap.until) && w.page != nil)
	var until, last time.Time
	if want {
		until, last = w.snap.until, w.last
	}
	w.mu.Unlock()
	if !want {
		return nil
	}
	// The last hours that have lines: a log replayed long after shows its end.
	qo.Since = last.Truncate(time.Minute).Add(time.Minute - w.o.HTMLWindow)
	qo.Until = until
	hp, err := build(qo, true)
	if err != nil {
		return err
	}
	var page bytes.Buffer
	r := &report.Report{Result: *hp, GeneratedAt: w.o.Now(), Window: widthLabel(w.o.Width), Top: 10}
	if err := report.Write(&page, report.FormatHTML, r); err != nil {
		return err
	}
	w.mu.Lock()
	w.page, w.pageUntil = page.Bytes(), until
	w.mu.Unlock()
	return nil
}

// widthLabel is a window's width as --window takes it: 10s, 1m, 1h.
func widthLabel(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
