package query_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
)

func fp(x float64) *float64 { return &x }

// Rows inserted by hand; the expected metrics are counted from this list by hand.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	db, err := ingest.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := []struct {
		ts      string
		attempt any
		status  any
	}{
		{"2026-11-29 10:00:01", 0, 502}, // window 10:00
		{"2026-11-29 10:00:02", 1, 502},
		{"2026-11-29 10:00:04", 2, 200},
		{"2026-11-29 10:00:30", 0, 429},
		{"2026-11-29 10:00:31", 1, 200},
		{"2026-11-29 10:00:40", nil, 200}, // untagged
		{"2026-11-29 10:01:00", 3, 499},   // window 10:01: a retry whose first attempt is outside
		{"2026-11-29 10:01:10", nil, nil}, // untagged, no status
		{"2026-11-29 10:02:00", 0, 200},   // outside --until
	}
	for i, r := range rows {
		if _, err := db.Exec("INSERT INTO requests (file_id, line, ts, attempt, status) VALUES (1, ?, ?::TIMESTAMP, ?, ?)", i+1, r.ts, r.attempt, r.status); err != nil {
			t.Fatal(err)
		}
	}
	rg := query.Range{Since: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 10, 2, 0, 0, time.UTC)}
	got, err := query.Summary(ctx, db, rg)
	if err != nil {
		t.Fatal(err)
	}
	want := query.Metrics{
		Requests: 8, Untagged: 2, FirstAttempts: 2, Retries: 4,
		Amplification: fp(6.0 / 2), RetryRate: fp(2.0 / 2), RetrySuccessRate: fp(2.0 / 4),
		ExtraLoad: fp(4.0 / 6), ActualSuccess: fp(2.0 / 6),
		Status5xx: query.Split{First: 1, Retry: 1}, Status429: query.Split{First: 1}, Status499: query.Split{Retry: 1},
		Verdict: "fuelling", // amplification 3 > 1.5
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	ws, err := query.Windows(ctx, db, time.Minute, rg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || !ws[1].Start.Equal(time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("windows: %+v", ws)
	}
	// Window 10:01 has a retry and no first attempt: the ratios over first attempts are
	// undefined, not infinite or zero.
	w := ws[1].Metrics
	if w.Requests != 2 || w.Retries != 1 || w.Amplification != nil || w.RetryRate != nil || *w.RetrySuccessRate != 0 {
		t.Errorf("window 10:01: %+v", w)
	}
	from, to, err := query.Span(ctx, db, rg)
	if err != nil || from.Format(time.RFC3339) != "2026-11-29T10:00:01Z" || to.Format(time.RFC3339) != "2026-11-29T10:01:10Z" {
		t.Errorf("Span = %v, %v, %v", from, to, err)
	}
}
