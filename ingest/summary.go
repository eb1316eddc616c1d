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

// ProgressBar is an Options.Progress for a terminal: per file a line on w, redrawn four
// times a second, with the share read, lines/s and the time left ("access.log  31%
// 265k lines/s, 6s left"; a stream of unknown size shows what it read), cleared when the
// file is done.
func ProgressBar(w io.Writer) func(path string, size int64) io.WriteCloser {
	return func(path string, size int64) io.WriteCloser {
		return &lineRate{w: w, name: sanitize.Text(filepath.Base(path)), size: size, start: time.Now()}
	}
}

// lineRate draws the progress of one file from the bytes it is given and the newlines
// in them. Nothing is drawn in the first second: the readers ahead of the parser fill
// their buffers then, which would show a rate many times the real one and no time left
// to predict from; a file loaded within a second draws nothing.
type lineRate struct {
	w            io.Writer
	name         string
	size         int64 // <= 0: unknown
	read, lines  int64
	start, shown time.Time
	drawn        bool
}

func (l *lineRate) Write(p []byte) (int, error) {
	l.read += int64(len(p))
	l.lines += int64(bytes.Count(p, []byte{'\n'}))
	now := time.Now()
	secs := now.Sub(l.start).Seconds()
	if secs < 1 || now.Sub(l.shown) < 250*time.Millisecond {
		return len(p), nil
	}
	l.shown = now
	line := fmt.Sprintf("%s  %.0fk lines/s", l.name, float64(l.lines)/secs/1000)
	if l.size > 0 {
		done := min(float64(l.read)/float64(l.size), 1)
		line = fmt.Sprintf("%s %3.0f%%  %.0fk lines/s", l.name, 100*done, float64(l.lines)/secs/1000)
		if done > 0 && done < 1 {
			line += fmt.Sprintf(", %s left", time.Duration(secs*(1-done)/done*float64(time.Second)).Round(time.Second))
		}
	} else {
		line += fmt.Sprintf(", %.0f MiB read", float64(l.read)/(1<<20))
	}
	l.drawn = true
	_, err := fmt.Fprintf(l.w, "\r\x1b[K%s", line)
	return len(p), err
}

// Close clears the line.
func (l *lineRate) Close() error {
	if !l.drawn {
		return nil
	}
	_, err := io.WriteString(l.w, "\r\x1b[K")
	return err
}
