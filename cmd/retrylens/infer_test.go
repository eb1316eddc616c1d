package main

import (
	"context"
	"database/sql"
	"math"
	"testing"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// inferenceScore loads a log whose attempt numbers are known, forgets them (and every
// linking key), infers them again and compares, line by line: precision and recall of
// "this line is a retry", and the share of lines whose attempt number came out exactly.
func inferenceScore(t *testing.T, format, path string) (precision, recall, exact float64, lines int) {
	t.Helper()
	ctx := context.Background()
	db, err := ingest.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pf, err := parse.Preset(format)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Load(ctx, db, []string{path}, ingest.Options{Format: pf}); err != nil {
		t.Fatal(err)
	}
	truth := map[[2]int64]int64{}
	rows, err := db.Query("SELECT file_id, line, attempt FROM requests WHERE attempt IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k [2]int64
		var a int64
		if err := rows.Scan(&k[0], &k[1], &a); err != nil {
			t.Fatal(err)
		}
		truth[k] = a
	}
	rows.Close()
	if _, err := db.Exec("UPDATE requests SET attempt = NULL, attempt_source = NULL, request_id_hash = NULL, idempotency_key_hash = NULL, invocation_id_hash = NULL, key_text = NULL, retry_reason = NULL"); err != nil {
		t.Fatal(err)
	}
	set, err := query.Open(ctx, db, query.Options{InferAttempts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var tp, fp, fn, same int
	err = set.EachAttempt(ctx, func(file, line int64, a sql.NullInt64, _ bool) {
		want, ok := truth[[2]int64{file, line}]
		if !ok {
			return // a line that had no attempt number to begin with
		}
		lines++
		got := a.Int64
		switch {
		case want >= 1 && got >= 1:
			tp++
		case want == 0 && got >= 1:
			fp++
		case want >= 1 && got == 0:
			fn++
		}
		if got == want {
			same++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ratio(tp, tp+fp), ratio(tp, tp+fn), ratio(same, lines), lines
}

// ratio is a/b, or NaN (printed "NaN": undefined) when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// TestInferenceGenerated measures --infer-attempts on the generator's log, whose clients
// and URIs rarely repeat: inference should find nearly every retry there.
func TestInferenceGenerated(t *testing.T) {
	testmain.Long(t, "a 20,000-line log inferred")
	t.Parallel()
	path := generated(t, 20000, 7)
	p, r, exact, n := inferenceScore(t, "retry", path)
	t.Logf("generated log, %d tagged lines: precision %.4f, recall %.4f, exact attempt numbers %.4f", n, p, r, exact)
	// Floors under the measured figures (deterministic for this seed), not targets.
	if p < 0.99 || r < 0.99 {
		t.Errorf("precision %.4f, recall %.4f: want both at least 0.99", p, r)
	}
}
