package ingest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/internal/duckerr"
	"github.com/retrylens/retrylens/parse"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file, want string
	}{
		{"../parse/testdata/nginx-retry.log", "retry"},
		{"../parse/testdata/nginx-retry.jsonl", "nginx-json"},
		{"../parse/testdata/caddy.jsonl", "caddy"},
		{"../parse/testdata/gateways/envoy.jsonl", "envoy"},
		{"../parse/testdata/gateways/traefik.jsonl", "traefik"},
		{"../parse/testdata/gateways/kong.json", "kong"},
		{"../parse/testdata/gateways/haproxy.log", "haproxy"},
		{"../testdata/incident-hour/access.log", "retry"}, // one bad line among the first 20 does not matter
	}
	for _, tt := range tests {
		f, err := os.Open(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(bufio.NewReader(f))
		f.Close()
		if err != nil || got.Name != tt.want {
			t.Errorf("Detect(%s) = %v, %v; want %s", tt.file, got, err, tt.want)
		}
	}
	// The Apache corpus is nginx's combined layout.
	if f, err := os.Open("../../shared/corpus/elastic-apache/access.log.gz"); err == nil {
		in, err := openInput(f.Name(), nil)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(in.r)
		in.Close()
		if err != nil || got.Name != "combined" {
			t.Errorf("Detect(corpus) = %v, %v; want combined", got, err)
		}
	}
	_, err := Detect(bufio.NewReader(strings.NewReader("hello\nworld\n")))
	if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "parsed 0 of the first 2 lines") {
		t.Errorf("Detect(garbage) error = %v", err)
	}
}

// A load that fails half way (the context is cancelled, or the input breaks, while DuckDB
// is inserting the rows already parsed) leaves no rows and no registry entry behind, and
// the same file then loads whole.
func TestLoadIsAtomic(t *testing.T) {
	t.Parallel()
	format, _ := parse.Preset("retry")
	src, err := os.ReadFile("../testdata/quiet-hour/access.log")
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("disk on fire")
	for _, tc := range []struct {
		name string
		fail error // nil: cancel the context
	}{{"cancelled", nil}, {"read error", broken}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := Open(ctx, filepath.Join(t.TempDir(), "a.duckdb"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			failing := &cancelAfter{r: strings.NewReader(string(src)), n: len(src) / 2, cancel: cancel, err: tc.fail}
			// The chunk's own reader fails (a stream fails earlier, while it is spooled).
			_, err = loadChunk(cctx, db, failing, &countingHash{Hash: sha256.New()}, format, "x.log", 0, 0, Options{Samples: 20, Now: time.Now})
			if err == nil || (tc.fail != nil && !errors.Is(err, tc.fail)) {
				t.Fatalf("a chunk with a failing input: error %v, want %v", err, tc.fail)
			}
			failing = &cancelAfter{r: strings.NewReader(string(src)), n: len(src) / 2, cancel: cancel, err: broken}
			if _, err = Load(ctx, db, []string{"-"}, Options{Format: format, Stdin: failing}); !errors.Is(err, broken) {
				t.Fatalf("Load with a failing stdin: error %v, want %v", err, broken)
			}
			var rows, files int
			db.QueryRow("SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM files)").Scan(&rows, &files)
			if rows != 0 || files != 0 {
				t.Fatalf("after a failed load: %d rows, %d files; want none", rows, files)
			}
			res, err := Load(ctx, db, []string{"../testdata/quiet-hour/access.log"}, Options{Format: format})
			if err != nil || res.Totals().Rows != 123 {
				t.Fatalf("reload: %v, %+v", err, res.Totals())
			}
		})
	}
}

