package query

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/parse"
)

// Windows made by adding up minutes equal the windows DuckDB's time_bucket makes from a
// time table of one-second buckets, for widths and zone offsets that do not divide an
// hour, and the summary equals one group over everything.
func TestMinuteRollup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := ingest.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, _ := parse.Preset("retry")
	r, _ := ingest.NewRouter(nil)
	if _, err := ingest.Load(ctx, db, []string{"../testdata/incident-hour/access.log", "../testdata/quiet-hour/access.log"},
		ingest.Options{Format: f, Router: r}); err != nil {
		t.Fatal(err)
	}
	set, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for _, tt := range []struct{ width, offset time.Duration }{
		{time.Minute, 0}, {7 * time.Minute, 0}, {10 * time.Minute, 0}, {time.Hour, 0},
		{time.Hour, 5*time.Hour + 30*time.Minute}, {13 * time.Minute, -3*time.Hour - 45*time.Minute}, {24 * time.Hour, time.Hour},
		{10 * time.Second, 0}, {45 * time.Second, 0}, {90 * time.Second, 30 * time.Second}, {time.Minute, 20 * time.Second},
	} {
		got, err := set.Windows(ctx, tt.width, tt.offset)
		if err != nil {
			t.Fatal(err)
		}
		var want []judge.Window
		key := fmt.Sprintf("time_bucket(to_seconds(%d), ts, TIMESTAMP '1970-01-01' - to_seconds(%d))", int64(tt.width/time.Second), int64(tt.offset/time.Second))
		if _, err := set.bucketsOf(ctx, 1); err != nil { // builds the one-second tables
			t.Fatal(err)
		}
		entries, err := set.grouped(ctx, key, "time", 1, nil, func() any { return new(sql.NullTime) })
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if k := e.k.(*sql.NullTime); k.Valid {
				want = append(want, judge.Window{Start: k.Time.UTC(), Metrics: e.c.metrics(judge.DefaultRules())})
			}
		}
		if len(want) < 2 && tt.width < time.Hour || len(want) > 1000 {
			t.Fatalf("%v: %d windows: the test needs several", tt.width, len(want))
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("width %v offset %v (-sql +rollup):\n%s", tt.width, tt.offset, diff)
		}
	}
	sum, err := set.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := set.grouped(ctx, "0", "groups", minuteGrain, nil, func() any { return new(sql.NullInt64) })
	if err != nil || len(entries) != 1 {
		t.Fatal(len(entries), err)
	}
	one := entries[0].c.metrics(judge.DefaultRules())
	if diff := cmp.Diff(one, sum, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("summary (-one group +sum of minutes):\n%s", diff)
	}
	if sum.Requests != 248 || sum.FirstAttempts != 200 || sum.Retries != 43 || sum.Recovered != 19 || sum.Exhausted != 9 {
		t.Errorf("summary %+v; want 248 requests, 200 first, 43 retries, 19 recovered, 9 exhausted (EXPECTED.md)", sum)
	}
}
