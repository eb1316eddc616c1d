package parse

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// benchFile is a log written by bench/genlog; the benchmarks skip without it:
//
//	go run ./bench/genlog -n 1000000 > /tmp/retrylens-1m.log
//	go run ./bench/genlog -n 1000000 -format combined > /tmp/retrylens-1m-combined.log
//	go run ./bench/genlog -n 1000000 -format nginx-json > /tmp/retrylens-1m.jsonl
//	go test ./parse -run '^$' -bench . -benchmem -count 3
//
// BenchmarkReadLines is the baseline: reading the same lines with no parsing. The ratio
// of a format's ns/op to it is the figure to compare across machines.
var benchFiles = map[string]string{
	"retry":      "/tmp/retrylens-1m.log",
	"combined":   "/tmp/retrylens-1m-combined.log",
	"nginx-json": "/tmp/retrylens-1m.jsonl",
}

func loadBench(b *testing.B, format string) []byte {
	data, err := os.ReadFile(benchFiles[format])
	if err != nil {
		b.Skipf("no benchmark input: %v (see the comment on benchFiles)", err)
	}
	return data
}

// BenchmarkReadLines reads the retry file's lines with the Reader and does nothing with
// them: the floor under every parser. One op is one line.
func BenchmarkReadLines(b *testing.B) {
	data := loadBench(b, "retry")
	b.SetBytes(int64(len(data)) / int64(bytes.Count(data, []byte("\n"))))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		r := NewReader(bytes.NewReader(data), nil)
		for n < b.N {
			if _, err := r.readLine(); err == io.EOF {
				break
			}
			n++
		}
	}
}

func benchParse(b *testing.B, format string) {
	data := loadBench(b, format)
	f, _ := Preset(format)
	b.SetBytes(int64(len(data)) / int64(bytes.Count(data, []byte("\n"))))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		r := NewReader(bytes.NewReader(data), f)
		var rec Record
		for n < b.N {
			err := r.ReadInto(&rec)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
}

func BenchmarkParseRetry(b *testing.B)    { benchParse(b, "retry") }
func BenchmarkParseCombined(b *testing.B) { benchParse(b, "combined") }
func BenchmarkParseJSON(b *testing.B)     { benchParse(b, "nginx-json") }
