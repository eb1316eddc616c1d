package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/retrylens/retrylens/parse"
)

// Rows reach DuckDB through a table function, retrylens_rows(id): a chunk's INSERT …
// SELECT reads it while the parser is still reading the file, and DuckDB's own threads
// call it for up to 2,048 rows at a time, which it writes into DuckDB's vectors in one cgo
// call per batch (fill.go): no temporary file, no Arrow build tag, and faster than both
// (bench/README.md). Every string a parser returns is valid UTF-8 (see package parse); an
// empty one is stored as NULL (retrylens stores no empty strings).

// rowColumns are the requests table's columns the function returns, in its order: each
// with its DuckDB type, the SQL that turns it into the table's type, and how it is read
// from a batch. ts comes as microseconds since the epoch (a time.Time would go through an
// interface and an allocation per row).
var rowColumns = []rowColumn{
	{"line", duckdb.TYPE_BIGINT, "", number(func(b *batch, i int) (int64, bool) { return b.lines[i], true })},
	{"ts", duckdb.TYPE_BIGINT, "make_timestamp(ts)", number(func(b *batch, i int) (int64, bool) {
		return b.recs[i].Time.UnixMicro(), !b.recs[i].Time.IsZero()
	})},
	{"remote_addr", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.RemoteAddr })},
	{"method", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.Method })},
	{"uri", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.URI })},
	{"protocol", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.Protocol })},
	{"status", duckdb.TYPE_SMALLINT, "", number(func(b *batch, i int) (int16, bool) {
		return int16(min(b.recs[i].Status, 32767)), b.recs[i].Status >= 0
	})},
	{"bytes", duckdb.TYPE_BIGINT, "", number(func(b *batch, i int) (int64, bool) { return b.recs[i].Bytes, b.recs[i].Bytes >= 0 })},
	{"referer", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.Referer })},
	{"user_agent", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.UserAgent })},
	{"host", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.Host })},
	{"request_time", duckdb.TYPE_DOUBLE, "", number(func(b *batch, i int) (float64, bool) {
		return b.recs[i].RequestTime, b.recs[i].RequestTime >= 0
	})},
	{"upstream_addr", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.UpstreamAddr })},
	{"upstream_status", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.UpstreamStatus })},
	{"upstream_response_time", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.UpstreamResponseTime })},
	{"upstream_tries", duckdb.TYPE_SMALLINT, "", number(func(b *batch, i int) (int16, bool) {
		return int16(min(b.recs[i].UpstreamTries, 32767)), b.recs[i].UpstreamTries > 0
	})},
	{"attempt", duckdb.TYPE_INTEGER, "", number(func(b *batch, i int) (int32, bool) { return int32(b.recs[i].Attempt), b.recs[i].Attempt >= 0 })},
	// where the attempt number came from and the cap it announced: only with one
	{"attempt_source", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string {
		if r.Attempt < 0 {
			return ""
		}
		return r.AttemptSource
	})},
	{"max_attempts", duckdb.TYPE_SMALLINT, "", number(func(b *batch, i int) (int16, bool) {
		r := &b.recs[i]
		return int16(min(r.MaxAttempts, 32767)), r.Attempt >= 0 && r.MaxAttempts > 0
	})},
	{"retry_reason", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.RetryReason })},
	{"request_id_hash", duckdb.TYPE_BIGINT, "", keyHash(func(r *parse.Record) string { return r.RequestID })},
	{"idempotency_key_hash", duckdb.TYPE_BIGINT, "", keyHash(func(r *parse.Record) string { return r.IdempotencyKey })},
	{"invocation_id_hash", duckdb.TYPE_BIGINT, "", keyHash(func(r *parse.Record) string { return r.InvocationID })},
	{"retry_after", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.RetryAfter })},
	{"route", duckdb.TYPE_VARCHAR, "", textAt(func(b *batch, i int) string { return b.routes[i] })},
	{"key_text", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string {
		return KeyText(r.Attempt, r.IdempotencyKey, r.InvocationID, r.RequestID)
	})},
	{"error_code", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.ErrorCode })},
	{"operation", duckdb.TYPE_VARCHAR, "", text(func(r *parse.Record) string { return r.Operation })},
	{"span_hash", duckdb.TYPE_BIGINT, "", keyHash(func(r *parse.Record) string { return r.Span })},
}

// keyHash fills a column with the KeyHash of a record's key: "" is NULL.
func keyHash(get func(*parse.Record) string) access {
	return number(func(b *batch, i int) (int64, bool) {
		k := get(&b.recs[i])
		return KeyHash(k), k != ""
	})
}

// rowColumn is one column of retrylens_rows.
type rowColumn struct {
	name string
	typ  duckdb.Type
	sql  string
	access
}

// access reads a column of a batch: fill lays out its values for DuckDB's chunk, as
// column col of f; value gives row i's value for another store (a ClickHouse batch), nil
// for NULL.
type access struct {
	fill  func(f *filler, col int, b *batch)
	value func(b *batch, i int) any
}

// text reads a column from a record's string: "" is NULL.
func text(get func(*parse.Record) string) access {
	return textAt(func(b *batch, i int) string { return get(&b.recs[i]) })
}

func textAt(get func(b *batch, i int) string) access {
	return access{
		fill: func(f *filler, col int, b *batch) {
			for i := range b.recs {
				f.text(col, i, get(b, i))
			}
		},
		value: func(b *batch, i int) any {
			if v := get(b, i); v != "" {
				return v
			}
			return nil
		},
	}
}

