package main

import (
	"strings"
	"testing"
)

// Small conventions a first-day user hits: --version, "--dry-run 3" with a space, NO_COLOR
// named in --help, and counts of one in the singular.
func TestDayOneConventions(t *testing.T) {
	t.Parallel()
	if out, _, code := retrylens(t, nil, "--version"); code != 0 || !strings.HasPrefix(out, "retrylens ") || !strings.Contains(out, "duckdb-go v") {
		t.Errorf("--version: exit %d: %q", code, out)
	}
	for _, args := range [][]string{{"--dry-run", "3"}, {"--dry-run=3"}} {
		out, stderr, code := retrylens(t, nil, append(append([]string{"ingest"}, args...), scenario("incident-hour"))...)
		if n := strings.Count(out, "\nline "); code != 0 || n != 3 {
			t.Errorf("ingest %v: exit %d, %d lines shown, want 3\n%s", args, code, n, stderr)
		}
	}
	if out, _, _ := retrylens(t, nil, "--help"); !strings.Contains(out, "NO_COLOR") {
		t.Error("--help does not name NO_COLOR")
	}
	// The quiet hour has one retry (EXPECTED.md): one gap before attempt 1.
	out, _, _ := retrylens(t, nil, "report", "--format", "table", scenario("quiet-hour"))
	if !strings.Contains(out, "backoff before attempt 1: 1 gap,") {
		t.Errorf("one gap not in the singular:\n%s", out)
	}
}
