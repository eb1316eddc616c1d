package parse

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
