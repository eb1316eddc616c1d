// Package traces turns OpenTelemetry traces into attempt lines: OTLP JSON (what the
// Collector's file exporter writes, one ExportTraceServiceRequest a line, or one document
// over several lines) or Jaeger's JSON (jaeger.go), each client span that is one attempt
// of a call becoming one JSON line of parse's otel preset, which ingest then loads like
// an access log's (docs/formats.md, "Traces").
//
// What is an attempt, and of which request:
//
//   - a gRPC attempt span (gRFC A72: "Attempt.<service>/<method>", with
//     previous-rpc-attempts, under the call's "Sent." span): its attempt number is
//     previous-rpc-attempts, its request the call span (its parent);
//   - an HTTP client span (http.request.method, or the older http.method): its attempt
//     number is http.request.resend_count (absent on the first), which also counts
//     redirects; a request is the parent span's call to one method and URL, so a
//     redirect, whose URL changes, starts a request of its own, numbered from its first
//     span. Without a parent (no span was started around the call, so each resend is a
//     trace of its own) a line carries no key and links as logs' keyless lines do, by
//     client, method and URI; a resend that follows its client's 3xx to another URL is
//     then that URL's first attempt.
//
// Every other span (server, internal but a gRPC attempt, which grpc-go makes internal, a
// gRPC call's own span, a client span of neither kind) is counted and left out. Numbering reads only the spans before, so that the lines
// of a file that grew start with the lines of what it was: ingest loads only the new ones.
package traces

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrylens/retrylens/parse"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Line is an attempt as the otel preset reads it (parse/gateways.go, otelKeys).
type Line struct {
	Start      string `json:"span_start"`
	DurationNS int64  `json:"span_duration_ns"`
	Method     string `json:"method"`
	URI        string `json:"uri"`
	Host       string `json:"host,omitempty"`
	Status     int    `json:"status"`
	Client     string `json:"client"`
	Service    string `json:"service"`
	// One of the two, as the attempt header of its family: HTTP resends as
	// x-retry-attempt (0 first), gRPC attempts as grpc-previous-rpc-attempts.
	HTTPAttempt *int   `json:"x_retry_attempt,omitempty"`
	GRPCAttempt *int   `json:"grpc_previous_rpc_attempts,omitempty"`
	GRPCStatus  string `json:"grpc_status,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
	// The attempt's own span as a W3C traceparent: the gateway's line of the same attempt
	// logs the same (docs/metrics.md, "Layers").
	Traceparent string `json:"traceparent"`
}

// rejected stands for a document that could not be read: a line the otel preset
// rejects (it has no time), saying why.
type rejected struct {
	Error string `json:"otlp_error"`
}

// Stats is what Convert read.
type Stats struct {
	Documents int // OTLP documents (requests)
	Spans     int // spans in them
	Attempts  int // lines written
	Bad       int // documents that were not trace JSON, each a rejected line
	// Unfinished is the first line of a document the input ends inside (a file still
	// being written), which is left for the next time; 0 when none.
	Unfinished int
}

// head matches the start of an OTLP JSON document.
var head = regexp.MustCompile(`^\s*\{\s*"resource_?[sS]pans"\s*:`)

// IsTraces reports whether b, the start of a file, is traces: OTLP JSON or Jaeger's JSON.
func IsTraces(b []byte) bool { return head.Match(b) || jaegerHead.Match(b) }

// Convert writes a line to w for each attempt span in the traces r holds (OTLP or
// Jaeger JSON): documents one a line, or spread over lines. A document cut short at the
// end (a file still being written) is left for the next time; one that cannot be read
// becomes a line saying why, with its lines in the file, which the preset rejects, and
// the next line starts afresh.
func Convert(r io.Reader, w io.Writer) (Stats, error) {
	var st Stats
	var c converter
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var u ptrace.JSONUnmarshaler
	br := bufio.NewReaderSize(r, 256<<10)
	var doc []byte
	var scan depth
	from, line := 1, 0 // the document's first line, and the line read last
	reject := func(why string) error {
		st.Bad++
		at := fmt.Sprintf("line %d", from)
		if line > from {
			at = fmt.Sprintf("lines %d-%d", from, line)
		}
		return enc.Encode(rejected{fmt.Sprintf("not trace JSON (%s): %s", at, why)})
	}
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil // a long line: read on
		} else if len(b) > 0 {
			line++
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return st, err
		}
		if len(doc) == 0 && len(bytes.TrimSpace(b)) == 0 && err == nil {
			from = line + 1
			continue
		}
		if len(doc) > 0 && (bytes.HasPrefix(b, []byte(`{"resource`)) || bytes.HasPrefix(b, []byte(`{"data"`))) {
			// a document that never closed, cut short by the next one a line starts
			line--
			if err := reject("cut short"); err != nil {
				return st, err
			}
			line++
			doc, scan, from = doc[:0], depth{}, line
		}
		doc = append(doc, b...)
		ok, bad := scan.feed(b)
		switch {
		case bad || len(doc) > maxDocument:
			if err := reject("not one JSON object"); err != nil {
				return st, err
			}
		case ok:
			st.Documents++
			var td ptrace.Traces
			var uerr error
			if jaegerHead.Match(doc) {
				td, uerr = fromJaeger(doc)
			} else {
				td, uerr = u.UnmarshalTraces(doc)
			}
			if uerr != nil {
				if err := reject(uerr.Error()); err != nil {
					return st, err
				}
				break
			}
			for _, l := range c.lines(td, &st) {
				if err := enc.Encode(l); err != nil {
					return st, err
				}
				st.Attempts++
			}
		default:
			if err == nil {
				continue // the document goes on
			}
		}
		if err != nil {
			// the end; a document cut short waits for the rest
			if len(bytes.TrimSpace(doc)) > 0 && !ok && !bad {
				st.Unfinished = from
			}
			return st, nil
		}
		doc, scan, from = doc[:0], depth{}, line+1
	}
}

