package lab

import (
	"errors"
	"os"
	"testing"
)

// overloadRun runs an overload scenario through a real nginx and returns its timeline,
// from the upstream's and the client's records.
func overloadRun(t *testing.T, sc Scenario) []Second {
	t.Helper()
	u, err := StartUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	n, err := StartNginx(t.TempDir(), u.Addr)
	if errors.Is(err, ErrNoNginx) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	c := sc.Run("http://"+n.Addr, u)
	return Timeline(u.Work(), c.Attempts(), u.Started())
}

// The overload scenarios have the shape they are for, by the upstream's and the client's
// own records: before the trigger (second 0) every first attempt gets its answer; once the
// trigger is over (seconds 3 and 4; it ends at 2 s) the run without retries and the
// budgeted run serve every first attempt again, while with naive retries nothing gets
// through: the service spends its workers on requests whose client has left, admitting
// more attempts than the first attempts bring, retries three in four of them. With a
// trigger that never ends nothing gets through either, but the service admits fewer
// attempts than the first attempts bring: it is still broken, not kept down by retries.
func TestOverloadShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short starts no server")
	}
	t.Parallel()
	for _, sc := range OverloadScenarios() {
		tl := overloadRun(t, sc)
		for _, s := range tl {
			t.Logf("%s %v: first %d attempts %d refused %d goodput %d busy %v wasted %v", sc.Name, s.Start, s.FirstAttempts, s.Attempts, s.Refused, s.Goodput, s.Busy, s.BusyWasted)
		}
		if len(tl) < 5 {
			t.Fatalf("%s: a timeline of %d seconds, want 5", sc.Name, len(tl))
		}
		if b := tl[0]; b.Goodput < b.FirstAttempts*9/10 {
			t.Errorf("%s: before the trigger, %d answers for %d first attempts", sc.Name, b.Goodput, b.FirstAttempts)
		}
		for _, s := range tl[3:5] {
			admitted := s.Attempts - s.Refused
			switch sc.Name {
			case "overload-none", "overload-budget":
				if s.Goodput < s.FirstAttempts*9/10 {
					t.Errorf("%s at %v: %d answers for %d first attempts: not recovered", sc.Name, s.Start, s.Goodput, s.FirstAttempts)
				}
			case "overload-naive":
				if s.Goodput > s.FirstAttempts/10 || admitted <= s.FirstAttempts || s.Attempts < 3*s.FirstAttempts || s.BusyWasted < s.Busy*8/10 {
					t.Errorf("%s at %v: %+v: not kept down by its retries", sc.Name, s.Start, s)
				}
			case "overload-unending":
				if s.Goodput > s.FirstAttempts/10 || admitted >= s.FirstAttempts {
					t.Errorf("%s at %v: %+v: not still broken", sc.Name, s.Start, s)
				}
			}
		}
	}
}
