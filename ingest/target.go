package ingest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/retrylens/retrylens/parse"
)

// Target is a store other than a DuckDB file that LoadTarget fills (a ClickHouse
// cluster: package cluster): the same files, chunks, registry and reject accounting, so
// that what "exactly once" means is written once, here.
type Target interface {
	// Check compares the rows with the registry; Repair deletes what it found and says
	// how many rows it deleted.
	Check(ctx context.Context) (Damage, error)
	Repair(ctx context.Context, d Damage) (int64, error)
	// Registered returns every loaded prefix (RegistryQuery's rows, ScanPrefixes).
	Registered(ctx context.Context) ([]Prefix, error)
	// LoadChunk loads the chunk's rows (Chunk.Rows), rejects and registry entry
	// (Chunk.Entry), all or nothing: the registry entry last, as the commit.
	LoadChunk(ctx context.Context, c *Chunk) error
	// RouteCheck counts the distinct routes into res and, past max, names hotspots.
	RouteCheck(ctx context.Context, res *Result, max int64) error
	// LockFile holds a file against other loaders into the same store while it is read
	// and loaded (another loader of it waits): key names the file's content, so that one
	// log under two names is one file; path is the file as the user named it, for
	// messages. Loading starts after it returns, from what the registry holds then.
	LockFile(ctx context.Context, key, path string) (unlock func(), err error)
	// String names the store in messages ("cluster").
	String() string
}

// LoadTarget is Load into t.
func LoadTarget(ctx context.Context, t Target, paths []string, opt Options) (Result, error) {
	if opt.Dedupe {
		return Result{}, fmt.Errorf("--dedupe works on a DuckDB database, not yet on a %s", t)
	}
	return load(ctx, target{t}, paths, opt)
}

// Prefix is a loaded prefix of a file's content, as the registry records it.
type Prefix = prefix

// RegistryQuery reads the loaded prefixes from the registry (files), in the SQL of
// either engine.
const RegistryQuery = registeredQuery

// ScanPrefixes reads RegistryQuery's rows, from either engine's driver.
func ScanPrefixes(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) ([]Prefix, error) {
	return prefixes(rows)
}

// target is a Target as load's store.
type target struct{ t Target }

func (t target) String() string                                      { return t.t.String() }
func (t target) check(ctx context.Context) (Damage, error)           { return t.t.Check(ctx) }
func (t target) repair(ctx context.Context, d Damage) (int64, error) { return t.t.Repair(ctx, d) }
func (t target) registered(ctx context.Context) ([]prefix, error)    { return t.t.Registered(ctx) }
func (t target) routeCheck(ctx context.Context, res *Result, max int64) error {
	return t.t.RouteCheck(ctx, res, max)
}

func (t target) lockFile(ctx context.Context, src, path string) (func(), error) {
	key, err := contentKey(src)
	if err != nil || key == "" {
		return func() {}, err
	}
	return t.t.LockFile(ctx, key, path)
}

// contentKey names a file by its first line (its content up to the first newline, at
// most 64 KB): what a rotated or copied log keeps. "" when it has no whole line yet:
// nothing of it can be loaded.
func contentKey(src string) (string, error) {
	in, err := openInput(src, nil)
	if err != nil {
		return "", err
	}
	defer in.Close()
	first, err := in.r.Peek(64 << 10)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return "", err
	}
	i := bytes.IndexByte(first, '\n')
	if i < 0 {
		return "", nil
	}
	h := sha256.Sum256(first[:i])
	return hex.EncodeToString(h[:8]), nil
}

func (t target) loadChunk(ctx context.Context, r io.Reader, h *countingHash, format *parse.Format, path string, offset, line int64, opt Options) (*chunk, error) {
	c := &Chunk{Path: path, Format: format, r: r, h: h, opt: opt,
		c: &chunk{out: File{Path: path, Reasons: map[string]int64{}}, offset: offset, line: line}}
	if err := t.t.LoadChunk(ctx, c); err != nil {
		return nil, err
	}
	if !c.parsed {
		return nil, errors.New("the chunk's rows were not read")
	}
	return c.c, nil
}

// Chunk is a part of a file for a Target to load: its rows, parsed while they are
// loaded, then its rejects and registry entry.
type Chunk struct {
	Path   string
	Format *parse.Format
	r      io.Reader
	h      *countingHash
	opt    Options
	c      *chunk
	parsed bool
}

// Step says a chunk's transaction reached s (crash tests kill a load there).
func (c *Chunk) Step(s Step) { c.opt.step(s) }

