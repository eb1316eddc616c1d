package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// Windows under a minute are judged on their own counts, and alerts on the windows. The
// log: two requests a second for 90 s from 14:00:00; those started in 14:00:20–14:01:19
// fail twice (503) and succeed on their third attempt. By hand: each storm window of 10 s
// holds 20 first attempts and 40 retries (amplification 3.0), each other window 20 first
// attempts and no retry (quiet); minute 14:00 holds 120 first attempts and 160 retries,
// minute 14:01 60 and 80 (retry_storm fires on both, and retry_rate_high, 80 of 120 and
// 40 of 60 retried, sustained for the two minutes it needs: at --window 1m every window is
// fuelling). At --window 10s both fire where the windows bear them out: on the six storm
// windows, 14:00:20–14:01:20 (a minute of retry_storm on its own; retry_rate_high from the
// minutes, its two minutes' sustain being a duration, not twelve windows), and only they
// are fuelling: the windows 14:00:00, 14:00:10 and 14:01:20 inherit nothing from their
// minutes.
func TestSubMinuteWindowsJudgedOnTheirOwn(t *testing.T) {
	t.Parallel()
	log := stormLog(t, "/api/x", 90, 2, func(s, _ int) []int {
		if s >= 20 && s < 80 {
			return []int{503, 503, 200}
		}
		return nil
	})

	type window struct {
		Start         string   `json:"start"`
		FirstAttempts int64    `json:"first_attempts"`
		Retries       int64    `json:"retries"`
		Verdict       string   `json:"verdict"`
		Fired         []string `json:"alerts"` // the rules that fired in it
	}
	var rep struct {
		Windows []window `json:"windows"`
		Alerts  []struct {
			Rule  string `json:"rule"`
			Start string `json:"start"`
			End   string `json:"end"`
		} `json:"alerts"`
	}
	read := func(width string) {
		t.Helper()
		stdout, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", width, "--format", "json", log)
		if code != 0 {
			t.Fatalf("report --window %s: exit %d: %s", width, code, stderr)
		}
		rep.Windows, rep.Alerts = nil, nil
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
	}
	read("1m")
	if len(rep.Windows) != 2 || rep.Windows[0].FirstAttempts != 120 || rep.Windows[0].Retries != 160 || rep.Windows[1].FirstAttempts != 60 ||
		rep.Windows[1].Retries != 80 || rep.Windows[0].Verdict != "fuelling" || rep.Windows[1].Verdict != "fuelling" {
		t.Fatalf("the minutes: %+v; want 120 and 60 first attempts, 160 and 80 retries, both fuelling", rep.Windows)
	}
	read("10s")
	if len(rep.Windows) != 9 {
		t.Fatalf("%d windows of 10 s, want 9: %+v", len(rep.Windows), rep.Windows)
	}
	for i, w := range rep.Windows {
		storm := i >= 2 && i < 8
		want := window{Start: w.Start, FirstAttempts: 20, Verdict: "quiet"}
		if storm {
			want.Retries, want.Verdict, want.Fired = 40, "fuelling", []string{"retry_rate_high", "retry_storm"}
		}
		if w.FirstAttempts != want.FirstAttempts || w.Retries != want.Retries || w.Verdict != want.Verdict || !slices.Equal(w.Fired, want.Fired) {
			t.Errorf("window %s: %+v; want %+v", w.Start, w, want)
		}
	}
	var storms []string
	for _, a := range rep.Alerts {
		storms = append(storms, a.Rule+" "+a.Start+" "+a.End)
	}
	if want := []string{"retry_rate_high 2026-11-29T14:00:20Z 2026-11-29T14:01:20Z", "retry_storm 2026-11-29T14:00:20Z 2026-11-29T14:01:20Z"}; !slices.Equal(storms, want) {
		t.Errorf("alerts at 10 s: %q; want %q", storms, want)
	}
}