// When DuckDB stops reading a chunk's rows before the parser is done (here: the INSERT is
// given a LIMIT), the load fails and commits nothing, rather than taking the rows DuckDB
// read for the whole chunk.
func TestLoadRefusesPartialChunk(t *testing.T) {
	// not parallel: it changes rowsInsert, which every load reads
	defer func(f func(int64, int64) string) { rowsInsert = f }(rowsInsert)
	rowsInsert = func(id, file int64) string { return insertRows(id, file) + " LIMIT 10" }
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "p.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	format, _ := parse.Preset("retry")
	// 123 lines: one batch, of which DuckDB takes 10; 4,920 lines: several batches, of
	// which DuckDB reads one.
	src, err := os.ReadFile("../testdata/quiet-hour/access.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 40} {
		var in strings.Builder
		for range n {
			in.Write(src)
		}
		_, err = Load(ctx, db, []string{"-"}, Options{Format: format, Stdin: strings.NewReader(in.String())})
		var rows, files int
		db.QueryRow("SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM files)").Scan(&rows, &files)
		// The parser may still be reading when the INSERT stops early, and is stopped then:
		// it has parsed between a batch and all of the lines.
		var parsed int
		if err == nil {
			t.Fatalf("%d lines through a LIMIT 10: no error", 123*n)
		}
		if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "inserted 10 of the")+len("inserted 10 of the "):], "%d rows parsed", &parsed); serr != nil ||
			parsed < min(123*n, 2048) || parsed > 123*n {
			t.Errorf("%d lines through a LIMIT 10: error %v, want one naming 10 of the rows parsed", 123*n, err)
		}
		if rows != 0 || files != 0 {
			t.Errorf("a failed load left %d rows, %d files", rows, files)
		}
	}
}