// maxDocument is the longest OTLP document read, as a log line is at most 1 MiB.
const maxDocument = 64 << 20

// depth follows a JSON value over the lines it spans, without decoding it: ok once one
// object has closed (and nothing but space after it on its line), bad when the text
// cannot be one object.
type depth struct {
	n        int
	started  bool
	inString bool
	escaped  bool
	closed   bool
}

func (d *depth) feed(b []byte) (ok, bad bool) {
	for _, c := range b {
		switch {
		case d.closed:
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				return false, true
			}
		case d.inString:
			switch {
			case d.escaped:
				d.escaped = false
			case c == '\\':
				d.escaped = true
			case c == '"':
				d.inString = false
			}
		case c == '"':
			d.inString = true
		case c == '{' || c == '[':
			if !d.started && c != '{' {
				return false, true
			}
			d.started = true
			d.n++
		case c == '}' || c == ']':
			d.n--
			if d.n < 0 {
				return false, true
			}
			d.closed = d.n == 0
		case !d.started && c != ' ' && c != '\t' && c != '\r' && c != '\n':
			return false, true
		}
	}
	return d.closed, false
}

// last is what a keyless HTTP span left for the next of its client and method.
type last struct {
	url    string
	status int
	resend int
}

type converter struct {
	last       recent[last] // the last HTTP span of each call, or keyless of each client and method
	redirected recent[int]  // requests a redirect started: the resend count of their first span
}

// recent is a map of what the spans of a call need of those before: they come close
// together, so it keeps the entries of the last two generations of recentSize only,
// whatever the file's size.
type recent[V any] struct{ cur, old map[string]V }

const recentSize = 1 << 16

func (r *recent[V]) get(k string) (V, bool) {
	if v, ok := r.cur[k]; ok {
		return v, true
	}
	v, ok := r.old[k]
	return v, ok
}

func (r *recent[V]) put(k string, v V) {
	if r.cur == nil || len(r.cur) >= recentSize {
		r.old, r.cur = r.cur, make(map[string]V)
	}
	r.cur[k] = v
}

// lines returns the attempts of one document in the order they started (a Jaeger
// document is in traces' order, and a redirect is told from the span before it).
func (c *converter) lines(td ptrace.Traces, st *Stats) []Line {
	type spanOf struct {
		sp              ptrace.Span
		client, service string
	}
	var spans []spanOf
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes()
		service := str(res, "service.name")
		if v := str(res, "service.version"); v != "" && service != "" {
			service += "/" + v
		}
		client := str(res, "host.name")
		if client == "" {
			client = str(res, "service.instance.id")
		}
		if client == "" {
			client = service
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				spans = append(spans, spanOf{sp, client, service})
			}
		}
	}
	slices.SortStableFunc(spans, func(a, b spanOf) int { return cmp.Compare(a.sp.StartTimestamp(), b.sp.StartTimestamp()) })
	var out []Line
	for _, s := range spans {
		st.Spans++
		if l, ok := c.line(s.sp, s.client, s.service); ok {
			out = append(out, l)
		}
	}
	return out
}

