package judge

import (
	"testing"
	"time"
)

// RetrySustained on hand-made windows of a second: a healthy second, three seconds kept
// down by retries (200 first attempts, 800 attempts, none answered 2xx, 380 abandoned by a
// client that waited: more work taken on than the 200 first attempts bring), a second as
// broken but busy with less (100 abandoned), a second whose first attempts fell to 60
// (under half the median 200), then a hot second, one broken one (bridged: one window
// apart), two hot ones, two healthy seconds and a lone hot second (under the windows a stretch
// needs: 2). Two stretches: seconds 1-3 and 6-9, each shedding 600 attempts a second.
func TestRetrySustained(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	win := func(s int, first, retries, ok, abandoned int64) Window {
		tagged := first + retries
		success := float64(ok) / float64(tagged)
		amp := float64(tagged) / float64(first)
		return Window{Start: t0.Add(time.Duration(s) * time.Second), Metrics: Metrics{FirstAttempts: first, Retries: retries,
			Amplification: &amp, ActualSuccess: &success, Abandoned: Split{First: abandoned / 4, Retry: abandoned - abandoned/4}}}
	}
	hot := func(s int) Window { return win(s, 200, 600, 0, 380) }
	ws := []Window{
		win(0, 200, 0, 200, 0),
		hot(1), hot(2), hot(3),
		win(4, 200, 600, 0, 100), // broken: takes on less than its first attempts
		win(5, 60, 180, 0, 200),  // first attempts far under their baseline
		hot(6), win(7, 200, 600, 0, 100), hot(8), hot(9),
		win(10, 200, 0, 200, 0), win(11, 200, 0, 200, 0),
		hot(12),
	}
	got := RetrySustained(ws, time.Second, DefaultRules())
	if len(got) != 2 {
		t.Fatalf("%d stretches, want 2: %+v", len(got), got)
	}
	for i, want := range []Sustained{
		{Start: t0.Add(time.Second), End: t0.Add(4 * time.Second), Windows: 3, FirstAttempts: 600, Attempts: 2400, Shed: 600},
		{Start: t0.Add(6 * time.Second), End: t0.Add(10 * time.Second), Windows: 4, FirstAttempts: 800, Attempts: 3200, Shed: 600},
	} {
		if got[i] != want {
			t.Errorf("stretch %d: %+v, want %+v", i, got[i], want)
		}
	}
	// on minutes, one hot window is a stretch
	if got := RetrySustained([]Window{{Start: t0, Metrics: hot(0).Metrics}}, time.Minute, DefaultRules()); len(got) != 1 {
		t.Errorf("one hot minute: %+v, want a stretch", got)
	}
	if got := RetrySustained(nil, time.Second, DefaultRules()); got != nil {
		t.Errorf("no windows: %+v", got)
	}
	if got := RetrySustained([]Window{{Start: t0}}, time.Second, DefaultRules()); got != nil {
		t.Errorf("no attempt data: %+v", got)
	}
}

// A stretch found on an hour's window sheds what its busiest minute did, not the hour's
// average: 6,840 retries in 14:10 (114 a second) and 3,000 in 14:11 (50 a second) read
// 114/s, not (6,840 + 3,000) / 3,600 = 2.7/s. Windows of a minute or less keep their own.
func TestPeakShed(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	minutes := []Window{
		{Start: t0.Add(5 * time.Minute), Metrics: Metrics{FirstAttempts: 100}},
		{Start: t0.Add(10 * time.Minute), Metrics: Metrics{FirstAttempts: 100, Retries: 6840}},
		{Start: t0.Add(11 * time.Minute), Metrics: Metrics{FirstAttempts: 100, Retries: 3000}},
		{Start: t0.Add(time.Hour), Metrics: Metrics{FirstAttempts: 100, Retries: 9000}}, // the next hour
	}
	hour := []Sustained{{Start: t0, End: t0.Add(time.Hour), Windows: 1, FirstAttempts: 300, Attempts: 300 + 9840, Shed: 9840.0 / 3600}}
	PeakShed(hour, time.Hour, minutes)
	if hour[0].Shed != 114 {
		t.Errorf("an hour's stretch sheds %v/s, want 114 (its busiest minute)", hour[0].Shed)
	}
	sec := []Sustained{{Start: t0, End: t0.Add(2 * time.Second), Shed: 600}}
	PeakShed(sec, time.Second, minutes)
	if sec[0].Shed != 600 {
		t.Errorf("a stretch of seconds sheds %v/s, want its own 600", sec[0].Shed)
	}
}
