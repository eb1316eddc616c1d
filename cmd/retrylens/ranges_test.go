package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrylens/retrylens/internal/testmain"
)

// The times of a retry-format line: nginx's $time_local and $msec.
var (
	timeLocal = regexp.MustCompile(`\[\d\d/[A-Z][a-z][a-z]/\d{4}:\d\d:\d\d:\d\d \+0000\]`)
	msecField = regexp.MustCompile(`msec=(\d+)\.(\d{3})`)
)

// moveLog writes the retry-format log src to dst with the time of every line moved by at.
func moveLog(t *testing.T, src, dst string, at func(time.Time) time.Time) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		m := msecField.FindStringSubmatch(l)
		if m == nil {
			out.WriteString(l)
			continue
		}
		s, _ := strconv.ParseInt(m[1], 10, 64)
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		moved := at(time.UnixMilli(s*1000 + ms).UTC())
		l = msecField.ReplaceAllString(l, fmt.Sprintf("msec=%d.%03d", moved.Unix(), moved.UnixMilli()%1000))
		l = timeLocal.ReplaceAllString(l, moved.Format("[02/Jan/2006:15:04:05 +0000]"))
		out.WriteString(l)
	}
	if err := os.WriteFile(dst, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// spanOf returns the first and last time of a retry-format log's lines.
func spanOf(t *testing.T, path string) (first, last time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msecField.FindAllStringSubmatch(string(b), -1) {
		s, _ := strconv.ParseInt(m[1], 10, 64)
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		at := time.UnixMilli(s*1000 + ms).UTC()
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// acrossAnHour writes the lab's retry-format log src to dst slowed down twelve times (a
// run of 10 s takes two minutes, a retry 20 ms after an answer comes 240 ms after it)
// and centred on 23:00, so that its incident spans an hour's bound, and checks the hourly
// ranges of it (checkHourRanges).
func acrossAnHour(t *testing.T, src string) {
	t.Helper()
	first, last := spanOf(t, src)
	mid := first.Add(last.Sub(first) / 2)
	bound := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	dst := t.TempDir() + "/across.log"
	moveLog(t, src, dst, func(at time.Time) time.Time { return bound.Add(12 * at.Sub(mid)) })
	n := checkHourRanges(t, dst, "--log-format", "retry")
	t.Logf("the run slowed down 12 times across 23:00: %d alerts cross it", n)
	if n == 0 {
		t.Error("no alert crosses 23:00: the test tests no look-back")
	}
}

// jsonOf runs report --format json with args and decodes it as it comes.
func jsonOf(t *testing.T, args ...string) map[string]any {
	t.Helper()
	stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("report %v: exit %d: %s", args, code, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout)
	}
	return r
}

// checkHourRanges reports on the log over every hour it spans with --since/--until and
// requires each range to equal its hourly window of the report over every row (figures,
// verdict and the alerts that overlap it, cut at its bounds), and the ranges to add up to
// the whole: every count of the summary, of the linking, of the 429 loops and of each
// finding but synchronised. It returns how many alerts crossed an hour's bound.
func checkHourRanges(t *testing.T, log string, args ...string) (crossing int) {
	t.Helper()
	whole := jsonOf(t, append([]string{"--window", "1h", log}, args...)...)
	windows := whole["windows"].([]any)
	if len(windows) < 2 {
		t.Fatalf("the log spans %d hours: the test needs a bound", len(windows))
	}
	sums := map[string]float64{}
	add := func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				if n, ok := x.(float64); ok && n == float64(int64(n)) && !strings.Contains(k, "rate") && !strings.Contains(k, "success") && !strings.Contains(k, "amplification") && !strings.Contains(k, "load") && !strings.Contains(k, "share") {
					sums[prefix+k] += n
				}
			}
		}
	}
	counts := func(r map[string]any) map[string]float64 {
		clear(sums)
		add("summary.", r["summary"])
		add("linking.", r["linking"])
		add("loops.", r["loops_429"])
		for _, f := range r["findings"].([]any) {
			f := f.(map[string]any)
			if f["kind"] == "synchronised" {
				continue // a test of each range's distribution of gaps (at least 10 of an attempt number), not a count
			}
			sums["finding."+f["kind"].(string)+".count"] += f["count"].(float64)
			sums["finding."+f["kind"].(string)+".attempts"] += f["attempts"].(float64)
		}
		return maps.Clone(sums)
	}
	want := counts(whole)
	total := map[string]float64{}
	for _, w := range windows {
		w := w.(map[string]any)
		since, _ := time.Parse(time.RFC3339, w["start"].(string))
		until := since.Add(time.Hour)
		r := jsonOf(t, append([]string{"--window", "1h", "--since", since.Format(time.RFC3339), "--until", until.Format(time.RFC3339), log}, args...)...)
		got := r["windows"].([]any)
		if diff := cmp.Diff([]any{w}, got, approx); diff != "" {
			t.Errorf("[%s, %s): its window (-whole +range):\n%s", since, until, diff)
		}
		summary := maps.Clone(w)
		delete(summary, "start")
		if diff := cmp.Diff(summary, r["summary"], approx); diff != "" {
			t.Errorf("[%s, %s): summary (-whole's window +range):\n%s", since, until, diff)
		}
		// The whole's alerts that overlap the range, cut at its bounds.
		var cut []any
		for _, a := range whole["alerts"].([]any) {
			a := maps.Clone(a.(map[string]any))
			start, _ := time.Parse(time.RFC3339, a["start"].(string))
			end, _ := time.Parse(time.RFC3339, a["end"].(string))
			if !start.Before(until) || !end.After(since) {
				continue
			}
			if start.Before(since) || end.After(until) {
				crossing++
				delete(a, "peak") // the worst minute may be on the other side
				if start.Before(since) {
					start = since
				}
				if end.After(until) {
					end = until
				}
				a["start"], a["end"] = start.Format(time.RFC3339), end.Format(time.RFC3339)
			}
			cut = append(cut, a)
		}
		var alerts []any
		for _, a := range r["alerts"].([]any) {
			a := maps.Clone(a.(map[string]any))
			if len(cut) > len(alerts) && cut[len(alerts)].(map[string]any)["peak"] == nil {
				delete(a, "peak")
			}
			alerts = append(alerts, a)
		}
		if diff := cmp.Diff(cut, alerts, approx); diff != "" {
			t.Errorf("[%s, %s): alerts (-whole's, cut +range):\n%s", since, until, diff)
		}
		for k, v := range counts(r) {
			if strings.Contains(k, ".max_") {
				total[k] = max(total[k], v)
			} else {
				total[k] += v
			}
		}
	}
	if diff := cmp.Diff(want, total); diff != "" {
		t.Errorf("the ranges do not add up to the whole (-whole +sum of ranges):\n%s", diff)
	}
	return crossing / 2
}

// The incident hour's incident (14:20–14:30, EXPECTED.md) moved across 15:00: each hour's
// range equals its window of the whole report, alerts that cross 15:00 included.
func TestRangesAcrossAnHour(t *testing.T) {
	testmain.Long(t, "ranges of a moved log")
	t.Parallel()
	for _, shift := range []time.Duration{35*time.Minute + 58*time.Second} { // a request and two alerts cross 15:00
		t.Run(shift.String(), func(t *testing.T) {
			log := t.TempDir() + "/access.log"
			moveLog(t, scenario("incident-hour"), log, func(at time.Time) time.Time { return at.Add(shift) })
			n := checkHourRanges(t, log)
			t.Logf("%d alerts cross 15:00", n)
			if n == 0 {
				t.Error("no alert crossed 15:00: the test tests no look-back")
			}
		})
	}
}
