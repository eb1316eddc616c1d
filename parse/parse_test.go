package parse

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// lineOf returns line n (1-based) of a testdata file.
func lineOf(t testing.TB, name string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	return lines[n-1]
}

func ms(sec, milli int64) time.Time { return time.Unix(sec, milli*1e6).UTC() }

func TestParseLine(t *testing.T) {
	retry, _ := Preset("retry")
	combined, _ := Preset("combined")
	jsonl, _ := Preset("nginx-json")
	caddy, _ := Preset("caddy")
	tests := []struct {
		name   string
		format *Format
		line   string
		want   Record
	}{
		{
			name:   "retry first attempt 502",
			format: retry,
			line:   lineOf(t, "nginx-retry.log", 1),
			want: Record{
				Time: ms(1795992163, 485), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/api/users/42/orders?fail=1",
				Protocol: "HTTP/1.1", Status: 502, Bytes: 17, UserAgent: "curl/8.5.0", RequestTime: 0,
				UpstreamStatus: "502", UpstreamResponseTime: "0.000", UpstreamTries: 1,
				Attempt: 0, AttemptSource: "x-retry-attempt", RequestID: "a1",
			},
		},
		{
			name:   "retry second attempt succeeds",
			format: retry,
			line:   lineOf(t, "nginx-retry.log", 2),
			want: Record{
				Time: ms(1795992163, 486), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/api/users/42/orders?fail=1",
				Protocol: "HTTP/1.1", Status: 200, Bytes: 3, UserAgent: "curl/8.5.0", RequestTime: 0.001,
				UpstreamStatus: "200", UpstreamResponseTime: "0.000", UpstreamTries: 1,
				Attempt: 1, AttemptSource: "x-retry-attempt", RetryReason: "http_502", RequestID: "a1",
			},
		},
		{
			name:   "untagged, UTF-8 user agent escaped by nginx",
			format: retry,
			line:   lineOf(t, "nginx-retry.log", 3),
			want: Record{
				Time: ms(1795992163, 486), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/search?q=caf%C3%A9",
				Protocol: "HTTP/1.1", Status: 200, Bytes: 3, UserAgent: "Mozilla/5.0 (X11; Linux x86_64) café",
				UpstreamStatus: "200", UpstreamResponseTime: "0.000", UpstreamTries: 1, Attempt: -1,
			},
		},
		{
			name:   "attempt header that is not a number stays untagged",
			format: retry,
			line:   lineOf(t, "nginx-retry.log", 4),
			want: Record{
				Time: ms(1795992163, 487), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/health?status=503",
				Protocol: "HTTP/1.1", Status: 503, Bytes: 0, UserAgent: "<script>alert(1)</script>",
				UpstreamStatus: "503", UpstreamResponseTime: "0.000", UpstreamTries: 1, Attempt: -1,
			},
		},
		{
			name:   "quote, backslash and control byte in the user agent",
			format: retry,
			line:   lineOf(t, "nginx-retry.log", 5),
			want: Record{
				Time: ms(1795992168, 26), RemoteAddr: "127.0.0.1", Method: "POST", URI: "/api/payments?status=429",
				Protocol: "HTTP/1.1", Status: 400, Bytes: 25, Referer: "https://shop.example/=1+1",
				UserAgent: "pay-client \"beta\"\\2\x01", RequestTime: 0.001,
				UpstreamStatus: "400", UpstreamResponseTime: "0.001", UpstreamTries: 1,
				Attempt: 0, AttemptSource: "x-retry-attempt", IdempotencyKey: "k-9f2c",
			},
		},
		{
			name:   "json: quote, backslash and \\u0001",
			format: jsonl,
			line:   lineOf(t, "nginx-retry.jsonl", 5),
			want: Record{
				Time: ms(1795992168, 26), RemoteAddr: "127.0.0.1", Method: "POST", URI: "/api/payments?status=429",
				Protocol: "HTTP/1.1", Status: 400, Bytes: 25, Referer: "https://shop.example/=1+1",
				UserAgent: "pay-client \"beta\"\\2\x01", RequestTime: 0.001,
				UpstreamStatus: "400", UpstreamResponseTime: "0.001", UpstreamTries: 1,
				Attempt: 0, AttemptSource: "x-retry-attempt", IdempotencyKey: "k-9f2c",
			},
		},
		{
			name:   "json: retry",
			format: jsonl,
			line:   lineOf(t, "nginx-retry.jsonl", 2),
			want: Record{
				Time: ms(1795992163, 486), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/api/users/42/orders?fail=1",
				Protocol: "HTTP/1.1", Status: 200, Bytes: 3, UserAgent: "curl/8.5.0", RequestTime: 0.001,
				UpstreamStatus: "200", UpstreamResponseTime: "0.000", UpstreamTries: 1,
				Attempt: 1, AttemptSource: "x-retry-attempt", RetryReason: "http_502", RequestID: "a1",
			},
		},
		{
			name:   "caddy: nested request, headers as lists, float seconds",
			format: caddy,
			line:   lineOf(t, "caddy.jsonl", 1),
			want: Record{
				Time: time.Unix(1795993776, 119582200).UTC(), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/x?y=1",
				Protocol: "HTTP/1.1", Host: "127.0.0.1:18080", Status: 404, Bytes: 335, UserAgent: `t "q"`,
				RequestTime: 0.01197329, Attempt: 1, AttemptSource: "x-retry-attempt", RequestID: "abc",
			},
		},
		{
			name:   "combined from the Apache corpus, Latin-1 referer kept escaped",
			format: combined,
			line:   `201.242.142.135 - - [19/May/2015:11:05:10 +0000] "GET /files/logstash/ HTTP/1.0" 200 13316 "http://\xe4\xe5\xe3\xf2\xff\xf0\xed\xee\xe5-\xec\xfb\xeb\xee.\xf0\xf4/" "Mozilla/5.0 (Windows NT 6.1; rv:11.0) Gecko/20100101 Firefox/11.0"`,
			want: Record{
				Time: time.Date(2015, 5, 19, 11, 5, 10, 0, time.UTC), RemoteAddr: "201.242.142.135", Method: "GET",
				URI: "/files/logstash/", Protocol: "HTTP/1.0", Status: 200, Bytes: 13316,
				Referer:   `http://\xe4\xe5\xe3\xf2\xff\xf0\xed\xee\xe5-\xec\xfb\xeb\xee.\xf0\xf4/`,
				UserAgent: "Mozilla/5.0 (Windows NT 6.1; rv:11.0) Gecko/20100101 Firefox/11.0", RequestTime: -1, Attempt: -1,
			},
		},
		{
			name:   "combined, time zone offset converted to UTC, dash bytes",
			format: combined,
			line:   `10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] "HEAD / HTTP/1.0" 304 - "-" "-"`,
			want: Record{
				Time: time.Date(2000, 10, 10, 20, 55, 36, 0, time.UTC), RemoteAddr: "10.0.0.1", Method: "HEAD", URI: "/",
				Protocol: "HTTP/1.0", Status: 304, Bytes: -1, RequestTime: -1, Attempt: -1,
			},
		},
		{
			name:   "combined, garbage request line kept whole",
			format: combined,
			line:   `10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "\x16\x03\x01\x00" 400 157 "-" "-"`,
			want: Record{
				Time: time.Date(2000, 10, 10, 13, 55, 36, 0, time.UTC), RemoteAddr: "10.0.0.1", URI: "\x16\x03\x01\x00",
				Status: 400, Bytes: 157, RequestTime: -1, Attempt: -1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.format.ParseLine([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseLine: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseLine mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAttemptSources(t *testing.T) {
	tests := []struct {
		format, line string
		attempt, max int
		source       string
	}{
		{`$status $http_x_retry_attempt`, `200 3`, 3, 0, "x-retry-attempt"},
		{`$status $http_x_stainless_retry_count`, `200 2`, 2, 0, "x-stainless-retry-count"},
		{`$status $http_x_envoy_attempt_count`, `200 1`, 0, 0, "x-envoy-attempt-count"},
		{`$status $http_x_envoy_attempt_count`, `200 3`, 2, 0, "x-envoy-attempt-count"},
		{`$status "$http_amz_sdk_request"`, `200 "attempt=2; max=3"`, 1, 3, "amz-sdk-request"},
		{`$status $http_grpc_previous_rpc_attempts`, `200 4`, 4, 0, "grpc-previous-rpc-attempts"},
		{`$status $http_x_envoy_attempt_count`, `200 0`, -1, 0, ""}, // envoy counts from 1
		{`$status $http_x_retry_attempt`, `200 -`, -1, 0, ""},
		// The order of docs/formats.md decides when a line carries two headers.
		{`$status $http_x_envoy_attempt_count $http_x_retry_attempt`, `200 5 1`, 1, 0, "x-retry-attempt"},
	}
	for _, tt := range tests {
		f, err := Compile(tt.format, EscapeDefault)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.ParseLine([]byte(tt.line))
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		if r.Attempt != tt.attempt || r.MaxAttempts != tt.max || r.AttemptSource != tt.source {
			t.Errorf("%q with %q: attempt %d max %d source %q, want %d %d %q", tt.line, tt.format,
				r.Attempt, r.MaxAttempts, r.AttemptSource, tt.attempt, tt.max, tt.source)
		}
	}
}

func TestParseErrors(t *testing.T) {
	retry, _ := Preset("retry")
	jsonl, _ := Preset("nginx-json")
	good := lineOf(t, "nginx-retry.log", 1)
	// col is the 1-based column of the first byte after marker in line, found without
	// the parser, so the expected positions do not depend on the code under test.
	col := func(line, marker string) int { return strings.Index(line, marker) + len(marker) + 1 }
	noRT := good[:strings.Index(good, " rt=")]
	badStatus := strings.Replace(good, `" 502 17`, `" 5x2 17`, 1)
	tests := []struct {
		name   string
		format *Format
		line   string
		err    error
		column int
	}{
		{"combined line in retry format", retry, noRT, ErrLiteral, col(noRT, `"-" "`)},
		{"bad status", retry, badStatus, ErrBadStatus, col(badStatus, `HTTP/1.1" `)},
		{"bad time", retry, strings.Replace(good, "29/Nov/2026", "29/Nox/2026", 1), ErrBadTime, col(good, "[")},
		{"truncated", retry, good[:40], ErrLiteral, col(good, "[")},
		{"trailing junk", retry, good + " extra", ErrBadTime, col(good, "msec=")},
		{"missing quote", retry, strings.Replace(good, `"GET`, `GET`, 1), ErrLiteral, col(good, "[")},
		{"empty", retry, "   ", ErrEmptyLine, 1},
		{"json truncated", jsonl, `{"status":"200","msec":"17`, ErrBadJSON, 24},
		{"json not an object", jsonl, `[1,2]`, ErrBadJSON, 1},
		{"json bad status", jsonl, `{"status":"2000"}`, ErrBadStatus, 11},
		{"json trailing", jsonl, `{"status":"200"} x`, ErrTrailing, 18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.format.ParseLine([]byte(tt.line))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if !errors.Is(err, tt.err) || pe.Column != tt.column {
				t.Errorf("err = %v (column %d), want %v at column %d", err, pe.Column, tt.err, tt.column)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	for _, src := range []string{
		`log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                    '$status $body_bytes_sent "$http_referer" "$http_user_agent"';`,
		`'$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"'`,
		Combined,
	} {
		f, err := Compile(src, EscapeDefault)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if f.Source != Combined {
			t.Errorf("Compile(%q).Source = %q, want %q", src, f.Source, Combined)
		}
	}
	f, err := Compile(`log_format j escape=json '{"s":"$status"}';`, EscapeDefault)
	if err != nil || f.escape != EscapeJSON {
		t.Errorf("escape=json directive: %v, escape %v", err, f.escape)
	}
	for _, bad := range []string{`$status$body_bytes_sent`, `no variables`, `'unterminated`, `log_format x escape=yaml '$status'`} {
		if _, err := Compile(bad, EscapeDefault); err == nil {
			t.Errorf("Compile(%q) succeeded, want an error", bad)
		}
	}
}

// TestCorpus reads every line of the real logs in ../shared/corpus: none may be rejected.
func TestCorpus(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "corpus", "elastic-apache", "access.log.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("corpus not present: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	combined, _ := Preset("combined")
	r := NewReader(gz, combined)
	n := 0
	for {
		_, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("corpus: %v", err)
			continue
		}
		n++
	}
	if n != 10000 {
		t.Errorf("corpus: %d records, want 10000 (the README's line count)", n)
	}
}

func TestReader(t *testing.T) {
	retry, _ := Preset("retry")
	good := lineOf(t, "nginx-retry.log", 1)
	long := "10.0.0.9 - - [29/Nov/2026:10:00:00 +0000] \"GET /" + strings.Repeat("x", MaxLineLength+10)
	in := good + "\n\nbroken line\n" + long + "\n" + good + "\n" + long // last line without newline
	r := NewReader(bufio.NewReader(strings.NewReader(in)), retry)
	var got []string
	for {
		_, err := r.Read()
		if err == io.EOF {
			break
		}
		var pe *Error
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.As(err, &pe):
			got = append(got, fmt.Sprintf("%s@%d", pe.Reason(), pe.Line))
			// a line too long to keep keeps its start, for the sample of rejects
			if pe.Err == ErrLineTooLong && string(pe.Head) != long[:HeadLength] {
				t.Errorf("line %d: head %q, want the line's first %d bytes", pe.Line, pe.Head, HeadLength)
			}
		default:
			t.Fatal(err)
		}
	}
	want := []string{"ok", "literal@3", "too_long@4", "ok", "too_long@6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read sequence (-want +got):\n%s", diff)
	}
}

func TestFromNginxConf(t *testing.T) {
	f, err := FromNginxConf("testdata/nginxconf/nginx.conf", "main")
	if err != nil {
		t.Fatal(err)
	}
	want := `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for"`
	if f.Source != want {
		t.Errorf("main = %q, want %q", f.Source, want)
	}
	r, err := f.ParseLine([]byte(`10.0.0.1 - - [29/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "curl/8" "-"`))
	if err != nil || r.Status != 200 || r.UserAgent != "curl/8" {
		t.Errorf("parse with main: %+v, %v", r, err)
	}
	// From the included file, with escape=json.
	j, err := FromNginxConf("testdata/nginxconf/nginx.conf", "retry_json")
	if err != nil {
		t.Fatal(err)
	}
	r, err = j.ParseLine([]byte(`{"time_iso8601":"2026-11-29T10:00:00+00:00","status":"502","request":"GET /\"q\" HTTP/1.1","http_x_retry_attempt":"1"}`))
	if err != nil || r.URI != `/"q"` || r.Attempt != 1 || j.escape != EscapeJSON {
		t.Errorf("parse with retry_json: %+v, %v", r, err)
	}
	if _, err := FromNginxConf("testdata/nginxconf/nginx.conf", "nope"); err == nil || !strings.Contains(err.Error(), "there are: main, retry_json") {
		t.Errorf("unknown name: %v", err)
	}
	// No name: the format the access_log uses (main), of the two defined.
	if f, err := FromNginxConf("testdata/nginxconf/nginx.conf", ""); err != nil || f.Source != want {
		t.Errorf("no name: %v, %v; want main, the access_log's", f, err)
	}
	// No name, one log_format and no access_log: that one; two and no access_log: the names.
	dir := t.TempDir()
	one := filepath.Join(dir, "one.conf")
	os.WriteFile(one, []byte("http { log_format only '$remote_addr [$time_local] \"$request\" $status'; }\n"), 0o644)
	if f, err := FromNginxConf(one, ""); err != nil || f.Source != `$remote_addr [$time_local] "$request" $status` {
		t.Errorf("one log_format: %v, %v", f, err)
	}
	two := filepath.Join(dir, "two.conf")
	os.WriteFile(two, []byte("log_format a '$status';\nlog_format b '$status $request';\n"), 0o644)
	if _, err := FromNginxConf(two, ""); err == nil || !strings.Contains(err.Error(), "has 2 log_formats (a, b): --log-format-name names") {
		t.Errorf("two log_formats, no name: %v", err)
	}
}

// --attempt-header: only the named header counts.
func TestOnlyAttemptHeader(t *testing.T) {
	f, err := Compile(`$status $http_x_envoy_attempt_count $http_x_retry_attempt`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	envoy, err := f.OnlyAttemptHeader("X-Envoy-Attempt-Count")
	if err != nil {
		t.Fatal(err)
	}
	r, err := envoy.ParseLine([]byte(`200 5 1`))
	if err != nil || r.Attempt != 4 || r.AttemptSource != "x-envoy-attempt-count" {
		t.Errorf("envoy only: attempt %d from %q, %v; want 4 from x-envoy-attempt-count", r.Attempt, r.AttemptSource, err)
	}
	r, _ = envoy.ParseLine([]byte(`200 - 1`))
	if r.Attempt != -1 {
		t.Errorf("envoy only, header absent: attempt %d, want untagged", r.Attempt)
	}
	if _, err := f.OnlyAttemptHeader("x-nope"); err == nil {
		t.Error("unknown header accepted")
	}
}

// The Reader hands out lines that point into its blocks: whatever the source's read sizes
// and line lengths (a line across blocks, a line longer than a block, one over the
// limit, a last line without newline), every line read is the one written, and stays
// so after later reads.
func TestReaderBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	for i := range 3000 {
		n := rng.IntN(300)
		switch i % 500 {
		case 7:
			n = blockSize + rng.IntN(blockSize) // longer than a block
		case 9:
			n = MaxLineLength + 1 + rng.IntN(100) // too long: skipped
		}
		b := make([]byte, n)
		for k := range b {
			b[k] = 'a' + byte(rng.IntN(26))
		}
		lines = append(lines, string(b))
	}
	in := strings.Join(lines, "\n") // the last line has no newline
	sources := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(in) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(in[:3<<20])) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(in)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(in)) },
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			want := lines
			if name == "one byte" {
				want = strings.Split(in[:3<<20], "\n")
			}
			r := NewReader(src(), nil)
			var got [][]byte
			for {
				l, err := r.readLine()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, l)
			}
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			for i, l := range got {
				switch {
				case len(want[i]) > MaxLineLength && l != nil:
					t.Errorf("line %d: %d bytes, over the limit, was not skipped", i+1, len(l))
				case len(want[i]) <= MaxLineLength && string(l) != want[i]:
					t.Errorf("line %d: %.20q… (%d bytes), want %.20q… (%d bytes)", i+1, l, len(l), want[i], len(want[i]))
				}
			}
		})
	}
}

