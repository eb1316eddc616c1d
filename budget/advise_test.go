package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/retrylens/retrylens/query"
)

// fleetTrace is three clients, A, B and C, each sending two requests that fail (503) and
// are rescued by one retry, all within ten seconds: client c's requests at c·100 ms and
// 1 s after, their retries at 2 s and 3 s after. 6 first attempts, 6 retries, 6 recovered.
func fleetTrace() []query.Attempt {
	var as []query.Attempt
	for i, c := range []string{"A", "B", "C"} {
		off := i * 100
		for j, k := range []string{"1", "2"} {
			key := c + k
			first := at(key, 0, off+j*1000, off+j*1000+10, 503, "")
			retry := at(key, 1, off+2000+j*1000, off+2000+j*1000+10, 200, "")
			first.Client, retry.Client = c, c
			as = append(as, first, retry)
		}
	}
	return trace(as...)
}

// A budget's floor holds per instance. A ratio budget with no share and a floor of 0.1
// retries a second over 10 s allows one retry per window: each of the three clients keeps
// its own, so each sends one of its two retries (3 allowed, 3 denied, 3 recoveries lost,
// amplification 9/6); one budget for all would send one (7/6, 5 lost).
func TestFleetFloorsPerInstance(t *testing.T) {
	floor := func() Model { return &Ratio{Label: "floor", MinPerSec: 0.1, TTL: 10 * time.Second} }
	r, n := Fleet(fleetTrace(), floor, 0)
	if n != 3 || r.FirstAttempts != 6 || r.Retries != 6 || r.Allowed != 3 || r.Denied != 3 || r.Recovered != 6 || r.LostRecoveries != 3 || r.AmplificationAfter != 1.5 {
		t.Errorf("per client: %d instances, %+v; want 3, 3 allowed, 3 denied, 3 lost, 1.5", n, r)
	}
	one := Replay(fleetTrace(), floor(), 0)
	if one.Allowed != 1 || one.LostRecoveries != 5 {
		t.Errorf("one budget: %+v; want 1 allowed, 5 lost", one)
	}
	// a log that names no client: its 6 requests are one instance, and said to be unnamed
	anon := fleetTrace()
	for i := range anon {
		anon[i].Client = ""
	}
	fam := Family{Name: "floor", PerClient: true, Settings: []Setting{{New: floor}}, Config: func(Setting) string { return "" }}
	if a := Advise(anon, []Family{fam}, Target{2, -1}, 0)[0]; a.Instances != 1 || a.Unnamed != 6 || a.Best.Lost != 5 {
		t.Errorf("no client named: %d instances, %d unnamed, %d lost; want 1, 6, 5", a.Instances, a.Unnamed, a.Best.Lost)
	}
	if a := Advise(fleetTrace(), []Family{fam}, Target{2, -1}, 0)[0]; a.Unnamed != 0 {
		t.Errorf("every client named: %d unnamed", a.Unnamed)
	}
	// retries after a 400 without its code: how much the 2026 AWS quota charges them the
	// log cannot tell. fleetTrace's first attempts made 400s, A1's with a throttling
	// code: 5 retries follow an uncoded 400, for aws-2026 only
	coded := fleetTrace()
	for i := range coded {
		if coded[i].N == 0 {
			coded[i].Status = 400
			if coded[i].Key == "A1" {
				coded[i].ErrorCode = "ThrottlingException"
			}
		}
	}
	for _, a := range Advise(coded, Families, Target{2, -1}, 0) {
		if want := map[bool]int{true: 5}[a.Family.Name == "aws-2026"]; a.Uncoded != want {
			t.Errorf("%s: %d uncoded retries, want %d", a.Family.Name, a.Uncoded, want)
		}
	}
	// spread over six instances by request, each has one request: every retry goes
	if r, n := Fleet(fleetTrace(), floor, 64); n != 64 || r.Allowed+r.Denied != 6 {
		t.Errorf("--instances 64: %d instances, %+v", n, r)
	}
}

// Advise picks, of the settings that meet the target, the one losing the fewest
// recovered requests, and says what its floor adds up to across the fleet. A family of
// three floors (0, 0.1, 1 a second over 10 s, no share), on fleetTrace: 1.0x losing 6,
// 1.5x losing 3, 2.0x losing 0. At most 1.5x: the 0.1 floor, 0.3 a second across 3
// clients. At most 1.2x: only no floor. At most 1.0x with at most 2 lost: none; the lowest
// is no floor. With only the recoveries to lose, the lowest amplification that keeps to
// them: none lost, the 1 floor (2.0x); at most 3 lost, the 0.1 floor (1.5x), not the 1
// floor that loses fewer.
func TestAdvise(t *testing.T) {
	var settings []Setting
	for _, f := range []float64{0, 0.1, 1} {
		settings = append(settings, Setting{Knobs: []Knob{{"floor", num(f)}},
			New:   func() Model { return &Ratio{Label: "floors", MinPerSec: f, TTL: 10 * time.Second} },
			floor: f, floorUnit: "retries a second"})
	}
	fam := Family{Name: "floors", PerClient: true, Settings: settings, Config: func(s Setting) string { return "floor " + knob(s, "floor") }}
	for _, c := range []struct {
		target Target
		floor  string
		met    bool
		lost   int
		says   string
	}{
		{Target{1.5, -1}, "0.1", true, 3, "0.1 retries a second per instance, is 0.3 across 3 instances"},
		{Target{1.2, -1}, "0", true, 6, ""},
		{Target{0, 0}, "1", true, 0, "1 retries a second per instance, is 3 across 3 instances"},
		{Target{0, 3}, "0.1", true, 3, "0.1 retries a second per instance, is 0.3 across 3 instances"},
		{Target{1.0, 2}, "0", false, 6, ""},
	} {
		a := Advise(fleetTrace(), []Family{fam}, c.target, 0)[0]
		if got := knob(a.Best.Setting, "floor"); got != c.floor || a.Met != c.met || a.Best.Lost != c.lost || !strings.Contains(a.Floor, c.says) || (c.says == "" && a.Floor != "") {
			t.Errorf("%+v: floor %s, met %v, %d lost, %q; want %s, %v, %d, %q", c.target, got, a.Met, a.Best.Lost, a.Floor, c.floor, c.met, c.lost, c.says)
		}
		if len(a.Curve) != 3 || a.Instances != 3 || a.Amplification != 2 || a.Recovered != 6 {
			t.Errorf("%+v: curve %d points, %d instances, recorded %.2fx, %d recovered", c.target, len(a.Curve), a.Instances, a.Amplification, a.Recovered)
		}
	}
}

// Every family's settings replay and render: a config names each knob's value.
func TestFamiliesRender(t *testing.T) {
	for _, f := range Families {
		if len(f.Settings) == 0 {
			t.Errorf("%s: no settings", f.Name)
		}
		for _, s := range f.Settings {
			cfg := f.Config(s)
			for _, k := range s.Knobs {
				if !strings.Contains(cfg, strings.TrimSuffix(k.Value, "s")) {
					t.Errorf("%s: %q lacks %s's value %s", f.Name, cfg, k.Name, k.Value)
				}
			}
			if m := s.New(); m == nil {
				t.Errorf("%s: no model", f.Name)
			}
		}
	}
}
