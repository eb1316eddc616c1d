package ingest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Attacker-controlled bytes from a rejected line reach the terminal escaped.
func TestIngestSummarySanitised(t *testing.T) {
	t.Parallel()
	res := &Result{Files: []File{{
		Path: "access.log", Format: "retry", Lines: 3, Rows: 2, Rejected: 1,
		Reasons: map[string]int64{"literal": 1},
		Samples: []Reject{{Path: "access.log", Line: 2, Reason: "literal", Message: "column 1: literal text not found", Excerpt: "\x1b]0;pwned\x07 GET /"}},
	}}, Elapsed: time.Second}
	var b bytes.Buffer
	if err := WriteSummary(&b, res); err != nil {
		t.Fatal(err)
	}
	want := `access.log: retry format, 3 lines, 2 rows, 1 rejected
loaded 3 lines, 2 rows, 1 rejected in 1s (3 lines/s)
rejected lines by reason: literal 1
  access.log:2: column 1: literal text not found
    \x1b]0;pwned\x07 GET /
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// The progress line draws nothing in a load's first second (the read-ahead would show as
// the rate), then the share read, lines/s and the time left; Close clears it; a file of
// unknown size shows what was read.
func TestProgressLine(t *testing.T) {
	var out strings.Builder
	l := ProgressBar(&out)("/var/log/access.log", 1000).(*lineRate)
	l.Write([]byte("a\nb\n"))
	if out.Len() != 0 {
		t.Errorf("drawn in the first second: %q", out.String())
	}
	l.start = l.start.Add(-4 * time.Second) // 4 s in, half of it read
	l.Write(make([]byte, 496))
	if got := out.String(); !strings.Contains(got, "access.log  50%") || !strings.Contains(got, "k lines/s, 4s left") || strings.Contains(got, "GB/s") {
		t.Errorf("at half of 1000 bytes after 4 s: %q", got)
	}
	l.Close()
	if !strings.HasSuffix(out.String(), "\r\x1b[K") {
		t.Errorf("Close left the line: %q", out.String())
	}
	out.Reset()
	s := ProgressBar(&out)("-", -1).(*lineRate)
	s.start = s.start.Add(-2 * time.Second)
	s.Write(make([]byte, 3<<20))
	if !strings.Contains(out.String(), "3 MiB read") {
		t.Errorf("a stream: %q", out.String())
	}
}
