package ingest

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrylens/retrylens/internal/sanitize"
	"github.com/retrylens/retrylens/parse"
)

// WriteDryRun writes how a file's first lines parse, field by field; for a line that does not
// match, the error and a caret under the column where matching failed.
func WriteDryRun(w io.Writer, path string, f *parse.Format, samples []Sample) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: format %s\n", sanitize.Text(path), f.Name)
	for _, s := range samples {
		fmt.Fprintf(&b, "\nline %d: %s\n", s.Line, sanitize.Text(s.Raw))
		var pe *parse.Error
		if errors.As(s.Err, &pe) {
			col := pe.Column - 1
			if col > len(s.Raw) {
				col = len(s.Raw)
			}
			// The caret sits under the same column of the cleaned line.
			pad := len(sanitize.Text(s.Raw[:col]))
			fmt.Fprintf(&b, "%s^ %s\n", strings.Repeat(" ", len("line ")+len(strconv.Itoa(s.Line))+2+pad), sanitize.Text(pe.Error()))
			continue
		}
		for _, kv := range fields(&s.Record) {
			fmt.Fprintf(&b, "  %-16s %s\n", kv[0], sanitize.Text(kv[1]))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fields lists a record's fields that are set, by name.
func fields(r *parse.Record) [][2]string {
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	if !r.Time.IsZero() {
		add("time", r.Time.Format(time.RFC3339Nano))
	}
	add("remote_addr", r.RemoteAddr)
	add("method", r.Method)
	add("uri", r.URI)
	add("protocol", r.Protocol)
	if r.Status >= 0 {
		add("status", strconv.Itoa(r.Status))
	}
	if r.Bytes >= 0 {
		add("bytes", strconv.FormatInt(r.Bytes, 10))
	}
	add("referer", r.Referer)
	add("user_agent", r.UserAgent)
	add("host", r.Host)
	if r.RequestTime >= 0 {
		add("request_time", strconv.FormatFloat(r.RequestTime, 'f', -1, 64))
	}
	add("upstream_status", r.UpstreamStatus)
	if r.Attempt >= 0 {
		add("attempt", fmt.Sprintf("%d (from %s)", r.Attempt, r.AttemptSource))
	} else {
		add("attempt", "none: untagged")
	}
	add("retry_reason", r.RetryReason)
	add("request_id", r.RequestID)
	add("idempotency_key", r.IdempotencyKey)
	add("retry_after", r.RetryAfter)
	add("error_code", r.ErrorCode)
	add("operation", r.Operation)
	add("span", r.Span) // the client span (traceparent): joins a trace's attempt
	return out
}