// KeyTextColumns are the names of the values Chunk.Rows gives: the DuckDB rows'
// columns with the time as ts_us (microseconds) and the keys as their text
// (request_id, idempotency_key, invocation_id) instead of their hashes and key_text.
func KeyTextColumns() []string {
	names := make([]string, len(keyTextColumns))
	for i, rc := range keyTextColumns {
		names[i] = rc.name
	}
	return names
}

// keyTextColumns are KeyTextColumns' accessors.
var keyTextColumns = func() []rowColumn {
	keys := map[string]rowColumn{
		"request_id_hash":      {name: "request_id", access: text(func(r *parse.Record) string { return r.RequestID })},
		"idempotency_key_hash": {name: "idempotency_key", access: text(func(r *parse.Record) string { return r.IdempotencyKey })},
		"invocation_id_hash":   {name: "invocation_id", access: text(func(r *parse.Record) string { return r.InvocationID })},
	}
	var out []rowColumn
	for _, rc := range rowColumns {
		switch k, ok := keys[rc.name]; {
		case ok:
			out = append(out, k)
		case rc.name == "key_text", rc.name == "span_hash":
			// a cluster keeps no spans: the layers are joined in a DuckDB file (docs/metrics.md)
		case rc.name == "ts":
			rc.name = "ts_us"
			out = append(out, rc)
		default:
			out = append(out, rc)
		}
	}
	return out
}()

// Rows parses the chunk and calls row for each parsed line with its record and the
// values of KeyTextColumns (nil for NULL; vals is reused). An error from row stops the
// parse and is returned. Once Rows returns nil, the chunk's counts (Out) and registry
// entry (Entry) are complete.
func (c *Chunk) Rows(ctx context.Context, row func(rec *parse.Record, vals []any) error) error {
	if c.parsed {
		return errors.New("a chunk's rows are read once")
	}
	c.parsed = true
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	batches := make(chan *batch, 4)
	free := make(chan *batch, 8)
	parsed := make(chan error, 1)
	go func() {
		defer close(batches)
		parsed <- readAll(pctx, c.r, c.h, c.Format, c.c.line, &c.c.out, &c.c.lineSum, c.opt, batches, free)
	}()
	vals := make([]any, len(keyTextColumns))
	var err error
	for b := range batches {
		for i := range b.recs {
			for j, rc := range keyTextColumns {
				vals[j] = rc.value(b, i)
			}
			if err = row(&b.recs[i], vals); err != nil {
				break
			}
		}
		select {
		case free <- b:
		default:
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		stop()
		for range batches {
		}
	}
	perr := <-parsed
	switch {
	case perr != nil && !errors.Is(perr, context.Canceled):
		return perr
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	c.c.end = c.h.n
	c.c.out.Bytes = c.h.n - c.c.offset
	c.c.sum = hex.EncodeToString(c.h.Sum(nil))
	return nil
}

// Out is what the chunk's rows counted: lines, rows, rejects by reason and the kept
// samples, first and last times.
func (c *Chunk) Out() *File { return &c.c.out }

// Entry is the registry entry that commits a chunk, complete once Rows returned.
type Entry struct {
	Path, SHA256, Format           string
	Offset, End                    int64 // the bytes of the file it covers: [Offset, End)
	FirstLine, LastLine            int64 // its lines, numbered from 1 in the file
	Lines, Rows, Rejected, LineSum int64
	First, Last                    *time.Time // its rows' first and last times (UTC), nil without any
	LoadedAt                       time.Time
}

// Entry returns the chunk's registry entry.
func (c *Chunk) Entry() Entry {
	out := &c.c.out
	e := Entry{Path: c.Path, SHA256: c.c.sum, Format: c.Format.Name, Offset: c.c.offset, End: c.c.end,
		FirstLine: c.c.line + 1, LastLine: c.c.line + out.Lines, Lines: out.Lines, Rows: out.Rows,
		Rejected: out.Rejected, LineSum: c.c.lineSum, LoadedAt: c.opt.Now().UTC()}
	if !out.First.IsZero() {
		t := out.First.UTC()
		e.First = &t
	}
	if !out.Last.IsZero() {
		t := out.Last.UTC()
		e.Last = &t
	}
	return e
}

// RegistryLoad is where a registered load lies in its file, for MarkLater.
type RegistryLoad = registryLoad

// NewRegistryLoad is the RegistryLoad of load id: bytes [offset, offset+bytes) of its
// file, lines [first, last].
func NewRegistryLoad(id, offset, bytes, first, last int64) RegistryLoad {
	return registryLoad{id: id, offset: offset, bytes: bytes, first: first, last: last}
}

// MarkLater fills each bad load's Later from every registered load (Check's rule).
func MarkLater(all []RegistryLoad, bad []BadLoad) { markLater(all, bad) }

// IDs are the load ids d names: orphans, then bad loads and the loads after them.
func (d Damage) IDs() []int64 { return d.ids() }
