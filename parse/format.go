package parse

import (
	"fmt"
	"slices"
	"strings"
)

// Escape is how nginx escaped variable values in a text log_format (its escape= parameter).
type Escape uint8

const (
	EscapeDefault Escape = iota // "\xXX" for '"', '\\', control and non-ASCII bytes
	EscapeJSON                  // JSON string escapes
	EscapeNone                  // nothing escaped
)

// ParseEscape reads nginx's escape= parameter value.
func ParseEscape(s string) (Escape, error) {
	switch s {
	case "", "default":
		return EscapeDefault, nil
	case "json":
		return EscapeJSON, nil
	case "none":
		return EscapeNone, nil
	}
	return 0, fmt.Errorf("unknown escape=%q: want default, json or none", s)
}

// Format is a compiled log format. It is immutable and safe for concurrent use.
type Format struct {
	Name   string // preset name, or "nginx" for a compiled log_format
	Source string // the log_format text it was compiled from; empty for JSON

	dialect  dialect // how lines read and are written: text, JSON or HAProxy
	escape   Escape
	keys     map[string]field // JSON: key path -> field
	foldKeys bool             // JSON: match keys case-insensitively (header names)
	captures []field          // HAProxy: the captured request headers, in order
	lead     string           // literal text before the first variable
	steps    []step
	only     int // 1 + the index in attemptSources of the one attempt header to read; 0 for all

	plainLits bool // the text between variables is ASCII without a backslash: parseClean applies
}

// logs reports whether f reads field fl from its lines.
func (f *Format) logs(fl field) bool {
	for _, s := range f.steps {
		if s.field == fl {
			return true
		}
	}
	for _, v := range f.keys {
		if v == fl {
			return true
		}
	}
	return slices.Contains(f.captures, fl)
}

// AttemptSources are the attempt headers retrylens reads, in the order docs/formats.md gives.
func AttemptSources() []string { return append([]string(nil), attemptSources[:]...) }

// OnlyAttemptHeader returns a copy of f that takes attempt numbers from the named header
// alone (--attempt-header), ignoring the others.
func (f *Format) OnlyAttemptHeader(name string) (*Format, error) {
	for i, s := range attemptSources {
		if strings.EqualFold(s, name) {
			g := *f
			g.only = i + 1
			return &g, nil
		}
	}
	return nil, fmt.Errorf("unknown attempt header %q: want one of %s", name, strings.Join(attemptSources[:], ", "))
}

type step struct {
	name   string // variable name, for messages
	field  field
	lit    string // literal text after the variable; "" only for the last variable
	match  literal
	str    uintptr // the offset in Record of the string the value is stored in as is; 0 for set
	quoted bool    // the value sits between '"'s: scan for an unescaped quote
	// list: an unquoted upstream variable before a space, which nginx writes as a list
	// with ", " between tries and " : " between internal redirects (ingress-nginx's
	// default format): its value goes on past those (listEnd)
	list bool
	// dash: an unquoted variable before a literal that starts with '-': a value that
	// starts with '-' (nginx's "-" for an absent value) is that, not an empty value
	// before the literal ("$a-$b" logs "--x" for an absent $a)
	dash bool
}

// listVariables are the variables nginx writes as a list of the upstream tries.
var listVariables = map[string]bool{
	"upstream_addr": true, "upstream_status": true, "upstream_response_time": true, "upstream_connect_time": true,
	"upstream_header_time": true, "upstream_response_length": true, "upstream_bytes_received": true, "upstream_bytes_sent": true,
}

// listEnd is where an unquoted list value ends, given that its first item ends at end
// (before a space): past each ", " and " : " that joins another item.
func listEnd(s string, end int) int {
	for {
		switch {
		case end > 0 && s[end-1] == ',' && end+1 < len(s):
			end++
		case strings.HasPrefix(s[end:], " : ") && end+3 < len(s):
			end += 3
		default:
			return end
		}
		next := strings.IndexByte(s[end:], ' ')
		if next < 0 {
			return len(s)
		}
		end += next
	}
}

// Preset formats by name.
const (
	Combined  = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	RetryTail = ` rt=$request_time urt="$upstream_response_time" us="$upstream_status" ra="$http_x_retry_attempt" rr="$http_x_retry_reason" rid="$http_x_request_id" ik="$http_idempotency_key" retry_after="$sent_http_retry_after" msec=$msec`
	Retry     = Combined + RetryTail
	// SDKTail is what the retry preset gains to read the SDKs' own headers: the AWS SDKs'
	// attempt (with their cap) and invocation id, the Stainless clients' retry count.
	SDKTail  = ` amz="$http_amz_sdk_request" inv="$http_amz_sdk_invocation_id" sc="$http_x_stainless_retry_count"`
	RetrySDK = Retry + SDKTail
	// FullTail logs the rest of what the SDKs read in headers: the error code answered
	// (x-amzn-ErrorType), which tells a 400 ThrottlingException from a 400 that is the
	// client's fault; the operation (X-Amz-Target), which tells a GetItem (a read, though a
	// POST) from a PutItem; and retry-after-ms, which the Stainless clients wait for first.
	FullTail     = ` ec="$upstream_http_x_amzn_errortype" op="$http_x_amz_target" ram="$sent_http_retry_after_ms"`
	RetrySDKFull = RetrySDK + FullTail
)

