package ingest

import (
	"bytes"
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
