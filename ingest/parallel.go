package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/retrylens/retrylens/parse"
)

// Parsing on every core: one goroutine reads the input (hashing it, as the registry
// needs) and cuts it into lines, which it hands in jobs of a DuckDB chunk's worth of lines
// to one parser per core; each parser fills batches for retrylens_rows and counts what it
// saw, and the counts are added up at the end. Rows carry their line numbers, so the order
// in which batches reach DuckDB does not matter; the rejected lines kept as samples are
// the first ones of the input, whichever parser met them.

// job is consecutive lines of the input, with their line numbers; tooLong are the lines
// over parse.MaxLineLength met among them.
type job struct {
	raw     [][]byte
	lines   []int64
	tooLong []*parse.Error
}

// tally is what one parser counted (in File's parsed fields, see addParsed); tallies add
// up into the File of the chunk.
type tally struct {
	File
	lineSum int64
}

// parsers is how many goroutines parse: one per core.
func parsers() int { return max(1, runtime.GOMAXPROCS(0)) }

// readAll parses in into batches. It owns every field of out, and adds each row's line
// number to lineSum.
func readAll(ctx context.Context, in io.Reader, h hash.Hash, format *parse.Format, firstLine int64, out *File, lineSum *int64, opt Options, batches chan<- *batch, free <-chan *batch) error {
	jobs := make(chan *job, 2*parsers())
	jobPool := sync.Pool{New: func() any {
		return &job{raw: make([][]byte, 0, batchSize), lines: make([]int64, 0, batchSize)}
	}}
	var rows atomic.Int64
	var stepMu sync.Mutex
	tallies := make([]tally, parsers())
	var wg sync.WaitGroup
	for w := range tallies {
		t := &tallies[w]
		t.Reasons = map[string]int64{}
		wg.Go(func() {
			parseJobs(ctx, format, jobs, &jobPool, t, out.Path, opt, batches, free, func(n int64) {
				if total := rows.Add(n); total/stepRows != (total-n)/stepRows {
					stepMu.Lock()
					opt.step(StepRows)
					stepMu.Unlock()
				}
			})
		})
	}
	readErr := splitLines(ctx, in, h, format, firstLine, jobs, &jobPool, out)
	close(jobs)
	wg.Wait()
	// Added up whatever happened: a load stopped early says how many rows it parsed.
	for _, t := range tallies {
		out.addParsed(t.File)
		*lineSum += t.lineSum
	}
	slices.SortFunc(out.Samples, func(a, b Reject) int { return a.Line - b.Line })
	out.Samples = out.Samples[:min(len(out.Samples), opt.Samples)]
	if readErr != nil {
		return readErr
	}
	return ctx.Err()
}

// splitLines reads in's lines into jobs, and sets out.Lines.
func splitLines(ctx context.Context, in io.Reader, h hash.Hash, format *parse.Format, firstLine int64, jobs chan<- *job, pool *sync.Pool, out *File) error {
	r := parse.NewReader(io.TeeReader(in, h), format)
	r.StartAt(int(firstLine))
	j := pool.Get().(*job)
	send := func() error {
		select {
		case jobs <- j:
			j = pool.Get().(*job)
			j.raw, j.lines, j.tooLong = j.raw[:0], j.lines[:0], j.tooLong[:0]
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		raw, err := r.Next()
		if err != nil {
			var perr *parse.Error
			if errors.As(err, &perr) {
				j.tooLong = append(j.tooLong, perr)
				continue
			}
			if err != io.EOF {
				return fmt.Errorf("read line %d: %w", r.Line()+1, err)
			}
			break
		}
		j.raw = append(j.raw, raw)
		j.lines = append(j.lines, int64(r.Line()))
		if len(j.raw) == batchSize {
			if err := send(); err != nil {
				return err
			}
		}
	}
	out.Lines = int64(r.Line()) - firstLine
	if len(j.raw) > 0 || len(j.tooLong) > 0 {
		return send()
	}
	return nil
}

// parseJobs parses jobs into batches for DuckDB, counting into t, until jobs is closed or
// ctx is done (the INSERT stopped); rowsDone is told how many rows each batch held.
func parseJobs(ctx context.Context, format *parse.Format, jobs <-chan *job, pool *sync.Pool, t *tally, path string, opt Options,
	batches chan<- *batch, free <-chan *batch, rowsDone func(int64)) {
	reject := func(perr *parse.Error, raw []byte) {
		t.Rejected++
		reason := perr.Reason()
		t.Reasons[reason]++
		if len(t.Samples) < opt.Samples { // this parser's first ones: the input's first are among them
			msg := *perr
			msg.Line = 0 // the sample carries it
			t.Samples = append(t.Samples, Reject{
				Path: path, Line: perr.Line, Reason: reason, Message: msg.Error(), Excerpt: validUTF8(string(raw[:min(len(raw), excerptLen)])),
			})
		}
	}
	for j := range jobs {
		b := nextBatch(free)
		for _, perr := range j.tooLong {
			reject(perr, perr.Head) // the line is not kept: its start is
		}
		for i, raw := range j.raw {
			n := len(b.recs)
			b.recs = b.recs[:n+1] // parse straight into the batch's next slot (cap is batchSize)
			rec := &b.recs[n]
			if perr := format.ParseBytes(rec, raw); perr != nil {
				b.recs = b.recs[:n]
				perr.Line = int(j.lines[i])
				reject(perr, raw)
				continue
			}
			if tm := rec.Time; !tm.IsZero() {
				if t.First.IsZero() || tm.Before(t.First) {
					t.First = tm
				}
				if tm.After(t.Last) {
					t.Last = tm
				}
			}
			b.lines = append(b.lines, j.lines[i])
			t.lineSum += j.lines[i]
			b.routes = append(b.routes, opt.Router.Route(rec.URI))
		}
		pool.Put(j)
		t.Rows += int64(len(b.recs))
		if len(b.recs) == 0 {
			continue
		}
		select {
		case batches <- b:
			rowsDone(int64(len(b.recs)))
		case <-ctx.Done():
			return
		}
	}
}

// nextBatch is a free batch, emptied, or a new one.
func nextBatch(free <-chan *batch) *batch {
	select {
	case b := <-free:
		b.recs, b.lines, b.routes = b.recs[:0], b.lines[:0], b.routes[:0]
		return b
	default:
		return &batch{recs: make([]parse.Record, 0, batchSize), lines: make([]int64, 0, batchSize), routes: make([]string, 0, batchSize)}
	}
}
