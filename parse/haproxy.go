package parse

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultHAProxyCaptures is the order of the request headers the haproxy preset expects
// HAProxy to capture (capture request header … in the frontend, in this order).
var DefaultHAProxyCaptures = []string{"x-retry-attempt", "x-request-id", "idempotency-key", "user-agent"}

// HAProxy returns the format of HAProxy's `option httplog` lines,
//
//	%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq {%hr} {%hs} %{+Q}r
//
// written raw (log stdout format raw) or behind a syslog header ("… haproxy[pid]: ").
// captures names the captured request headers of {%hr} in their order ("-" for one
// retrylens has no use for; nil for DefaultHAProxyCaptures); the first response capture
// of {%hs}, when there is one, is taken as Retry-After. %tr is HAProxy's local time
// without a zone: it is read as UTC. The line's time is %tr + %Ta (when the request
// ended), its request time %Ta, its proxy tries %rc + 1, its upstream backend/server.
func HAProxy(captures []string) (*Format, error) {
	if captures == nil {
		captures = DefaultHAProxyCaptures
	}
	f := &Format{Name: "haproxy", dialect: haproxyDialect{}}
	for _, c := range captures {
		name := strings.ToLower(strings.TrimSpace(c))
		fl, ok := requestHeaders[name]
		switch {
		case name == "host":
			fl = fieldHost
		case name == "-" || name == "":
			fl = fieldIgnore
		case !ok:
			return nil, fmt.Errorf("capture %q: want one of host, %s or - for a header to skip", c, strings.Join(sortedKeys(requestHeaders), ", "))
		}
		f.captures = append(f.captures, fl)
	}
	return f, nil
}

func (f *Format) parseHAProxy(r *Record, st *state, s string) *Error {
	i := 0
	// A syslog header, "Nov 29 10:00:00 host haproxy[123]: ", ends before the client.
	if h := strings.Index(s, "]: "); h >= 0 && h < strings.Index(s, " [") {
		i = h + 3
	}
	// %ci:%cp [%tr]
	j := strings.Index(s[i:], " [")
	if j < 0 {
		return errAt(i, ErrLiteral, "want \"client:port [\", found %s", excerpt(s, i, 24))
	}
	if addr := s[i : i+j]; addr != "" && addr != "-" {
		if k := strings.LastIndexByte(addr, ':'); k > 0 {
			addr = addr[:k]
		}
		r.RemoteAddr = validUTF8(addr)
	}
	i += j + 2
	const trLen = len("06/Feb/2009:12:14:14.655")
	if len(s) < i+trLen+2 || s[i+trLen] != ']' || s[i+trLen+1] != ' ' {
		return errAt(i, ErrBadTime, "want [%%tr] like [29/Nov/2026:10:00:00.123], found %s", excerpt(s, i, 26))
	}
	start, ok := parseHAProxyTime(s[i : i+trLen])
	if !ok {
		return errAt(i, ErrBadTime, "want %%tr like 29/Nov/2026:10:00:00.123, found %s", excerpt(s, i, 26))
	}
	i += trLen + 2
	// The space-separated fields up to the captures or the request.
	var fields [9]string
	for k := range fields {
		end := strings.IndexByte(s[i:], ' ')
		if end < 0 {
			return errAt(i, ErrLiteral, "want %d more space-separated fields, found %s", len(fields)-k, excerpt(s, i, 24))
		}
		fields[k] = s[i : i+end]
		i += end + 1
	}
	// fields: %ft %b/%s timers status bytes %CC %CS %tsc conns ; then queues
	if end := strings.IndexByte(s[i:], ' '); end >= 0 {
		i += end + 1 // %sq/%bq
	} else {
		return errAt(i, ErrLiteral, "want the queues %%sq/%%bq, found %s", excerpt(s, i, 24))
	}
	r.UpstreamAddr = validUTF8(fields[1])
	timers := strings.Split(fields[2], "/")
	if len(timers) != 5 {
		return errAt(i, ErrBadNumber, "want timers %%TR/%%Tw/%%Tc/%%Tr/%%Ta, found %s", excerpt(fields[2], 0, 32))
	}
	ta, ok := atoi(strings.TrimPrefix(timers[4], "+"))
	if ok {
		r.RequestTime = float64(ta) / 1e3
		start = start.Add(time.Duration(ta) * time.Millisecond)
	}
	r.Time = start
	switch status := fields[3]; status {
	case "-1":
		r.Status = 0 // no answer reached the client
	default:
		n, ok := atoi(status)
		if !ok || n > 999 {
			return errAt(i, ErrBadStatus, "want a 3-digit status, found %s", excerpt(status, 0, 16))
		}
		r.Status = n
	}
	if n, ok := atoi(strings.TrimPrefix(fields[4], "+")); ok {
		r.Bytes = int64(n)
	}
	if conns := strings.Split(fields[8], "/"); len(conns) == 5 {
		if n, ok := atoi(strings.TrimPrefix(conns[4], "+")); ok {
			st.tries = n + 1
		}
	}
	// {%hr} {%hs}: captured request, then response headers, '|'-separated.
	for block := 0; i < len(s) && s[i] == '{'; block++ {
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return errAt(i, ErrLiteral, "unterminated capture block, found %s", excerpt(s, i, 24))
		}
		body := s[i+1 : i+end]
		i += end + 1
		if i < len(s) && s[i] == ' ' {
			i++
		}
		for k, v := range strings.Split(body, "|") {
			if v == "" {
				continue
			}
			var fl field
			switch {
			case block == 0 && k < len(f.captures):
				fl = f.captures[k]
			case block == 1 && k == 0:
				fl = fieldRetryAfter
			}
			if fl == fieldIgnore {
				continue
			}
			if err := set(r, st, fl, unescapeHAProxy(v), i); err != nil {
				return err
			}
		}
	}
	// %{+Q}r: the request line in quotes, to the end of the line.
	if i >= len(s) || s[i] != '"' || len(s) < i+2 || s[len(s)-1] != '"' {
		return errAt(i, ErrLiteral, "want the quoted request line, found %s", excerpt(s, i, 24))
	}
	if req := s[i+1 : len(s)-1]; req != "" && req != "<BADREQ>" {
		if err := set(r, st, fieldRequest, unescapeHAProxy(req), i+1); err != nil {
			return err
		}
	}
	return nil
}

// parseHAProxyTime reads %tr, "29/Nov/2026:10:00:00.123", as UTC.
func parseHAProxyTime(s string) (time.Time, bool) {
	t, ok := parseTimeLocal(s[:20] + " +0000")
	if !ok || s[20] != '.' {
		return time.Time{}, false
	}
	msec, ok := atoi(s[21:24])
	if !ok {
		return time.Time{}, false
	}
	return t.Add(time.Duration(msec) * time.Millisecond), true
}

// unescapeHAProxy decodes HAProxy's #XX escapes (quotes, braces, pipes, control bytes in
// captures and the request line); the result is valid UTF-8.
func unescapeHAProxy(v string) string {
	if strings.IndexByte(v, '#') < 0 {
		return validUTF8(v)
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '#' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]) {
			b.WriteByte(unhex(v[i+1])<<4 | unhex(v[i+2]))
			i += 2
			continue
		}
		b.WriteByte(v[i])
	}
	return validUTF8(b.String())
}

func validUTF8(v string) string {
	if isASCII(v) || utf8.ValidString(v) {
		return v
	}
	return escapeInvalid(v)
}

func sortedKeys(m map[string]field) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