// cancelAfter fails once n bytes were read: with err, or by cancelling its context when
// err is nil, as an interrupted stream would.
type cancelAfter struct {
	r      *strings.Reader
	n      int
	cancel func()
	err    error
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.cancel()
		return 0, context.Canceled
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

func TestInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	touch := func(names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch("access.log", "access.log.1", "access.log.2.gz", "access.log.10.gz", "error.log",
		"api.log", "api.log-20261128.gz", "api.log-20261127.gz")
	in := func(names ...string) []string {
		for i, n := range names {
			if n != "-" {
				names[i] = filepath.Join(dir, n)
			}
		}
		return names
	}
	tests := []struct {
		args, want []string
	}{
		// As the shell expands access.log*: lexical order, newest first.
		{in("access.log", "access.log.1", "access.log.10.gz", "access.log.2.gz"), in("access.log.10.gz", "access.log.2.gz", "access.log.1", "access.log")},
		// A quoted glob, expanded here; dateext names, earliest first.
		{in("api.log*"), in("api.log-20261127.gz", "api.log-20261128.gz", "api.log")},
		// Sets keep their place; stdin stays where it was; a repeated name loads once.
		{in("error.log", "access.log", "-", "access.log.1", "error.log"), in("error.log", "access.log.1", "access.log", "-")},
	}
	for _, tt := range tests {
		got, err := Inputs(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Inputs(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
	if _, err := Inputs(in("nothing*.log")); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("a glob matching nothing: %v", err)
	}
}

// A database an older retrylens wrote (here: files without lines_end) is refused with a
// message that says so, not DuckDB's binder error halfway through a load; read-only, its
// missing tables too (columns' fallback).
func TestOldSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.duckdb")
	old, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`CREATE TABLE files (file_id BIGINT, path VARCHAR, bytes BIGINT, sha256 VARCHAR)`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	_, err = OpenReadOnly(context.Background(), path)
	if !errors.Is(err, ErrOldSchema) || !strings.Contains(err.Error(), "files.lines_end") || !strings.Contains(err.Error(), "requests.ts") {
		t.Errorf("OpenReadOnly(old database) = %v; want ErrOldSchema naming files.lines_end and requests.ts", err)
	}
	_, err = Open(context.Background(), path)
	if !errors.Is(err, ErrOldSchema) || !strings.Contains(err.Error(), "files.lines_end") {
		t.Errorf("Open(old database) = %v; want ErrOldSchema naming files.lines_end", err)
	}
}

// A database from before error_code, operation and span_hash: a read-only open says that
// any ingest adds them (the columns schema.sql adds in place, not "load into a new
// database"), any open for writing adds them (its rows kept), and then a read-only open
// works.
func TestColumnsAddedInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "before.duckdb")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`ALTER TABLE requests DROP COLUMN error_code; ALTER TABLE requests DROP COLUMN operation; ALTER TABLE requests DROP COLUMN span_hash; INSERT INTO requests (file_id, line, status) VALUES (1, 1, 400)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(ctx, path); !errors.Is(err, ErrOldSchema) || !strings.Contains(err.Error(), "requests.error_code, requests.operation, requests.span_hash, which any 'retrylens ingest --db' on it (or 'retrylens verify --repair --db') adds in place") {
		t.Errorf("OpenReadOnly(database without error_code) = %v; want ErrOldSchema saying what adds it", err)
	}
	if db, err = Open(ctx, path); err != nil {
		t.Fatalf("Open: %v", err)
	}
	db.Close()
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly after the upgrade: %v", err)
	}
	defer ro.Close()
	var n int
	if err := ro.QueryRow("SELECT count(*) FROM requests WHERE status = 400 AND error_code IS NULL").Scan(&n); err != nil || n != 1 {
		t.Errorf("the row before the upgrade: %d, %v; want it kept, without a code", n, err)
	}
}

// A database written while the request keys were stored as text is upgraded in place by a
// read-write open and refused, with what to run, by a read-only one. Its rows stay, their
// keys hashed (xxhash computed here) and their text kept on every line but first attempts.
func TestUpgradeKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.duckdb")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// the requests table of before: the hashes and key_text replaced by the text
	_, err = db.Exec(`ALTER TABLE requests DROP COLUMN request_id_hash; ALTER TABLE requests DROP COLUMN idempotency_key_hash;
		ALTER TABLE requests DROP COLUMN invocation_id_hash; ALTER TABLE requests DROP COLUMN key_text;
		ALTER TABLE requests ADD COLUMN request_id VARCHAR; ALTER TABLE requests ADD COLUMN idempotency_key VARCHAR;
		ALTER TABLE requests ADD COLUMN invocation_id VARCHAR;
		INSERT INTO requests (file_id, line, attempt, request_id, idempotency_key, invocation_id) VALUES
			(1, 1, 0, 'r1', 'idem-1', NULL), (1, 2, 1, 'r1', 'idem-1', NULL), (1, 3, NULL, 'r3', NULL, NULL),
			(1, 4, 2, NULL, NULL, 'inv-4'), (1, 5, 1, NULL, NULL, NULL)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(ctx, path); !errors.Is(err, ErrOldSchema) || !strings.Contains(err.Error(), "retrylens verify") {
		t.Fatalf("OpenReadOnly(keys as text) = %v; want ErrOldSchema saying what upgrades it", err)
	}
	if db, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type row struct {
		rid, ik, inv sql.NullInt64
		text         sql.NullString
	}
	want := []row{
		{rid: keyOf("r1"), ik: keyOf("idem-1")},                                                      // a first attempt: no text
		{rid: keyOf("r1"), ik: keyOf("idem-1"), text: sql.NullString{String: "idem-1", Valid: true}}, // the Idempotency-Key first
		{rid: keyOf("r3"), text: sql.NullString{String: "r3", Valid: true}},                          // untagged: kept
		{inv: keyOf("inv-4"), text: sql.NullString{String: "inv-4", Valid: true}},
		{},
	}
	rows, err := db.Query(`SELECT request_id_hash, idempotency_key_hash, invocation_id_hash, key_text FROM requests ORDER BY line`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.rid, &r.ik, &r.inv, &r.text); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("upgraded rows (-want +got):\n%s", diff)
	}
	if have, _ := columns(ctx, db); have["requests.request_id"] {
		t.Error("the text column request_id is still there")
	}
}

// The columns checkSchema wants, read from schema.sql's text, are those DuckDB creates
// from it.
func TestSchemaColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	want, err := columns(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, schemaColumns()); diff != "" || len(want) < 40 {
		t.Errorf("schemaColumns() (-DuckDB +read from the text), %d columns:\n%s", len(want), diff)
	}
}

