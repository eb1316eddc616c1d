package query

import (
	"fmt"
	"strings"
	"time"
)

// ParseWindow reads 1m, 5m, 1h, 1d, or a Go duration of whole seconds.
func ParseWindow(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		d, err := time.ParseDuration(n + "h")
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a duration like 1m, 5m, 1h or 1d", s)
		}
		return d * 24, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a duration like 1m, 5m, 1h or 1d (whole seconds, at least 1s)", s)
	}
	return d, nil
}

// timeLayouts are what --since/--until accept: RFC 3339, nginx's $time_local, and plain
// dates and times (in the report's zone).
var timeLayouts = []string{time.RFC3339Nano, "02/Jan/2006:15:04:05 -0700", "02/Jan/2006:15:04:05",
	"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// ParseRange reads --since, --until and --tz into the rows a report or check selects,
// and the zone times are shown in. A bound may be a time, or a duration before now (30m,
// 2h, 1d, or -1h alike), as kubectl logs --since and journalctl take it.
func ParseRange(since, until, tz string, now time.Time) (Options, *time.Location, error) {
	var o Options
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return o, nil, fmt.Errorf("--tz: %w", err)
	}
	if o.Since, err = parseTime(since, loc, now); err != nil {
		return o, nil, fmt.Errorf("--since: %w", err)
	}
	if o.Until, err = parseTime(until, loc, now); err != nil {
		return o, nil, fmt.Errorf("--until: %w", err)
	}
	if !o.Since.IsZero() && !o.Until.IsZero() && !o.Since.Before(o.Until) {
		return o, nil, fmt.Errorf("--since %s is not before --until %s", since, until)
	}
	return o, loc, nil
}

// parseTime reads --since/--until; "" is an open bound.
func parseTime(s string, loc *time.Location, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	// a duration before now: 30m, 2h, 1d, -1h (the sign says the same)
	if d, err := ParseWindow(strings.TrimPrefix(s, "-")); err == nil {
		return now.Add(-d).UTC(), nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2026-11-29T10:00:00Z, 29/Nov/2026:10:00:00 +0000 or '2026-11-29 10:00', nor a duration before now like 30m, 2h or 1d", s)
}
