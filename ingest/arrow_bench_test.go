//go:build duckdb_arrow

package ingest

// Arrow against the table function ingest loads with (rows.go), for issue 5's "measure
// both": the same parsed records of the 1M-line benchmark log (see parse's benchmarks)
// loaded into a fresh database file, each way, in one run. Needs the build tag:
//
//	go test -tags duckdb_arrow ./ingest -run '^$' -bench Arrow1M -benchtime 1x

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/retrylens/retrylens/parse"
)

func benchRecords(b *testing.B) ([]parse.Record, []string) {
	f, err := os.Open("/tmp/retrylens-1m.log")
	if err != nil {
		b.Skip("no /tmp/retrylens-1m.log: go run ./bench/genlog -n 1000000 > /tmp/retrylens-1m.log")
	}
	defer f.Close()
	format, _ := parse.Preset("retry")
	r := parse.NewReader(f, format)
	var recs []parse.Record
	var routes []string
	var router *Router
	for {
		rec, err := r.Read()
		if err != nil {
			break
		}
		recs = append(recs, rec)
		routes = append(routes, router.Route(rec.URI))
	}
	return recs, routes
}

// freshDB is benchDB (bench_test.go) with a connection.
func freshDB(b *testing.B) (*sql.DB, *sql.Conn) {
	db := benchDB(b)
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return db, conn
}

func BenchmarkArrow1M(b *testing.B) {
	recs, routes := benchRecords(b)
	ctx := context.Background()
	const chunk = 250_000 // rows per transaction, about what a 64 MiB chunk holds
	report := func(b *testing.B, d time.Duration) {
		b.ReportMetric(float64(len(recs))/d.Seconds(), "rows/s")
	}
	b.Run("rows", func(b *testing.B) {
		for range b.N {
			db, conn := freshDB(b)
			start := time.Now()
			for lo := 0; lo < len(recs); lo += chunk {
				hi := min(lo+chunk, len(recs))
				batches := make(chan *batch, 4)
				go func() {
					defer close(batches)
					for i := lo; i < hi; i += batchSize {
						j := min(i+batchSize, hi)
						lines := make([]int64, 0, j-i)
						for k := i; k < j; k++ {
							lines = append(lines, int64(k+1))
						}
						batches <- &batch{recs: recs[i:j], lines: lines, routes: routes[i:j]}
					}
				}()
				id, drop := newRowSource(ctx, batches, make(chan *batch, 8))
				if _, err := conn.ExecContext(ctx, "BEGIN; "+insertRows(id, int64(lo/chunk+1))+"; COMMIT"); err != nil {
					b.Fatal(err)
				}
				drop()
			}
			report(b, time.Since(start))
			conn.Close()
			db.Close()
		}
	})
	b.Run("arrow", func(b *testing.B) {
		for range b.N {
			db, conn := freshDB(b)
			start := time.Now()
			for lo := 0; lo < len(recs); lo += chunk {
				hi := min(lo+chunk, len(recs))
				batches := arrowBatches(recs[lo:hi], routes[lo:hi], int64(lo))
				reader, err := array.NewRecordReader(requestsSchema, batches)
				if err != nil {
					b.Fatal(err)
				}
				var release func()
				err = conn.Raw(func(dc any) error {
					a, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
					if err != nil {
						return err
					}
					release, err = a.RegisterView(reader, "arrow_rows")
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.ExecContext(ctx, fmt.Sprintf("BEGIN; INSERT INTO requests SELECT %d, * FROM arrow_rows; COMMIT", lo/chunk+1)); err != nil {
					b.Fatal(err)
				}
				release()
				for _, r := range batches {
					r.Release()
				}
				reader.Release()
			}
			report(b, time.Since(start))
			conn.Close()
			db.Close()
		}
	})
}

var requestsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "line", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "remote_addr", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "method", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "uri", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "protocol", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "status", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "referer", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "user_agent", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "request_time", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "upstream_addr", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "upstream_status", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "upstream_response_time", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "upstream_tries", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "attempt", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "attempt_source", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "max_attempts", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "retry_reason", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "request_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "idempotency_key", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "invocation_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "retry_after", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "route", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// arrowBatches builds record batches of 122,880 rows (a DuckDB row group).
func arrowBatches(recs []parse.Record, routes []string, first int64) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for lo := 0; lo < len(recs); lo += 122880 {
		hi := min(lo+122880, len(recs))
		bld := array.NewRecordBuilder(memory.DefaultAllocator, requestsSchema)
		str := func(col int, s string) {
			f := bld.Field(col).(*array.StringBuilder)
			if s == "" {
				f.AppendNull()
			} else {
				f.Append(s)
			}
		}
		for i := lo; i < hi; i++ {
			r := &recs[i]
			bld.Field(0).(*array.Int64Builder).Append(first + int64(i) + 1)
			if r.Time.IsZero() {
				bld.Field(1).AppendNull()
			} else {
				bld.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Time.UnixMicro()))
			}
			str(2, r.RemoteAddr)
			str(3, r.Method)
			str(4, r.URI)
			str(5, r.Protocol)
			if r.Status >= 0 {
				bld.Field(6).(*array.Int16Builder).Append(int16(r.Status))
			} else {
				bld.Field(6).AppendNull()
			}
			if r.Bytes >= 0 {
				bld.Field(7).(*array.Int64Builder).Append(r.Bytes)
			} else {
				bld.Field(7).AppendNull()
			}
			str(8, r.Referer)
			str(9, r.UserAgent)
			str(10, r.Host)
			if r.RequestTime >= 0 {
				bld.Field(11).(*array.Float64Builder).Append(r.RequestTime)
			} else {
				bld.Field(11).AppendNull()
			}
			str(12, r.UpstreamAddr)
			str(13, r.UpstreamStatus)
			str(14, r.UpstreamResponseTime)
			if r.UpstreamTries > 0 {
				bld.Field(15).(*array.Int16Builder).Append(int16(min(r.UpstreamTries, 32767)))
			} else {
				bld.Field(15).AppendNull()
			}
			if r.Attempt >= 0 {
				bld.Field(16).(*array.Int32Builder).Append(int32(r.Attempt))
				str(17, r.AttemptSource)
			} else {
				bld.Field(16).AppendNull()
				str(17, "")
			}
			if r.Attempt >= 0 && r.MaxAttempts > 0 {
				bld.Field(18).(*array.Int16Builder).Append(int16(min(r.MaxAttempts, 32767)))
			} else {
				bld.Field(18).AppendNull()
			}
			str(19, r.RetryReason)
			str(20, r.RequestID)
			str(21, r.IdempotencyKey)
			str(22, r.InvocationID)
			str(23, r.RetryAfter)
			str(24, routes[i])
		}
		out = append(out, bld.NewRecordBatch())
		bld.Release()
	}
	return out
}