// Log fields with every byte the rows must carry into DuckDB (tab, newline, CR, quote, NUL,
// backslash, non-ASCII) come out of the database exactly as the parser read them.
func TestRowsRoundTrip(t *testing.T) {
	t.Parallel()
	const line = `10.0.0.1 - - [29/Nov/2026:10:00:00 +0000] "GET /a\x09b\x0Ac\x22d\x00e\x5Cf\x0Dg/\xC3\xA9 HTTP/1.1" 502 3 "-" "ua \x22q\x22\x09\x00" rt=0.012 urt="0.011" us="502, 200" ra="1" rr="5xx" rid="r\x09\x22" ik="-" retry_after="-" msec=1795946400.012` + "\n"
	format, _ := parse.Preset("retry")
	want, err := format.ParseLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.ContainsRune(want.URI, 0) || !strings.Contains(want.URI, "\t") || !strings.Contains(want.UserAgent, `"`) {
		t.Fatalf("the parser did not decode the escapes: %q %q", want.URI, want.UserAgent)
	}
	ctx := context.Background()
	db := memDB(t)
	router, _ := NewRouter(nil)
	if _, err := Load(ctx, db, []string{"-"}, Options{Format: format, Router: router, Stdin: strings.NewReader(line)}); err != nil {
		t.Fatal(err)
	}
	var got parse.Record
	var ts time.Time
	err = db.QueryRow(`SELECT ts, uri, user_agent, key_text, upstream_status, upstream_response_time, request_time, status, bytes, attempt, upstream_tries
		FROM requests`).Scan(&ts, &got.URI, &got.UserAgent, &got.RequestID, &got.UpstreamStatus, &got.UpstreamResponseTime,
		&got.RequestTime, &got.Status, &got.Bytes, &got.Attempt, &got.UpstreamTries)
	if err != nil {
		t.Fatal(err)
	}
	if !ts.Equal(want.Time) {
		t.Errorf("ts %v, want %v", ts, want.Time)
	}
	type fields struct {
		URI, UA, RID, US, URT  string
		RT                     float64
		Status, Attempt, Tries int
		Bytes                  int64
	}
	g := fields{got.URI, got.UserAgent, got.RequestID, got.UpstreamStatus, got.UpstreamResponseTime, got.RequestTime, got.Status, got.Attempt, got.UpstreamTries, got.Bytes}
	w := fields{want.URI, want.UserAgent, want.RequestID, want.UpstreamStatus, want.UpstreamResponseTime, want.RequestTime, want.Status, want.Attempt, want.UpstreamTries, want.Bytes}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("(-parsed +stored):\n%s", diff)
	}
}

