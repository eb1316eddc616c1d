package query

import (
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"1m": time.Minute, "10s": 10 * time.Second, "1h": time.Hour, "1d": 24 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseWindow(in); err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0s", "1.5s", "500ms", "-1m", "0d", "1w", "x"} {
		if got, err := ParseWindow(in); err == nil {
			t.Errorf("ParseWindow(%q) = %v; want an error", in, got)
		}
	}
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC) // 10:00 in Paris, in winter
	for _, since := range []string{"2026-11-29T09:00:00Z", "29/Nov/2026:10:00:00 +0100", "2026-11-29 10:00", "2026-11-29T10:00:00"} {
		o, loc, err := ParseRange(since, "", "Europe/Paris", time.Now())
		if err != nil || !o.Since.Equal(want) || !o.Until.IsZero() || loc.String() != "Europe/Paris" {
			t.Errorf("ParseRange(%q) = %v, %v, %v; want since %v", since, o.Since, loc, err, want)
		}
	}
	// durations before now, whatever the zone
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		since, until string
		from, to     time.Time
	}{
		{"30m", "", now.Add(-30 * time.Minute), time.Time{}},
		{"-2h", "1h", now.Add(-2 * time.Hour), now.Add(-time.Hour)},
		{"1d", "2026-12-06 11:00", now.Add(-24 * time.Hour), time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}, // 11:00 in Paris
	} {
		o, _, err := ParseRange(c.since, c.until, "Europe/Paris", now)
		if err != nil || !o.Since.Equal(c.from) || !o.Until.Equal(c.to) {
			t.Errorf("ParseRange(%q, %q) at %s = %v, %v, %v; want %v, %v", c.since, c.until, now, o.Since, o.Until, err, c.from, c.to)
		}
	}
	for _, c := range [][3]string{{"2026-11-29 10:00", "2026-11-29 10:00", "UTC"}, {"yesterday", "", "UTC"}, {"", "", "Mars/Olympus"}, {"1h", "2h", "UTC"}, {"1w", "", "UTC"}} {
		if _, _, err := ParseRange(c[0], c[1], c[2], time.Now()); err == nil {
			t.Errorf("ParseRange(%q, %q, %q): no error", c[0], c[1], c[2])
		}
	}
}