func (c *converter) line(sp ptrace.Span, client, service string) (Line, bool) {
	a := sp.Attributes()
	start, end := sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime()
	l := Line{
		Start:       start.UTC().Format(time.RFC3339Nano),
		DurationNS:  max(0, end.Sub(start).Nanoseconds()),
		Client:      client,
		Service:     service,
		Traceparent: "00-" + sp.TraceID().String() + "-" + sp.SpanID().String() + "-01",
	}
	parent := ""
	if !sp.ParentSpanID().IsEmpty() {
		parent = sp.TraceID().String() + "-" + sp.ParentSpanID().String()
	}
	if n, ok := integer(a, "previous-rpc-attempts"); ok {
		// gRPC: a call is one HTTP/2 POST to /service/method, answered 200 with its
		// status in the trailers (the parser maps a code other than OK to its HTTP status)
		l.Method, l.URI, l.Status = "POST", grpcPath(strings.TrimPrefix(sp.Name(), "Attempt.")), 200
		l.GRPCAttempt = &n
		l.GRPCStatus = grpcCode(sp, a)
		l.RequestID = parent
		return l, true
	}
	if sp.Kind() != ptrace.SpanKindClient {
		return l, false
	}
	l.Method = str(a, "http.request.method")
	if l.Method == "" {
		l.Method = str(a, "http.method")
	}
	if l.Method == "" {
		return l, false
	}
	full := str(a, "url.full")
	if full == "" {
		full = str(a, "http.url")
	}
	l.URI, l.Host = "/", str(a, "server.address")
	if u, err := url.Parse(full); err == nil {
		l.URI = u.RequestURI()
		if l.Host == "" {
			l.Host = u.Host
		}
	}
	// no answer (a timeout, a refused connection): read as one the client gave up on
	l.Status, _ = integer(a, "http.response.status_code")
	if l.Status == 0 {
		l.Status, _ = integer(a, "http.status_code")
	}
	resend, _ := integer(a, "http.request.resend_count")
	// A resend that follows the 3xx of the span before it (of its call, or without a
	// call of its client and method) to another URL starts a request of its own.
	k := parent
	if parent == "" {
		k = client + " " + service + " " + l.Method
	} else {
		l.RequestID = parent + "-" + shortHash(l.Method+" "+full)
	}
	if p, ok := c.last.get(k); ok && resend >= 1 && p.resend == resend-1 && p.status/100 == 3 && p.url != full {
		c.redirected.put(k+" "+full, resend)
	}
	c.last.put(k, last{url: full, status: l.Status, resend: resend})
	base, _ := c.redirected.get(k + " " + full)
	n := max(resend-base, 0)
	l.HTTPAttempt = &n
	return l, true
}

// grpcPath is the HTTP/2 path of a gRPC method as an attempt span names it: C++ and
// Java keep the path's slash (shop.Orders/Get), grpc-go writes a dot for it
// (grpc.health.v1.Health.Check), which is put back before the method's name.
func grpcPath(name string) string {
	if !strings.Contains(name, "/") {
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			name = name[:i] + "/" + name[i+1:]
		}
	}
	return "/" + name
}

// grpcCode is an attempt's gRPC status code as a number: rpc.grpc.status_code where the
// instrumentation records it, else from the span's status (OK, or an error whose message
// names its code: "code = Unavailable", "UNAVAILABLE"), else UNKNOWN for an error
// (grpc-go records the status's message alone: its failures read as 500).
func grpcCode(sp ptrace.Span, a pcommon.Map) string {
	if n, ok := integer(a, "rpc.grpc.status_code"); ok {
		return strconv.Itoa(n)
	}
	if sp.Status().Code() != ptrace.StatusCodeError {
		return "0"
	}
	msg := strings.ToUpper(strings.ReplaceAll(sp.Status().Message(), "_", ""))
	for i, name := range parse.GRPCCodes() {
		if i > 0 && strings.Contains(msg, strings.ReplaceAll(name, "_", "")) {
			return strconv.Itoa(i)
		}
	}
	return "2"
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func integer(m pcommon.Map, k string) (int, bool) {
	v, ok := m.Get(k)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return int(v.Int()), true
	case pcommon.ValueTypeDouble:
		return int(v.Double()), true
	case pcommon.ValueTypeStr:
		n, err := strconv.Atoi(strings.TrimSpace(v.Str()))
		return n, err == nil
	}
	return 0, false
}

func shortHash(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}
