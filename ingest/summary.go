package ingest

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/retrylens/retrylens/internal/sanitize"
	"github.com/schollz/progressbar/v3"
)

// WriteSummary writes the summary of a load for a person: one line per file, then totals and
// the first rejected lines, sanitised.
func WriteSummary(w io.Writer, res *Result) error {
	if len(res.Files) == 0 {
		return nil // every input failed; the error says why
	}
	var b strings.Builder
	for _, f := range res.Files {
		if f.Skipped {
			same := ""
			if f.SameAs != f.Path {
				same = " as " + sanitize.Text(f.SameAs)
			}
			fmt.Fprintf(&b, "%s: skipped, already loaded%s\n", sanitize.Text(f.Path), same)
			continue
		}
		if f.From > 0 {
			fmt.Fprintf(&b, "%s: %s format, %d new lines after line %d (loaded before as %s), %d rows, %d rejected\n",
				sanitize.Text(f.Path), f.Format, f.Lines, f.From, sanitize.Text(f.SameAs), f.Rows, f.Rejected)
			continue
		}
		if f.Format == "" {
			fmt.Fprintf(&b, "%s: empty\n", sanitize.Text(f.Path))
			continue
		}
		fmt.Fprintf(&b, "%s: %s format, %d lines, %d rows, %d rejected\n", sanitize.Text(f.Path), f.Format, f.Lines, f.Rows, f.Rejected)
	}
	for _, f := range res.Files {
		if f.Unfinished > 0 {
			fmt.Fprintf(&b, "note: %s: the trace document from line %d on is unfinished (still being written?): its spans are read once it is complete\n",
				sanitize.Text(f.Path), f.Unfinished)
		}
		switch {
		case f.Repeats > 0 && f.Deduped:
			fmt.Fprintf(&b, "%s: %d lines left out, repeating rows already loaded (--dedupe)\n", sanitize.Text(f.Path), f.Repeats)
		case f.Repeats > 0 && f.Repeats*100 >= f.Rows: // fewer: two servers' lines that happen to agree
			fmt.Fprintf(&b, "warning: %s: %d of its %d rows repeat rows already loaded (same second, key, attempt, status, method, URI and client): "+
				"the same traffic logged twice? Every figure counts them twice; --dedupe leaves them out\n", sanitize.Text(f.Path), f.Repeats, f.Rows)
		}
	}
	t := res.Totals()
	secs := res.Elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(t.Lines) / secs
	}
	if t.Lines == 0 && len(res.Files) > 0 {
		b.WriteString("nothing new to load\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "loaded %d lines, %d rows, %d rejected in %s (%.0f lines/s)\n", t.Lines, t.Rows, t.Rejected, res.Elapsed.Round(time.Millisecond), rate)
	if !t.First.IsZero() {
		fmt.Fprintf(&b, "first line at %s, last at %s (UTC)\n", t.First.UTC().Format(time.RFC3339), t.Last.UTC().Format(time.RFC3339))
	}
	if len(res.Hotspots) > 0 {
		fmt.Fprintf(&b, "warning: %d distinct routes: endpoint tables will be long; these path prefixes make most of them (add --route templates):\n", res.Routes)
		for _, h := range res.Hotspots {
			routes := "routes"
			if h.Routes == 1 {
				routes = "route"
			}
			fmt.Fprintf(&b, "  %s: %d %s, e.g. %s\n", sanitize.Text(h.Prefix), h.Routes, routes, sanitize.Text(h.Example))
		}
	}
	if t.Rejected > 0 {
		reasons := make([]string, 0, len(t.Reasons))
		for r := range t.Reasons {
			reasons = append(reasons, r)
		}
		sort.Slice(reasons, func(i, j int) bool {
			return t.Reasons[reasons[i]] > t.Reasons[reasons[j]] || t.Reasons[reasons[i]] == t.Reasons[reasons[j]] && reasons[i] < reasons[j]
		})
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%s %d", r, t.Reasons[r])
		}
		fmt.Fprintf(&b, "rejected lines by reason: %s\n", strings.Join(parts, ", "))
		for i, s := range t.Samples {
			if i == 5 {
				fmt.Fprintf(&b, "  … %d more kept in the rejects table (retrylens query 'SELECT * FROM rejects')\n", len(t.Samples)-5)
				break
			}
			fmt.Fprintf(&b, "  %s:%d: %s\n    %s\n", sanitize.Text(s.Path), s.Line, sanitize.Text(s.Message), sanitize.Text(s.Excerpt))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ProgressBar is an Options.Progress for a terminal: per file a bar on w (bytes,
// bytes/s, ETA) whose description adds lines/s.
func ProgressBar(w io.Writer) func(path string, size int64) io.WriteCloser {
	return func(path string, size int64) io.WriteCloser {
		name := sanitize.Text(filepath.Base(path))
		return &lineRate{name: name, start: time.Now(), bar: progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)}
	}
}

// lineRate feeds a progress bar (bytes, bytes/s, ETA) and adds lines/s to its
// description, counting the newlines of what it is given.
type lineRate struct {
	bar   *progressbar.ProgressBar
	name  string
	lines int64
	start time.Time
	shown time.Time
}

func (l *lineRate) Write(p []byte) (int, error) {
	l.lines += int64(bytes.Count(p, []byte{'\n'}))
	if now := time.Now(); now.Sub(l.shown) >= 250*time.Millisecond {
		l.shown = now
		// Not in the first second: the readers ahead of the parser fill their buffers
		// then, which would show a rate several times the real one.
		if secs := now.Sub(l.start).Seconds(); secs >= 1 {
			l.bar.Describe(fmt.Sprintf("%s %.0fk lines/s", l.name, float64(l.lines)/secs/1000))
		}
	}
	return l.bar.Write(p)
}

func (l *lineRate) Close() error { return l.bar.Close() }