// number fills a column of numbers; ok false is NULL.
func number[T int16 | int32 | int64 | float64](get func(b *batch, i int) (T, bool)) access {
	return access{value: func(b *batch, i int) any {
		if v, ok := get(b, i); ok {
			return v
		}
		return nil
	}, fill: func(f *filler, col int, b *batch) {
		for i := range b.recs {
			v, ok := get(b, i)
			f.number(col, i, bitsOf(v), ok)
		}
	}}
}

// bitsOf is a number as the 64 bits its vector stores it in: a DOUBLE's own bits, an
// integer sign-extended (retrylens_fill keeps the low bytes of its width).
func bitsOf[T int16 | int32 | int64 | float64](v T) uint64 {
	switch x := any(v).(type) {
	case float64:
		return math.Float64bits(x)
	case int16:
		return uint64(int64(x))
	case int32:
		return uint64(int64(x))
	default:
		return uint64(x.(int64))
	}
}

// rowsFunction is the name of the table function.
const rowsFunction = "retrylens_rows"

// sources holds the row sources of the loads under way, by the id their INSERT passes to
// retrylens_rows.
var (
	sources  sync.Map // int64 -> *rowSource
	sourceID atomic.Int64
)

// registerFunctions registers retrylens_rows and retrylens_key (keys.go) with db's
// DuckDB instance (functions are global to it, whatever connection registers them).
func registerFunctions(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := registerRows(conn); err != nil {
		return err
	}
	return registerKey(conn)
}

// typeInfo is DuckDB's TypeInfo of a type without parameters (which it cannot refuse).
func typeInfo(t duckdb.Type) duckdb.TypeInfo {
	info, err := duckdb.NewTypeInfo(t)
	if err != nil {
		panic(err)
	}
	return info
}

func registerRows(conn *sql.Conn) error {
	var cols []duckdb.ColumnInfo
	for _, c := range rowColumns {
		cols = append(cols, duckdb.ColumnInfo{Name: c.name, T: typeInfo(c.typ)})
	}
	return duckdb.RegisterTableUDF(conn, rowsFunction, duckdb.ParallelChunkTableFunction{
		Config: duckdb.TableFunctionConfig{Arguments: []duckdb.TypeInfo{typeInfo(duckdb.TYPE_BIGINT)}},
		BindArguments: func(_ map[string]any, args ...any) (duckdb.ParallelChunkTableSource, error) {
			id, _ := args[0].(int64)
			s, ok := sources.Load(id)
			if !ok {
				return nil, fmt.Errorf("%s(%d): no such load under way", rowsFunction, id)
			}
			src := s.(*rowSource)
			src.cols = cols
			return src, nil
		},
	})
}

// rowsInsert is insertRows; tests replace it to make DuckDB stop reading early.
var rowsInsert = insertRows

// insertRows is the INSERT that loads the rows of source id as those of file_id file.
func insertRows(id, file int64) string {
	var b strings.Builder
	b.WriteString("INSERT INTO requests (file_id")
	for _, c := range rowColumns {
		b.WriteString(", " + c.name)
	}
	b.WriteString(") SELECT " + strconv.FormatInt(file, 10))
	for _, c := range rowColumns {
		b.WriteString(", ")
		if c.sql != "" {
			b.WriteString(c.sql)
		} else {
			b.WriteString(c.name)
		}
	}
	b.WriteString(" FROM " + rowsFunction + "(" + strconv.FormatInt(id, 10) + ")")
	return b.String()
}

// rowSource hands DuckDB the batches the parser sends, one per call, from whichever of
// DuckDB's threads asks; a closed channel ends the rows. Whether the parser stopped
// because the input ended or because it failed is for the caller to check once the
// INSERT returns, before it commits.
type rowSource struct {
	ctx     context.Context // the load's: DuckDB's threads wait for a batch until it ends
	batches <-chan *batch
	free    chan<- *batch
	cols    []duckdb.ColumnInfo
}

// newRowSource registers a source and returns its id; drop unregisters it.
func newRowSource(ctx context.Context, batches <-chan *batch, free chan<- *batch) (id int64, drop func()) {
	id = sourceID.Add(1)
	sources.Store(id, &rowSource{ctx: ctx, batches: batches, free: free})
	return id, func() { sources.Delete(id) }
}

func (s *rowSource) ColumnInfos() []duckdb.ColumnInfo     { return s.cols }
func (s *rowSource) Cardinality() *duckdb.CardinalityInfo { return nil }
func (s *rowSource) Init() duckdb.ParallelTableSourceInfo {
	// As many of DuckDB's threads as it has may fill chunks (0 would mean one).
	return duckdb.ParallelTableSourceInfo{MaxThreads: runtime.NumCPU()}
}
func (s *rowSource) NewLocalState() any { return new(filler) }

// FillChunk writes the next batch into c. An empty chunk ends the rows, so an empty
// batch (the parser sends none) is passed over.
func (s *rowSource) FillChunk(state any, c duckdb.DataChunk) error {
	var b *batch
	for b == nil || len(b.recs) == 0 {
		var ok bool
		select {
		case b, ok = <-s.batches:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if !ok { // closed: the parser is done
			return c.SetSize(0)
		}
	}
	if err := fillChunk(state.(*filler), &c, b); err != nil {
		return err
	}
	select {
	case s.free <- b:
	default:
	}
	return nil
}

// fillChunk writes a batch's rows into c, column by column of rowColumns, and sets its size.
func fillChunk(f *filler, c *duckdb.DataChunk, b *batch) error {
	f.reset(len(b.recs))
	for col, rc := range rowColumns {
		rc.fill(f, col, b)
	}
	return f.write(c)
}
