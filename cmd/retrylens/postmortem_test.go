package main

// postmortem's own tests would link DuckDB into one more test binary (about five CPU
// seconds of linking on every run of the suite), so Build is tested here, over the store
// a report on FILE arguments reads.

import (
	"context"
	"testing"
	"time"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/budget"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

// Build assembles what the report shows from one database: on the incident hour
// (testdata/incident-hour/EXPECTED.md) 125 rows, 80 first attempts, 42 retries; one
// incident [14:20, 14:29) (the minutes with 3 or more retries, all with amplification 2
// or more against a median of 1: see TestCheck's counts), the three alerts, the range fuelling with the rules that
// fired, --by route the endpoints themselves; the HTML's charts only when asked.
// Alerts and Budget read the same rows.
func TestBuild(t *testing.T) {
	ctx := context.Background()
	f, _ := parse.Preset("retry")
	st, _, err := backend.Temp(ctx, []string{"../../testdata/incident-hour/access.log"}, ingest.Options{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := st.Rows(ctx, &query.Options{}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	o := postmortem.Options{Width: 10 * time.Minute, By: "route", MaxAttempts: query.DefaultMaxAttempts}
	r, err := postmortem.Build(ctx, db, o)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	if s.Requests != 125 || s.FirstAttempts != 80 || s.Retries != 42 || s.Verdict != judge.Fuelling || len(s.Fired) != 3 {
		t.Errorf("summary: %+v", s)
	}
	t0 := time.Date(2026, 11, 29, 14, 20, 0, 0, time.UTC)
	if len(r.Incidents) != 1 || !r.Incidents[0].Start.Equal(t0) || !r.Incidents[0].End.Equal(t0.Add(9*time.Minute)) {
		t.Errorf("incidents: %+v", r.Incidents)
	}
	if len(r.Windows) != 6 || len(r.Alerts) != 3 || len(r.Groups) != len(r.Endpoints) || r.Chart != nil {
		t.Errorf("%d windows, %d alerts, %d groups for %d endpoints, chart %v", len(r.Windows), len(r.Alerts), len(r.Groups), len(r.Endpoints), r.Chart != nil)
	}
	o.Charts = true
	if r, err = postmortem.Build(ctx, db, o); err != nil || len(r.Chart) == 0 || len(r.AttemptCounts) == 0 {
		t.Errorf("charts: %v, %d buckets, %d attempt counts", err, len(r.Chart), len(r.AttemptCounts))
	}
	c, err := postmortem.Alerts(ctx, db, postmortem.Options{MaxAttempts: query.DefaultMaxAttempts}, "P1", []string{"over_cap", "false_success"})
	if err != nil || len(c.Alerts) != 3 || c.Failing != 1 || c.Summary.Requests != 125 {
		t.Errorf("check: %v, %+v", err, c)
	}
	// It fails on the one P1 alert (retry_storm) and on no finding: no request went past
	// 3 attempts (grep -c 'ra="3"' in the log: 0) and none is a false success.
	if len(c.FailedOn) != 1 || c.FailedOn[0].Kind != "alert" || c.FailedOn[0].Rule != "retry_storm" {
		t.Errorf("check failed on %+v, want the retry_storm alert alone", c.FailedOn)
	}
	// A cap of 2 attempts denies the 15 attempts numbered 2 (grep -c 'ra="2"' in the log)
	// and allows the 27 numbered 1.
	rs, err := postmortem.Budget(ctx, db, query.Options{}, []budget.Model{&budget.Cap{Max: 2}}, 0)
	if err != nil || len(rs) != 1 || rs[0].Retries != 42 || rs[0].Allowed != 27 || rs[0].Denied != 15 {
		t.Errorf("budget, cap 2: %v, %+v", err, rs)
	}
}