// Random strings with every kind of byte a JSON log can carry (control characters, quotes,
// tabs, newlines, NUL, backslashes, multi-byte runes) go through parse, retrylens_rows and
// DuckDB unchanged: the database holds what the parser read, field by field.
func TestRowsRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab\"\\\t\n\r\x00\x01\x1f ,;'=+-@é✓\U0001F600<>{}|")
	str := func() string {
		n := rng.IntN(40)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	var in strings.Builder
	const n = 3000
	for i := range n {
		rec := map[string]any{
			"msec": fmt.Sprintf("%d.%03d", 1795946400+i, rng.IntN(1000)), "status": fmt.Sprint(200 + rng.IntN(400)),
			"request": "GET /x" + str() + " HTTP/1.1", "http_user_agent": str(), "http_x_request_id": str(),
			"http_referer": str(), "upstream_status": str(), "http_x_retry_attempt": fmt.Sprint(rng.IntN(3)),
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteByte('\n')
	}
	format, _ := parse.Preset("nginx-json")
	var want []parse.Record
	r := parse.NewReader(strings.NewReader(in.String()), format)
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	ctx := context.Background()
	db := memDB(t)
	router, _ := NewRouter(nil)
	res, err := Load(ctx, db, []string{"-"}, Options{Format: format, Router: router, Stdin: strings.NewReader(in.String())})
	if err != nil || res.Totals().Rows != n {
		t.Fatalf("load: %v, %+v", err, res.Totals())
	}
	rows, err := db.Query(`SELECT coalesce(uri, ''), coalesce(user_agent, ''), coalesce(key_text, ''), request_id_hash, coalesce(referer, ''),
		coalesce(upstream_status, ''), ts, status, attempt FROM requests ORDER BY line`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var g parse.Record
		var ts time.Time
		var rid sql.NullInt64
		if err := rows.Scan(&g.URI, &g.UserAgent, &g.RequestID, &rid, &g.Referer, &g.UpstreamStatus, &ts, &g.Status, &g.Attempt); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if rid != keyOf(w.RequestID) {
			t.Fatalf("line %d: request id %q stored as %v, want its hash %v", i+1, w.RequestID, rid, keyOf(w.RequestID))
		}
		if w.Attempt == 0 { // a first attempt stores no key text
			w.RequestID = ""
		}
		if g.URI != w.URI || g.UserAgent != w.UserAgent || g.RequestID != w.RequestID || g.Referer != w.Referer ||
			g.UpstreamStatus != w.UpstreamStatus || !ts.Equal(w.Time) || g.Status != w.Status || g.Attempt != w.Attempt {
			t.Fatalf("line %d:\nparsed %q %q %q %q %q %v %d %d\nstored %q %q %q %q %q %v %d %d", i+1,
				w.URI, w.UserAgent, w.RequestID, w.Referer, w.UpstreamStatus, w.Time, w.Status, w.Attempt,
				g.URI, g.UserAgent, g.RequestID, g.Referer, g.UpstreamStatus, ts, g.Status, g.Attempt)
		}
	}
	if i != n {
		t.Errorf("%d rows read back, want %d", i, n)
	}
}

// Every column of every row, for every fixture format, holds what the parser read from
// that line: the expectation is built from parse's records (and Route, tested on its own),
// the stored rows are read back from DuckDB, and the two are compared whole. A column
// written to the wrong place, or a field the loader forgets, fails here even when no
// report reads it.
func TestRowsEveryColumn(t *testing.T) {
	t.Parallel()
	files := []string{
		"../parse/testdata/nginx-retry.log", "../parse/testdata/nginx-retry.jsonl", "../parse/testdata/caddy.jsonl",
		"../parse/testdata/gateways/envoy.jsonl", "../parse/testdata/gateways/haproxy.log",
		"../parse/testdata/gateways/traefik.jsonl", "../testdata/incident-hour/access.log",
		"../../shared/corpus/elastic-apache/access.log.gz",
	}
	type row struct {
		Line                                               int64
		TS                                                 sql.NullTime
		RemoteAddr, Method, URI, Protocol                  sql.NullString
		Status                                             sql.NullInt64
		Bytes                                              sql.NullInt64
		Referer, UserAgent, Host                           sql.NullString
		RequestTime                                        sql.NullFloat64
		UpstreamAddr, UpstreamStatus, UpstreamResponseTime sql.NullString
		UpstreamTries, Attempt                             sql.NullInt64
		AttemptSource                                      sql.NullString
		MaxAttempts                                        sql.NullInt64
		RetryReason                                        sql.NullString
		RequestID, IdempotencyKey, InvocationID            sql.NullInt64
		RetryAfter, Route, KeyText                         sql.NullString
	}
	// NULL is the zero value, as database/sql scans it.
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
	num := func(n int64, ok bool) sql.NullInt64 {
		if !ok {
			return sql.NullInt64{}
		}
		return sql.NullInt64{Int64: n, Valid: true}
	}
	// No fixture carries the AWS SDK's headers, a host or an upstream address: a file of
	// its own does, with a retry that states its cap.
	sdk := filepath.Join(t.TempDir(), "sdk.jsonl")
	err := os.WriteFile(sdk, []byte(`{"msec":"1795992163.485","remote_addr":"10.0.0.9","request":"PUT /v1/items/77 HTTP/2.0","status":"503","body_bytes_sent":"0","http_user_agent":"aws-sdk-go-v2/1.30","host":"api.example","upstream_addr":"10.1.0.5:8080, 10.1.0.6:8080","upstream_status":"503, 503","http_amz_sdk_invocation_id":"6f1c0b2e-2d1a-4b8e-9c33-0d5b2f1e7a10","http_amz_sdk_request":"attempt=1; max=3","http_x_retry_reason":"5xx","upstream_http_retry_after":"2"}
{"msec":"1795992165.612","remote_addr":"10.0.0.9","request":"PUT /v1/items/77 HTTP/2.0","status":"200","body_bytes_sent":"12","http_user_agent":"aws-sdk-go-v2/1.30","host":"api.example","upstream_addr":"10.1.0.5:8080","upstream_status":"200","http_amz_sdk_invocation_id":"6f1c0b2e-2d1a-4b8e-9c33-0d5b2f1e7a10","http_amz_sdk_request":"attempt=2; max=3"}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sdk)
	ctx := context.Background()
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			in, err := openInput(path, nil)
			if err != nil && strings.Contains(path, "shared/corpus") {
				t.Skipf("corpus not present: %v", err) // outside the repository, as in parse's TestCorpus
			}
			if err != nil {
				t.Fatal(err)
			}
			format, err := Detect(in.r)
			if err != nil {
				t.Fatal(err)
			}
			var want []row
			r := parse.NewReader(in.r, format)
			for {
				rec, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					continue // rejected: not a row
				}
				w := row{
					Line: int64(r.Line()), TS: sql.NullTime{Time: rec.Time.UTC().Truncate(time.Microsecond), Valid: !rec.Time.IsZero()},
					RemoteAddr: str(rec.RemoteAddr), Method: str(rec.Method), URI: str(rec.URI), Protocol: str(rec.Protocol),
					Status: num(int64(rec.Status), rec.Status >= 0), Bytes: num(rec.Bytes, rec.Bytes >= 0),
					Referer: str(rec.Referer), UserAgent: str(rec.UserAgent), Host: str(rec.Host),
					RequestTime:  sql.NullFloat64{Float64: max(rec.RequestTime, 0), Valid: rec.RequestTime >= 0},
					UpstreamAddr: str(rec.UpstreamAddr), UpstreamStatus: str(rec.UpstreamStatus), UpstreamResponseTime: str(rec.UpstreamResponseTime),
					UpstreamTries: num(int64(rec.UpstreamTries), rec.UpstreamTries > 0), Attempt: num(int64(rec.Attempt), rec.Attempt >= 0),
					RetryReason: str(rec.RetryReason), RequestID: keyOf(rec.RequestID), IdempotencyKey: keyOf(rec.IdempotencyKey),
					InvocationID: keyOf(rec.InvocationID), RetryAfter: str(rec.RetryAfter), Route: str((*Router)(nil).Route(rec.URI)),
				}
				if rec.Attempt != 0 { // the key's text is on every line but first attempts
					w.KeyText = str(firstKey(rec.IdempotencyKey, rec.InvocationID, rec.RequestID))
				}
				if rec.Attempt >= 0 {
					w.AttemptSource, w.MaxAttempts = str(rec.AttemptSource), num(int64(rec.MaxAttempts), rec.MaxAttempts > 0)
				}
				want = append(want, w)
			}
			in.Close()
			if len(want) == 0 {
				t.Fatal("the fixture parsed to no rows")
			}

			db := memDB(t)
			if _, err := Load(ctx, db, []string{path}, Options{Format: format}); err != nil {
				t.Fatal(err)
			}
			rows, err := db.Query(`SELECT line, ts, remote_addr, method, uri, protocol, status, bytes, referer, user_agent, host,
				request_time, upstream_addr, upstream_status, upstream_response_time, upstream_tries, attempt, attempt_source,
				max_attempts, retry_reason, request_id_hash, idempotency_key_hash, invocation_id_hash, retry_after, route, key_text
				FROM requests ORDER BY line`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []row
			for rows.Next() {
				var g row
				if err := rows.Scan(&g.Line, &g.TS, &g.RemoteAddr, &g.Method, &g.URI, &g.Protocol, &g.Status, &g.Bytes, &g.Referer,
					&g.UserAgent, &g.Host, &g.RequestTime, &g.UpstreamAddr, &g.UpstreamStatus, &g.UpstreamResponseTime,
					&g.UpstreamTries, &g.Attempt, &g.AttemptSource, &g.MaxAttempts, &g.RetryReason, &g.RequestID,
					&g.IdempotencyKey, &g.InvocationID, &g.RetryAfter, &g.Route, &g.KeyText); err != nil {
					t.Fatal(err)
				}
				if g.TS.Valid {
					g.TS.Time = g.TS.Time.UTC()
				}
				got = append(got, g)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stored rows differ from the parsed records (-parsed +stored):\n%s", diff)
			}
		})
	}
}

// Parsed on every core, a load counts and samples its rejected lines as one reader would:
// 20,000 lines (ten jobs for the parsers) with every seventh cut short; the samples are
// the first 20 rejected lines, in order, and every count is exact.
func TestParallelRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	src, err := os.ReadFile("../testdata/quiet-hour/access.log")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	lines = lines[:len(lines)-1] // after the last newline: nothing
	var in strings.Builder
	var bad []int
	for i := range 20000 {
		l := lines[i%len(lines)]
		if i%7 == 3 {
			l = l[:20] + "\n" // cut inside $time_local
			bad = append(bad, i+1)
		}
		in.WriteString(l)
	}
	format, _ := parse.Preset("retry")
	res, err := Load(ctx, db, []string{"-"}, Options{Format: format, Stdin: strings.NewReader(in.String())})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Totals()
	if f.Lines != 20000 || f.Rows != int64(20000-len(bad)) || f.Rejected != int64(len(bad)) {
		t.Errorf("%d lines, %d rows, %d rejected; want 20000, %d, %d", f.Lines, f.Rows, f.Rejected, 20000-len(bad), len(bad))
	}
	var got []int
	for _, s := range res.Files[0].Samples {
		got = append(got, s.Line)
	}
	if want := bad[:20]; !slices.Equal(got, want) {
		t.Errorf("sampled lines %v, want the first 20 rejected: %v", got, want)
	}
	var rows, lineSum, firstLine int64
	if err := db.QueryRow("SELECT count(*), sum(line), min(line) FROM requests").Scan(&rows, &lineSum, &firstLine); err != nil {
		t.Fatal(err)
	}
	want := int64(20000 * 20001 / 2)
	for _, b := range bad {
		want -= int64(b)
	}
	if rows != f.Rows || lineSum != want || firstLine != 1 {
		t.Errorf("stored %d rows, line sum %d, first line %d; want %d, %d, 1", rows, lineSum, firstLine, f.Rows, want)
	}
}

// memDB opens an in-memory database with the schema and the table functions, closed when
// the test ends.
func memDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// keyOf is a key as requests stores it: the xxHash64 of its text, NULL when there is none.
func keyOf(s string) sql.NullInt64 {
	if s == "" {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(xxhash.Sum64String(s)), Valid: true}
}

// firstKey is the first of keys that is not empty.
func firstKey(keys ...string) string {
	for _, k := range keys {
		if k != "" {
			return k
		}
	}
	return ""
}

// duckerr.Missing against DuckDB's own errors: a missing table or column, and not
// another kind.
func TestMissing(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"SELECT a FROM t", false},
		{"SELECT a FROM nosuch", true},                    // catalog error
		{"SELECT b FROM t", true},                         // binder error
		{"SELECT name FROM pragma_table_info('x')", true}, // catalog error
		{"SELEC a FROM t", false},                         // parser error
		{"SELECT 1 / 'x'::INTEGER", false},                // conversion error
	} {
		_, err := db.Exec(tc.q)
		if got := duckerr.Missing(err); got != tc.want {
			t.Errorf("%s: Missing(%v) = %v, want %v", tc.q, err, got, tc.want)
		}
	}
	if duckerr.Missing(nil) || !duckerr.Missing(fmt.Errorf("load: %w", errors.New("Catalog Error: wrapped"))) {
		t.Error("Missing(nil), or not of a wrapped error")
	}
}
