package parse

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// seeds adds every line of the real testdata logs to a fuzz corpus.
func seeds(f *testing.F, names ...string) {
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			f.Add([]byte(line))
		}
	}
}

// roundTrip checks that a parsed line formats back to a line that parses to the same Record.
func roundTrip(t *testing.T, format *Format, line []byte) {
	r1, err := format.ParseLine(line)
	if err != nil {
		return
	}
	out := format.AppendRecord(nil, &r1)
	r2, err := format.ParseLine(out)
	if err != nil {
		t.Fatalf("formatted line does not parse: %v\nin:  %q\nout: %q", err, line, out)
	}
	if diff := cmp.Diff(r1, r2); diff != "" {
		t.Fatalf("round trip changed the record (-first +second):\n%s\nin:  %q\nout: %q", diff, line, out)
	}
}

// go test ./parse -run '^$' -fuzz FuzzRetry -fuzztime 5m
func FuzzRetry(f *testing.F) {
	seeds(f, "nginx-retry.log")
	format, _ := Preset("retry")
	f.Fuzz(func(t *testing.T, line []byte) { roundTrip(t, format, line) })
}

// go test ./parse -run '^$' -fuzz FuzzRetrySDK -fuzztime 5m (retry-sdk-full: retry-sdk and more)
func FuzzRetrySDK(f *testing.F) {
	seeds(f, "nginx-retry.log")
	f.Add([]byte(`10.0.0.1 - - [29/Nov/2026:14:00:00 +0000] "GET /x HTTP/1.1" 503 2 "-" "aws-sdk-go-v2/1.30" rt=0.012 urt="0.012" us="503" ra="-" rr="-" rid="-" ik="-" retry_after="-" msec=1795960800.500 amz="attempt=2; max=4" inv="7c1e\x22-44" sc="-"`))
	f.Add([]byte(`10.0.0.1 - - [29/Nov/2026:14:00:00 +0000] "POST / HTTP/1.1" 400 2 "-" "Boto3/1.34" rt=0.012 urt="0.012" us="400" ra="-" rr="-" rid="-" ik="-" retry_after="-" msec=1795960800.500 amz="attempt=1; max=10" inv="7c1e-44" sc="-" ec="com.amazonaws.dynamodb.v20120810#ThrottlingException:x" op="DynamoDB_20120810.GetItem" ram="250"`))
	format, _ := Preset("retry-sdk-full")
	f.Fuzz(func(t *testing.T, line []byte) { roundTrip(t, format, line) })
}

// go test ./parse -run '^$' -fuzz FuzzCombined -fuzztime 5m
func FuzzCombined(f *testing.F) {
	f.Add([]byte(`201.242.142.135 - - [19/May/2015:11:05:10 +0000] "GET /files/logstash/ HTTP/1.0" 200 13316 "http://\xe4\xe5/" "Mozilla/5.0 \"x\""`))
	f.Add([]byte(`10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] "HEAD / HTTP/1.0" 304 - "-" "-`))
	format, _ := Preset("combined")
	f.Fuzz(func(t *testing.T, line []byte) { roundTrip(t, format, line) })
}

// go test ./parse -run '^$' -fuzz FuzzJSON -fuzztime 5m
func FuzzJSON(f *testing.F) {
	seeds(f, "nginx-retry.jsonl")
	format, _ := Preset("nginx-json")
	f.Fuzz(func(t *testing.T, line []byte) { roundTrip(t, format, line) })
}

// go test ./parse -run '^$' -fuzz FuzzCompile -fuzztime 2m
func FuzzCompile(f *testing.F) {
	f.Add(Retry, `127.0.0.1 - - [29/Nov/2026:22:42:43 +0000] "GET / HTTP/1.1" 200 3 "-" "-"`)
	f.Add(`log_format j escape=json '{"s":"$status","t":"$msec"}';`, `{"s":"200","t":"1.5"}`)
	f.Add(`$msec $status tp="$http_traceparent"`, `1795960800.500 200 tp="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`)
	f.Fuzz(func(t *testing.T, src, line string) {
		format, err := Compile(src, EscapeDefault)
		if err != nil {
			return
		}
		roundTrip(t, format, []byte(line))
	})
}

// go test ./parse -run '^$' -fuzz FuzzCaddy -fuzztime 5m
func FuzzCaddy(f *testing.F) {
	seeds(f, "caddy.jsonl")
	format, _ := Preset("caddy")
	f.Fuzz(func(t *testing.T, line []byte) { roundTrip(t, format, line) })
}

// sane checks what every parsed Record must hold, for the formats without a formatter
// to round-trip through: valid UTF-8, a plausible time, values in their ranges.
func sane(t *testing.T, format *Format, line []byte) {
	r, err := format.ParseLine(line)
	if err != nil {
		return
	}
	for _, s := range []string{r.RemoteAddr, r.Method, r.URI, r.Protocol, r.Referer, r.UserAgent, r.Host, r.UpstreamAddr,
		r.UpstreamStatus, r.RetryReason, r.RequestID, r.IdempotencyKey, r.InvocationID, r.RetryAfter} {
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 %q from %q", s, line)
		}
	}
	if !r.Time.IsZero() && !plausible(r.Time) {
		t.Fatalf("time %v from %q", r.Time, line)
	}
	if r.Status < -1 || r.Status > 999 || r.Attempt < -1 || r.UpstreamTries < 0 || (r.RequestTime < 0 && r.RequestTime != -1) || r.Bytes < -1 {
		t.Fatalf("out of range: %+v from %q", r, line)
	}
}

