package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// One verdict rule at every level (docs/metrics.md): a range's verdict is the worst of
// its windows', for every sample and window width. The ranking is written here, not taken
// from the code: fuelling over rescuing over quiet over insufficient data over no attempt
// data.
func TestRangeVerdictIsWorstWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("30 reports")
	}
	t.Parallel()
	rank := map[string]int{"no attempt data": 0, "insufficient data": 1, "quiet": 2, "rescuing": 3, "fuelling": 4}
	for _, name := range []string{"incident-hour", "quiet-hour", "keys-that-lie", "untagged-firsts", "overlapping-attempts"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "v.duckdb")
			if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, scenario(name)); code != 0 {
				t.Fatalf("ingest: exit %d: %s", code, stderr)
			}
			for _, width := range []string{"10s", "1m", "5m", "10m", "1h", "24h"} {
				stdout, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json", "--window", width)
				var r jsonReport
				if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
					t.Fatalf("report --window %s: exit %d: %s", width, code, stderr)
				}
				worst := ""
				for _, w := range r.Windows {
					if _, ok := rank[w.Verdict]; !ok {
						t.Fatalf("--window %s: window %s has verdict %q", width, w.Start, w.Verdict)
					}
					if worst == "" || rank[w.Verdict] > rank[worst] {
						worst = w.Verdict
					}
				}
				if len(r.Windows) == 0 || r.Summary.Verdict != worst {
					t.Errorf("--window %s: the range reads %q, its %d windows at worst %q", width, r.Summary.Verdict, len(r.Windows), worst)
				}
			}
		})
	}
}
