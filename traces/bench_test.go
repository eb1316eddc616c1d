package traces

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// BenchmarkConvert converts the hand-made OTLP file's documents repeated 2,000 times (one
// op is one span, attempt or not): the cost ingest adds ahead of parsing a trace file's
// lines.
func BenchmarkConvert(b *testing.B) {
	doc, err := os.ReadFile("../testdata/otel/traces.json")
	if err != nil {
		b.Fatal(err)
	}
	in := bytes.Repeat(doc, 2000)
	st, err := Convert(bytes.NewReader(in), io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)) / int64(st.Spans))
	b.ResetTimer()
	for n := 0; n < b.N; {
		st, err := Convert(bytes.NewReader(in), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		n += st.Spans
	}
}