// go test ./parse -run '^$' -fuzz FuzzHAProxy -fuzztime 5m
func FuzzHAProxy(f *testing.F) {
	seeds(f, "gateways/haproxy.log")
	f.Add([]byte(`Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"`))
	format, _ := Preset("haproxy")
	f.Fuzz(func(t *testing.T, line []byte) { sane(t, format, line) })
}

// go test ./parse -run '^$' -fuzz FuzzGatewayJSON -fuzztime 5m (Envoy, Traefik, Kong and
// a --field mapping read the same bytes)
func FuzzGatewayJSON(f *testing.F) {
	seeds(f, "gateways/envoy.jsonl", "gateways/traefik.jsonl", "gateways/kong.json")
	var formats []*Format
	for _, name := range []string{"envoy", "traefik", "kong"} {
		p, _ := Preset(name)
		formats = append(formats, p)
	}
	mapped, err := WithFields(nil, []string{"time=start_time", "start_time=startutc", "duration_ns=duration", "attempt=x_retry_attempt", "proxy_tries=tries"})
	if err != nil {
		f.Fatal(err)
	}
	formats = append(formats, mapped)
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, format := range formats {
			sane(t, format, line)
		}
	})
}

// FuzzScanners checks the word-at-a-time helpers the text parser leans on against the
// obvious byte-by-byte answer: indexByteFrom, literal.at, plain and parseMsec.
//
//	go test ./parse -run '^$' -fuzz FuzzScanners -fuzztime 2m
func FuzzScanners(f *testing.F) {
	f.Add("10.0.0.1 - - [29/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200", uint8(3), byte('"'), "\" us=\"")
	f.Add(`a\b`+strings.Repeat("x", 70)+"é\"", uint8(0), byte('\\'), "xx")
	f.Add("1795910400.005", uint8(0), byte('.'), "1795910400.005")
	for _, msec := range []string{"0000000000.000", "9999999999.999", "4102444799.999", "4102444800.000", "1795910400.0a5", "17959/0400.005", "179591040:.005"} {
		f.Add(msec, uint8(0), byte('.'), ".")
	}
	f.Fuzz(func(t *testing.T, s string, from uint8, c byte, lit string) {
		i := min(int(from), len(s))
		want := strings.IndexByte(s[i:], c)
		if want >= 0 {
			want += i
		}
		if got := indexByteFrom(s, i, c); got != want {
			t.Errorf("indexByteFrom(%q, %d, %q) = %d, want %d", s, i, c, got, want)
		}
		if lit != "" {
			l := newLiteral(lit)
			if got, want := l.at(s, i), strings.HasPrefix(s[i:], lit); got != want {
				t.Errorf("literal %q at %d of %q: %v, want %v", lit, i, s, got, want)
			}
		}
		wantPlain := isASCII(s) && !strings.Contains(s, `\`)
		if got := plain(s); got != wantPlain {
			t.Errorf("plain(%q) = %v, want %v", s, got, wantPlain)
		}
		// $msec: digits, optionally '.' and up to 9 more digits.
		sec, frac, dot := strings.Cut(s, ".")
		n, err := strconv.ParseInt(sec, 10, 64)
		fracOK := len(frac) <= 9 && strings.Trim(frac, "0123456789") == "" && (dot || frac == "")
		okWant := err == nil && sec[0] != '+' && sec[0] != '-' && len(sec) <= 18 && n <= maxUnix && fracOK
		tm, ok := parseMsec(s)
		if ok != okWant {
			t.Fatalf("parseMsec(%q) ok = %v, want %v", s, ok, okWant)
		}
		if ok {
			ns, _ := strconv.Atoi((frac + "000000000")[:9])
			if want := time.Unix(n, int64(ns)).UTC(); !tm.Equal(want) {
				t.Errorf("parseMsec(%q) = %v, want %v", s, tm, want)
			}
		}
	})
}

// FuzzCleanPath checks the parser's fast path for lines without a backslash (findLit for
// every literal) against the general one (quotedEnd, indexFrom): same record, same error.
//
//	go test ./parse -run '^$' -fuzz FuzzCleanPath -fuzztime 2m
func FuzzCleanPath(f *testing.F) {
	seeds(f, "nginx-retry.log")
	retry, _ := Preset("retry")
	combined, _ := Preset("combined")
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, format := range []*Format{retry, combined} {
			fast, ferr := format.ParseLine(line)
			forceGeneral = true
			slow, serr := format.ParseLine(line)
			forceGeneral = false
			if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
				t.Fatalf("%s: fast path error %v, general %v\nline: %q", format.Name, ferr, serr, line)
			}
			if diff := cmp.Diff(slow, fast); diff != "" {
				t.Fatalf("%s: fast path differs (-general +fast):\n%s\nline: %q", format.Name, diff, line)
			}
		}
	})
}
