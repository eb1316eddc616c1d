package ingest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/retrylens/retrylens/parse"
)

// TestFillValues loads records with the values at the edges of each column's type
// through retrylens_rows and reads them back: NULLs, strings short enough for DuckDB to
// inline (12 bytes) and longer ones, bytes that are not UTF-8 (escaped), numbers at their
// limits; a key as its hash, and as text on every line but a first attempt (a retry, an
// untagged line). More rows than one chunk, so that later chunks reuse a thread's filler.
func TestFillValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	long := strings.Repeat("/é", 40)
	edge := []parse.Record{
		{Time: time.UnixMicro(1795946401012345).UTC(), RemoteAddr: "10.0.0.1", Method: "GET", URI: long, Status: 502,
			Bytes: 1 << 40, RequestTime: 0.25, UpstreamTries: 40000, Attempt: 1<<31 - 1, AttemptSource: "x-retry-attempt",
			MaxAttempts: 3, RequestID: "r-\xff-\xc3", UserAgent: "123456789012", Referer: "1234567890123"},
		{Status: -1, Bytes: -1, RequestTime: -1, Attempt: -1, UpstreamTries: 0, AttemptSource: "dropped without attempt", RequestID: "untagged"},
		{Status: 0, Bytes: 0, RequestTime: 0, Attempt: 0, MaxAttempts: 0, Method: "é"},
	}
	var recs []parse.Record
	for len(recs) < 3*batchSize+5 {
		recs = append(recs, edge...)
	}
	batches := make(chan *batch, 8)
	go func() {
		defer close(batches)
		for i := 0; i < len(recs); i += batchSize {
			b := &batch{recs: recs[i:min(i+batchSize, len(recs))]}
			for j := range b.recs {
				b.lines = append(b.lines, int64(i+j+1))
				b.routes = append(b.routes, map[int]string{0: "/r/{id}", 1: "", 2: long}[(i+j)%3])
			}
			batches <- b
		}
	}()
	id, drop := newRowSource(ctx, batches, make(chan *batch, 8))
	defer drop()
	res, err := db.ExecContext(ctx, insertRows(id, 1))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(recs)) {
		t.Fatalf("inserted %d rows, want %d", n, len(recs))
	}
	type row struct {
		ts                                   sql.NullTime
		addr, method, uri, ua, ref, src, rid sql.NullString
		route                                sql.NullString
		status, tries, max                   sql.NullInt16
		bytes, ridHash                       sql.NullInt64
		rt                                   sql.NullFloat64
		attempt                              sql.NullInt32
	}
	want := []row{{
		ts: sql.NullTime{Time: time.UnixMicro(1795946401012345).UTC(), Valid: true}, addr: str("10.0.0.1"), method: str("GET"),
		uri: str(long), ua: str("123456789012"), ref: str("1234567890123"), src: str("x-retry-attempt"),
		rid: str(`r-\xff-\xc3`), ridHash: sql.NullInt64{Int64: int64(xxhash.Sum64String(`r-\xff-\xc3`)), Valid: true}, route: str("/r/{id}"), status: sql.NullInt16{Int16: 502, Valid: true},
		tries: sql.NullInt16{Int16: 32767, Valid: true}, max: sql.NullInt16{Int16: 3, Valid: true},
		bytes: sql.NullInt64{Int64: 1 << 40, Valid: true}, rt: sql.NullFloat64{Float64: 0.25, Valid: true},
		attempt: sql.NullInt32{Int32: 1<<31 - 1, Valid: true},
	}, {rid: str("untagged"), ridHash: sql.NullInt64{Int64: int64(xxhash.Sum64String("untagged")), Valid: true}}, {
		method: str("é"), route: str(long), status: sql.NullInt16{Valid: true}, bytes: sql.NullInt64{Valid: true},
		rt: sql.NullFloat64{Valid: true}, attempt: sql.NullInt32{Valid: true},
	}}
	rows, err := db.QueryContext(ctx, `SELECT line, ts, remote_addr, method, uri, user_agent, referer, attempt_source, key_text, request_id_hash,
		route, status, upstream_tries, max_attempts, bytes, request_time, attempt FROM requests ORDER BY line`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var line int64
		var r row
		if err := rows.Scan(&line, &r.ts, &r.addr, &r.method, &r.uri, &r.ua, &r.ref, &r.src, &r.rid, &r.ridHash, &r.route,
			&r.status, &r.tries, &r.max, &r.bytes, &r.rt, &r.attempt); err != nil {
			t.Fatal(err)
		}
		if w := want[(line-1)%3]; r != w {
			t.Fatalf("line %d:\n got %+v\nwant %+v", line, r, w)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != len(recs) {
		t.Fatalf("read %d rows of %d: %v", n, len(recs), err)
	}
}

func str(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