// The text parser stores plain string fields through stringFields, not set: both must
// land in the same place.
func TestStringFields(t *testing.T) {
	for f, off := range stringFields {
		if off == 0 {
			t.Fatalf("field %d at offset 0: 0 means none", f)
		}
		var r Record
		var st state
		if err := set(&r, &st, f, "v", 0); err != nil {
			t.Fatal(err)
		}
		if got := *(*string)(unsafe.Add(unsafe.Pointer(&r), off)); got != "v" {
			t.Errorf("field %d: set stores elsewhere than offset %d", f, off)
		}
	}
}

// Detection: the retry preset with the SDKs' headers is retry-sdk; a line longer than
// combined that no preset reads is refused with the fix, not read as combined with its
// fields folded into the user agent and no attempt numbers; combined and retry lines
// are what they were. The lines are the incident sample's first, as nginx wrote it, with
// what each case appends.
func TestDetect(t *testing.T) {
	retry := lineOf(t, "nginx-retry.log", 1)
	combined := retry[:strings.Index(retry, " rt=")]
	for _, c := range []struct {
		name, line, want, wantErr string
	}{
		{"retry", retry, "retry", ""},
		{"combined", combined, "combined", ""},
		{"retry-sdk", retry + ` amz="attempt=2; max=10" inv="7c1e-44" sc="-"`, "retry-sdk", ""},
		{"retry-sdk-full", retry + ` amz="attempt=2; max=10" inv="7c1e-44" sc="-" ec="ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/" op="DynamoDB_20120810.GetItem" ram="-"`, "retry-sdk-full", ""},
		{"retry with fields of its own", retry + ` tenant="acme" zone="b"`, "", `the lines are the retry preset's with more fields after its last`},
		// the openai client's line: retry-sdk plus retry-after-ms, which retry-sdk read as
		// no attempt number (its sc="0" taken with what followed)
		{"retry-sdk plus ram", retry + ` amz="-" inv="-" sc="2" ram="250"`, "", `the lines are the retry-sdk preset's with more fields after its last ("ram=\"250\""`},
		{"combined with fields of its own", combined + ` rt=0.012 ra="1"`, "", "--nginx-format"},
	} {
		lines := [][]byte{[]byte(c.line), []byte(c.line)}
		f, err := Detect(lines)
		switch {
		case c.wantErr != "":
			if err == nil || !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: format %v, error %v; want ErrUnknownFormat saying %q", c.name, f, err, c.wantErr)
			}
		case err != nil || f.Name != c.want:
			t.Errorf("%s: %v, %v; want %s", c.name, f, err, c.want)
		}
	}
	// the format the refusal gives reads the line, which retry-sdk now refuses
	_, err := Detect([][]byte{[]byte(retry + ` amz="-" inv="-" sc="2" ram="250"`)})
	give := err.Error()[strings.Index(err.Error(), "--nginx-format '")+len("--nginx-format '") : len(err.Error())-1]
	if !strings.HasSuffix(give, ` sc="$http_x_stainless_retry_count" ram="$sent_http_retry_after_ms"`) {
		t.Errorf("the format given: %s", give)
	}
	if f, err := Compile(give, EscapeDefault); err != nil {
		t.Errorf("the format given does not compile: %v", err)
	} else if _, err := f.ParseLine([]byte(retry + ` amz="-" inv="-" sc="2" ram="250"`)); err != nil {
		t.Errorf("the format given does not read the line: %v", err)
	}
	sdkFormat, _ := Preset("retry-sdk")
	if _, err := sdkFormat.ParseLine([]byte(retry + ` amz="-" inv="-" sc="2" ram="250"`)); !errors.Is(err, ErrTrailing) {
		t.Errorf("retry-sdk on a longer line: %v, want ErrTrailing", err)
	}
	// what retry-sdk reads of the SDK's headers: the AWS SDK's 1-based attempt 2 of at
	// most 10 is attempt 1, and its invocation id keys the request
	sdk, _ := Preset("retry-sdk")
	r, err := sdk.ParseLine([]byte(strings.Replace(retry, ` ra="0"`, ` ra="-"`, 1) + ` amz="attempt=2; max=10" inv="7c1e-44" sc="-"`))
	if err != nil || r.Attempt != 1 || r.MaxAttempts != 10 || r.InvocationID != "7c1e-44" {
		t.Errorf("retry-sdk: %+v, %v; want attempt 1 of max 10, invocation id 7c1e-44", r, err)
	}
	// and retry-sdk-full the code of the error DynamoDB answered, the operation and
	// retry-after-ms
	ec, _ := Preset("retry-sdk-full")
	r, err = ec.ParseLine([]byte(retry + ` amz="attempt=2; max=10" inv="7c1e-44" sc="-" ec="ThrottlingException:http://internal.amazon.com/coral/" op="DynamoDB_20120810.GetItem" ram="250"`))
	if err != nil || r.ErrorCode != "ThrottlingException" || r.Operation != "DynamoDB_20120810.GetItem" || r.RetryAfter != "0.25" {
		t.Errorf("retry-sdk-full: %+v, %v; want the error code ThrottlingException, the operation GetItem and a retry after 0.25 s", r, err)
	}
}

