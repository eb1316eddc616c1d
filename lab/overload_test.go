//go:build e2e

package lab

import (
	"context"
	"errors"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

// overloadRun is one overload scenario through one gateway: its log, the upstream's and
// the client's records.
type overloadRun struct {
	gateway, format, log string
	start                time.Time // the upstream's Reset: its record's origin
	timeline             []Second
	client               []Attempt
	err                  error
}

// runOverload runs sc through a real gateway (nginx or caddy) in front of an upstream of
// its own.
func runOverload(dir, gateway string, sc Scenario) (r *overloadRun) {
	r = &overloadRun{gateway: gateway}
	u, err := StartUpstream()
	if err != nil {
		r.err = err
		return r
	}
	defer u.Close()
	var addr string
	var stop func() error
	switch gateway {
	case "nginx":
		n, err := StartNginx(dir, u.Addr)
		if err != nil {
			r.err = err
			return r
		}
		addr, stop, r.format, r.log = n.Addr, n.Stop, "retry", n.TextLog
	default:
		c, err := StartCaddy(dir, u.Addr)
		if err != nil {
			r.err = err
			return r
		}
		addr, stop, r.format, r.log = c.Addr, c.Stop, "caddy", c.Log
	}
	c := sc.Run("http://"+addr, u)
	time.Sleep(200 * time.Millisecond) // the gateway logs an abandoned attempt as it notices
	r.err = stop()
	r.start, r.client = u.Started(), c.Attempts()
	r.timeline = Timeline(u.Work(), r.client, r.start)
	return r
}

// The overload scenarios through nginx and Caddy, first as the upstream's and the client's
// records tell them, then as retrylens reads the gateway's log.
//
// The records: before the trigger (second 0) every first attempt gets its answer; once the
// trigger is over (seconds 3 and 4; it ends at 2 s) the run without retries and the
// budgeted run serve every first attempt again, while with naive retries nothing gets
// through: the service spends its workers on requests whose client has left, admitting
// more attempts than the first attempts bring, retries three in four. With a trigger that
// never ends nothing gets through either, but the service admits fewer attempts than the
// first attempts bring: it is still broken, not kept down by retries.
//
// retrylens, at one-second windows: the naive run's retry-sustained overload covers every
// window from the trigger's end to the last arrival and none before the trigger; the
// other runs have none. check (on minutes) finds it in the naive run only. Each stretch's first attempts and attempts are the client's,
// counted by when it had its answer (within 3 %: the gateway logs an attempt as it
// notices its end, a few milliseconds from the client, which can move it across a
// second's bound).
func TestOverloadRuns(t *testing.T) {
	t.Parallel()
	for _, sc := range OverloadScenarios() {
		var runs []*overloadRun
		var wg sync.WaitGroup
		for _, gw := range []string{"nginx", "caddy"} {
			r := &overloadRun{}
			runs = append(runs, r)
			dir := t.TempDir()
			wg.Go(func() { *r = *runOverload(dir, gw, sc) })
		}
		wg.Wait()
		for _, r := range runs {
			if (errors.Is(r.err, ErrNoNginx) || errors.Is(r.err, ErrNoCaddy)) && os.Getenv("CI") == "" {
				t.Skip(r.err)
			}
			if r.err != nil {
				t.Fatalf("%s via %s: %v", sc.Name, r.gateway, r.err)
			}
			checkShape(t, sc, r)
			checkFinding(t, sc, r)
		}
	}
}

// checkShape checks a run's records against the shape its scenario is for.
func checkShape(t *testing.T, sc Scenario, r *overloadRun) {
	t.Helper()
	tl := r.timeline
	for _, s := range tl {
		t.Logf("%s via %s %v: first %d attempts %d refused %d goodput %d busy %v wasted %v", sc.Name, r.gateway, s.Start,
			s.FirstAttempts, s.Attempts, s.Refused, s.Goodput, s.Busy.Round(time.Millisecond), s.BusyWasted.Round(time.Millisecond))
	}
	if len(tl) < 5 {
		t.Fatalf("%s via %s: a timeline of %d seconds, want 5", sc.Name, r.gateway, len(tl))
	}
	if b := tl[0]; b.Goodput < b.FirstAttempts*9/10 {
		t.Errorf("%s via %s: before the trigger, %d answers for %d first attempts", sc.Name, r.gateway, b.Goodput, b.FirstAttempts)
	}
	for _, s := range tl[3:5] {
		admitted := s.Attempts - s.Refused
		switch sc.Name {
		case "overload-none", "overload-budget":
			if s.Goodput < s.FirstAttempts*9/10 {
				t.Errorf("%s via %s at %v: %d answers for %d first attempts: not recovered", sc.Name, r.gateway, s.Start, s.Goodput, s.FirstAttempts)
			}
		case "overload-naive":
			if s.Goodput > s.FirstAttempts/10 || admitted <= s.FirstAttempts || s.Attempts < 3*s.FirstAttempts || s.BusyWasted < s.Busy*8/10 {
				t.Errorf("%s via %s at %v: %+v: not kept down by its retries", sc.Name, r.gateway, s.Start, s)
			}
		case "overload-unending":
			if s.Goodput > s.FirstAttempts/10 || admitted >= s.FirstAttempts {
				t.Errorf("%s via %s at %v: %+v: not still broken", sc.Name, r.gateway, s.Start, s)
			}
		}
	}
}

// checkFinding reads the run's log with retrylens at one-second windows and checks its
// retry-sustained overload against the records.
func checkFinding(t *testing.T, sc Scenario, r *overloadRun) {
	t.Helper()
	ctx := context.Background()
	pf, err := parse.Preset(r.format)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := backend.Temp(ctx, []string{r.log}, ingest.Options{Format: pf})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var qo query.Options
	db, err := st.Rows(ctx, &qo, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := postmortem.Build(ctx, db, postmortem.Options{Query: qo, Width: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	flagged := map[time.Time]bool{}
	for _, s := range rep.Sustained {
		t.Logf("%s via %s: retry-sustained %s–%s, %d windows, %d first attempts, %d attempts, shed %.0f/s", sc.Name, r.gateway,
			s.Start.Format("15:04:05"), s.End.Format("15:04:05"), s.Windows, s.FirstAttempts, s.Attempts, s.Shed)
		for w := s.Start; w.Before(s.End); w = w.Add(time.Second) {
			flagged[w] = true
		}
		var first, all int64
		for _, a := range r.client {
			if !a.Received.Before(s.Start) && a.Received.Before(s.End) {
				all++
				if a.N == 0 {
					first++
				}
			}
		}
		for _, f := range []struct {
			name        string
			got, client int64
		}{{"first attempts", s.FirstAttempts, first}, {"attempts", s.Attempts, all}} {
			if math.Abs(float64(f.got-f.client)) > 0.03*float64(f.client) {
				t.Errorf("%s via %s: the stretch from %s: %s %d, the client's %d", sc.Name, r.gateway, s.Start.Format("15:04:05"), f.name, f.got, f.client)
			}
		}
	}
	// check, on minutes: the finding there too, for --fail-on-finding retry_sustained
	chk, err := postmortem.Alerts(ctx, db, postmortem.Options{Query: qo, MaxAttempts: 3}, "P1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if naive := sc.Name == "overload-naive"; naive != (len(chk.Sustained) > 0) {
		t.Errorf("%s via %s: check's retry-sustained stretches: %+v", sc.Name, r.gateway, chk.Sustained)
	}
	c := sc.Faults.Capacity
	triggerFrom, triggerTo := r.start.Add(c.TriggerFrom), r.start.Add(c.TriggerTo)
	lastArrival := r.start.Add(time.Duration(float64(len(sc.Requests)) / sc.Rate * float64(time.Second)))
	for _, w := range rep.Windows {
		end := w.Start.Add(time.Second)
		switch {
		case sc.Name != "overload-naive" && flagged[w.Start]:
			t.Errorf("%s via %s: window %s flagged retry-sustained", sc.Name, r.gateway, w.Start.Format("15:04:05"))
		case sc.Name == "overload-naive" && !end.After(triggerFrom) && flagged[w.Start]:
			t.Errorf("%s via %s: window %s, before the trigger, flagged retry-sustained", sc.Name, r.gateway, w.Start.Format("15:04:05"))
		case sc.Name == "overload-naive" && !w.Start.Before(triggerTo) && !end.After(lastArrival) && !flagged[w.Start]:
			t.Errorf("%s via %s: window %s, after the trigger, not flagged retry-sustained: %+v", sc.Name, r.gateway, w.Start.Format("15:04:05"), w.Metrics)
		}
	}
}