// caddyKeys maps the paths of Caddy's default JSON access log (http.log.access) to fields.
// Header names are matched case-insensitively; Caddy writes them canonically.
var caddyKeys = map[string]field{
	"ts":                            fieldMsec, // float seconds since the epoch, when the request ended
	"duration":                      fieldRequestTime,
	"status":                        fieldStatus,
	"size":                          fieldBytes,
	"request.remote_ip":             fieldRemoteAddr,
	"request.client_ip":             fieldRemoteAddr,
	"request.proto":                 fieldProtocol,
	"request.method":                fieldMethod,
	"request.host":                  fieldHost,
	"request.uri":                   fieldURI,
	"resp_headers.retry-after":      fieldRetryAfter,
	"resp_headers.retry-after-ms":   fieldRetryAfterMs,
	"resp_headers.x-amzn-errortype": fieldErrorCode,
	"resp_headers.grpc-status":      fieldGRPCStatus,
}

// JSON reports whether the format reads JSON objects (its fields are keys), not text.
func (f *Format) JSON() bool { _, ok := f.dialect.(jsonDialect); return ok }

func mustCompile(name, src string, esc Escape) *Format {
	f, err := Compile(src, esc)
	if err != nil {
		panic(err)
	}
	f.Name = name
	return f
}

// Compile turns an nginx log_format string into a Format. It accepts the format as nginx
// has it: the bare string, the quoted pieces from nginx.conf ('…' '…'), or the whole
// directive (log_format NAME [escape=json] '…';), in which case an escape= parameter there
// overrides esc. Every $variable is matched; those retrylens has no use for are dropped.
func Compile(src string, esc Escape) (*Format, error) {
	body, dirEsc, err := unquoteDirective(src)
	if err != nil {
		return nil, err
	}
	if dirEsc != nil {
		esc = *dirEsc
	}
	f := &Format{Name: "nginx", Source: body, escape: esc, dialect: textDialect{}}
	var lit strings.Builder
	var cur *step
	flush := func() {
		if cur == nil {
			f.lead = lit.String()
		} else {
			cur.lit = lit.String()
		}
		lit.Reset()
	}
	for i := 0; i < len(body); {
		c := body[i]
		if c != '$' {
			lit.WriteByte(c)
			i++
			continue
		}
		name, n := varName(body[i+1:])
		if name == "" {
			lit.WriteByte(c)
			i++
			continue
		}
		if cur != nil && lit.Len() == 0 {
			return nil, fmt.Errorf("log_format: $%s follows $%s with no text between them, so no line can tell where one ends", name, cur.name)
		}
		flush()
		f.steps = append(f.steps, step{name: name, field: variables[name]})
		cur = &f.steps[len(f.steps)-1]
		i += 1 + n
	}
	flush()
	if len(f.steps) == 0 {
		return nil, fmt.Errorf("log_format %q has no $variables", body)
	}
	prev := f.lead
	f.plainLits = plain(f.lead)
	for i := range f.steps {
		s := &f.steps[i]
		s.quoted = strings.HasSuffix(prev, `"`) && strings.HasPrefix(s.lit, `"`)
		s.list = !s.quoted && listVariables[s.name] && strings.HasPrefix(s.lit, " ")
		s.dash = !s.quoted && strings.HasPrefix(s.lit, "-")
		s.match = newLiteral(s.lit)
		f.plainLits = f.plainLits && plain(s.lit)
		s.str = stringFields[s.field]
		prev = s.lit
	}
	return f, nil
}

// varName reads a variable name after '$': letters, digits and '_', or "{name}".
func varName(s string) (string, int) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end > 1 {
			return s[1:end], end + 1
		}
		return "", 0
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}

// unquoteDirective strips "log_format NAME [escape=…]" and a final ';', and joins nginx's
// quoted string pieces. A string with no leading quote is taken as the format itself.
func unquoteDirective(src string) (string, *Escape, error) {
	s := strings.TrimSpace(src)
	var esc *Escape
	if rest, ok := strings.CutPrefix(s, "log_format"); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "\t")) {
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			return "", nil, fmt.Errorf("log_format directive without a format string")
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimSpace(rest[len(fields[0]):]) // the format's name
		if v, ok := strings.CutPrefix(fields[1], "escape="); ok {
			e, err := ParseEscape(v)
			if err != nil {
				return "", nil, err
			}
			esc = &e
			rest = strings.TrimSpace(rest[len(fields[1]):])
		}
		s = strings.TrimSuffix(strings.TrimSpace(rest), ";")
		s = strings.TrimSpace(s)
	}
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return s, esc, nil
	}
	var b strings.Builder
	for len(s) > 0 {
		q := s[0]
		if q != '\'' && q != '"' {
			return "", nil, fmt.Errorf("log_format: unexpected %q between quoted pieces", excerpt(s, 0, 20))
		}
		i := 1
		for ; i < len(s) && s[i] != q; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", nil, fmt.Errorf("log_format: unterminated %c quote", q)
		}
		s = strings.TrimSpace(s[i+1:])
	}
	return b.String(), esc, nil
}