// Error codes as the gateways log them, named as the SDKs' lists name them.
func TestErrorCode(t *testing.T) {
	for in, want := range map[string]string{
		"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/": "ThrottlingException",
		"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException":             "ProvisionedThroughputExceededException",
		"SlowDown":          "SlowDown",
		"8":                 "RESOURCE_EXHAUSTED", // grpc-status
		"ResourceExhausted": "RESOURCE_EXHAUSTED", // Envoy's %GRPC_STATUS%
		"14":                "UNAVAILABLE",
		"0":                 "", // gRPC's OK is no error
		"Ok":                "",
		"42":                "42",
	} {
		if got := errorCode(in); got != want {
			t.Errorf("errorCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// retry-after-ms, which the Stainless clients honour before Retry-After, is kept as
// Retry-After's seconds when it is a number: from an nginx format that logs it and from
// Caddy's response headers.
func TestRetryAfterMs(t *testing.T) {
	nginx, err := Compile(`$msec $status "$sent_http_retry_after" "$sent_http_retry_after_ms"`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	caddy, _ := Preset("caddy")
	for _, c := range []struct {
		format *Format
		line   string
		want   string
	}{
		{nginx, `1795960800.500 429 "1" "250"`, "0.25"},
		{nginx, `1795960800.500 429 "1" "-"`, "1"},
		{nginx, `1795960800.500 429 "1" "soon"`, "1"},
		{nginx, `1795960800.500 429 "-" "1500"`, "1.5"},
		{caddy, `{"ts":1795960800.5,"status":429,"request":{"method":"GET","uri":"/"},"resp_headers":{"Retry-After":["1"],"Retry-After-Ms":["250"]}}`, "0.25"},
	} {
		r, err := c.format.ParseLine([]byte(c.line))
		if err != nil || r.RetryAfter != c.want {
			t.Errorf("%s: Retry-After %q, %v; want %q", c.line, r.RetryAfter, err, c.want)
		}
	}
}

// Caddy logs an upload the client abandoned after the server's 100 Continue (an S3
// PutObject with Expect: 100-continue) with status 100: no answer was sent, read as the
// 0 Caddy logs for other abandoned requests.
func TestContinueIsAbandoned(t *testing.T) {
	caddy, _ := Preset("caddy")
	r, err := caddy.ParseLine([]byte(`{"ts":1795960800.5,"status":100,"duration":0.2,"request":{"method":"PUT","uri":"/bucket/key","headers":{"Expect":["100-continue"]}}}`))
	if err != nil || r.Status != 0 {
		t.Errorf("status 100: %d, %v; want 0, abandoned", r.Status, err)
	}
}

// A failed gRPC call is logged 200 (its status is in the trailers): its status is the one
// its code maps to. Other codes and statuses are as logged.
func TestGRPCStatus(t *testing.T) {
	nginx, err := Compile(`$msec $status "$upstream_trailer_grpc_status" "$upstream_http_x_amzn_errortype"`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	envoy, _ := Preset("envoy")
	for _, c := range []struct {
		format *Format
		line   string
		status int
		code   string
	}{
		{nginx, `1764374400.123 200 "14" "-"`, 503, "UNAVAILABLE"},
		{nginx, `1764374400.123 200 "8" "-"`, 429, "RESOURCE_EXHAUSTED"},
		{nginx, `1764374400.123 200 "4" "-"`, 504, "DEADLINE_EXCEEDED"},
		{nginx, `1764374400.123 200 "1" "-"`, 499, "CANCELLED"},
		{nginx, `1764374400.123 200 "0" "-"`, 200, ""},             // OK
		{nginx, `1764374400.123 200 "-" "-"`, 200, ""},             // not gRPC
		{nginx, `1764374400.123 502 "14" "-"`, 502, "UNAVAILABLE"}, // the gateway's own answer stays
		{nginx, `1764374400.123 400 "-" "ThrottlingException:http://internal.amazon.com/"`, 400, "ThrottlingException"},
		{envoy, `{"start_time":"2026-11-29T00:00:00.000Z","method":"POST","path":"/shop.Cart/Get","response_code":200,"grpc_status":"Unavailable"}`, 503, "UNAVAILABLE"},
		{envoy, `{"start_time":"2026-11-29T00:00:00.000Z","method":"POST","path":"/shop.Cart/Get","response_code":200,"grpc_status":"14"}`, 503, "UNAVAILABLE"},
	} {
		r, err := c.format.ParseLine([]byte(c.line))
		if err != nil || r.Status != c.status || r.ErrorCode != c.code {
			t.Errorf("%s: status %d, code %q, %v; want %d, %q", c.line, r.Status, r.ErrorCode, err, c.status, c.code)
		}
	}
}

// A gRPC client sends grpc-previous-rpc-attempts on retries only (gRFC A6): a gRPC call
// (its grpc-status logged) without it is a first attempt, where the format logs the
// header; a line that is no gRPC call, or a format without the header, stays untagged.
func TestGRPCFirstAttempt(t *testing.T) {
	withHeader, err := Compile(`$msec $status "$upstream_trailer_grpc_status" "$http_grpc_previous_rpc_attempts"`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	without, err := Compile(`$msec $status "$upstream_trailer_grpc_status"`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	envoy, _ := Preset("envoy")
	onlyRetry, err := withHeader.OnlyAttemptHeader("x-retry-attempt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format  *Format
		line    string
		attempt int
		status  int
	}{
		{withHeader, `1764374400.123 200 "14" "-"`, 0, 503},
		{withHeader, `1764374400.123 200 "0" "-"`, 0, 200},
		{withHeader, `1764374400.123 200 "0" "2"`, 2, 200},
		{withHeader, `1764374400.123 200 "-" "-"`, -1, 200},  // no gRPC call
		{withHeader, `1764374400.123 200 "14" "x"`, -1, 503}, // a header that is no number: untagged
		{without, `1764374400.123 200 "14"`, -1, 503},
		{onlyRetry, `1764374400.123 200 "14" "-"`, -1, 503},
		{envoy, `{"start_time":"2026-11-29T00:00:00.000Z","method":"POST","path":"/shop.Cart/Get","response_code":200,"grpc_status":"14"}`, 0, 503},
	} {
		r, err := c.format.ParseLine([]byte(c.line))
		if err != nil || r.Attempt != c.attempt || r.Status != c.status {
			t.Errorf("%s: attempt %d, status %d, %v; want %d, %d", c.line, r.Attempt, r.Status, err, c.attempt, c.status)
		}
	}
}

// A logged traceparent names the client span the request was sent in, in lower case; a
// header that is no traceparent (the client sends what it likes) leaves the line without
// one and is no error. Through nginx text (both parser paths), JSON and Caddy's headers.
func TestTraceparent(t *testing.T) {
	text, err := Compile(`$msec $status "$http_traceparent"`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	caddy, _ := Preset("caddy")
	envoy, _ := Preset("envoy")
	traefik, _ := Preset("traefik")
	kong, _ := Preset("kong")
	const span = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
	for _, c := range []struct {
		format *Format
		line   string
		span   string
	}{
		{text, `1764374400.123 200 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, span},
		{text, `1764374400.123 200 "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00"`, span},
		{text, `1764374400.123 200 "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later"`, span},
		{text, `1764374400.123 200 "-"`, ""},
		{text, `1764374400.123 200 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"`, ""},     // no flags
		{text, `1764374400.123 200 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"`, ""}, // not a field after
		{text, `1764374400.123 200 "00-00000000000000000000000000000000-00f067aa0ba902b7-01"`, ""},  // the invalid trace id
		{text, `1764374400.123 200 "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"`, ""},  // the invalid span id
		{text, `1764374400.123 200 "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, ""},  // the invalid version
		{text, `1764374400.123 200 "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"`, ""},  // not hex
		{caddy, `{"ts":1764374400.123,"status":200,"request":{"method":"GET","uri":"/","headers":{"Traceparent":["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]}}}`, span},
		{caddy, `{"ts":1764374400.123,"status":200,"request":{"method":"GET","uri":"/","headers":{}}}`, ""},
		{envoy, `{"start_time":"2026-11-29T00:00:00.000Z","method":"GET","path":"/","response_code":200,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, span},
		{traefik, `{"StartUTC":"2026-11-29T00:00:00Z","Duration":1000,"RequestMethod":"GET","RequestPath":"/","DownstreamStatus":200,"request_Traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, span},
		{kong, `{"started_at":1764374400123,"request":{"method":"GET","uri":"/","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},"response":{"status":200}}`, span},
	} {
		for _, general := range []bool{false, true} {
			forceGeneral = general
			r, err := c.format.ParseLine([]byte(c.line))
			forceGeneral = false
			if err != nil || r.Span != c.span {
				t.Errorf("general path %v: %s: span %q, %v; want %q", general, c.line, r.Span, err, c.span)
			}
		}
	}
}

// A variable before a literal that starts with '-' ("$a-$b"): nginx logs an absent value
// as "-", so "--x" is an absent $a and x, and a value that starts with '-' is read whole;
// both parser paths. FuzzCompile found the round trip of such a format changing a record.
func TestDashAfterVariable(t *testing.T) {
	f, err := Compile(`$msec $http_x_request_id-$status`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line, id string
		status   int
	}{
		{"1795960800.500 --503", "", 503},
		{"1795960800.500 -5-503", "-5", 503},
		{"1795960800.500 ab-503", "ab", 503},
		{"1795960800.500 a-b-503", "a", -1}, // the first '-' after a value ends it: "b-503" is no status
	} {
		for _, general := range []bool{false, true} {
			forceGeneral = general
			r, err := f.ParseLine([]byte(c.line))
			forceGeneral = false
			if c.status < 0 {
				if err == nil {
					t.Errorf("general path %v: %s parsed: %+v", general, c.line, r)
				}
				continue
			}
			if err != nil || r.RequestID != c.id || r.Status != c.status {
				t.Errorf("general path %v: %s: request id %q, status %d, %v; want %q, %d", general, c.line, r.RequestID, r.Status, err, c.id, c.status)
			}
		}
	}
}
