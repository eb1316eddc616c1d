package parse

import (
	"strings"
	"unicode/utf8"
)

// ParseLine parses one line (without or with its trailing newline). It allocates one
// string for the line; the Record's strings share it unless a value had to be unescaped.
// A line that does not match returns a zero Record and an *Error with Line 0.
func (f *Format) ParseLine(line []byte) (Record, error) {
	var r Record
	if err := f.parse(&r, string(line)); err != nil {
		return Record{}, err
	}
	return r, nil
}

func (f *Format) parse(r *Record, s string) *Error {
	s = strings.TrimRight(s, "\r\n")
	r.reset()
	if strings.TrimSpace(s) == "" {
		return errAt(0, ErrEmptyLine, "")
	}
	var st state
	var err *Error
	switch {
	case f.json:
		err = f.parseJSON(r, &st, s)
	case f.haproxy:
		err = f.parseHAProxy(r, &st, s)
	default:
		err = f.parseText(r, &st, s)
	}
	if err != nil {
		return err
	}
	finish(r, &st, f.only)
	return nil
}

func (f *Format) parseText(r *Record, st *state, s string) *Error {
	if !strings.HasPrefix(s, f.lead) {
		return errAt(0, ErrLiteral, "want %q at the start, found %s", f.lead, excerpt(s, 0, 20))
	}
	i := len(f.lead)
	last := len(f.steps) - 1
	for k := range f.steps {
		sp := &f.steps[k]
		var end int
		switch {
		case sp.lit == "":
			end = len(s)
		case k == last:
			// The closing literal ends the line: take everything up to it, so a stray quote
			// inside the last value cannot cut the line short.
			end = len(s) - len(sp.lit)
			switch {
			case end >= i && strings.HasSuffix(s, sp.lit):
			case sp.quoted && sp.lit == `"` && strings.IndexByte(s[i:], '"') < 0:
				// A cut-off last quoted value (real logs have them: a user agent that
				// lost its closing quote) still tells everything else about the request.
				end, sp = len(s), &step{name: sp.name, field: sp.field}
			default:
				end = -1
			}
		case sp.quoted:
			end = quotedEnd(s, i, sp.lit)
		default:
			end = strings.Index(s[i:], sp.lit)
			if end >= 0 {
				end += i
			}
		}
		if end < 0 {
			return errAt(i, ErrLiteral, "want %q after $%s, found %s", sp.lit, sp.name, excerpt(s, i, 24))
		}
		if v := s[i:end]; sp.field != fieldIgnore && v != "-" && v != "" {
			if err := set(r, st, sp.field, f.unescape(v), i); err != nil {
				return err
			}
		}
		i = end + len(sp.lit)
	}
	if i != len(s) {
		return errAt(i, ErrTrailing, "found %s", excerpt(s, i, 24))
	}
	return nil
}

// quotedEnd finds where a quoted value ends: the first '"' not escaped by a backslash
// (nginx writes \x22, Apache and escape=json write \") that starts lit.
func quotedEnd(s string, i int, lit string) int {
	for j := i; j < len(s); {
		q := strings.IndexByte(s[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		bs := 0
		for k := q - 1; k >= i && s[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 && strings.HasPrefix(s[q:], lit) {
			return q
		}
		j = q + 1
	}
	return -1
}

// unescape decodes a value as the format's escaping wrote it. The result is valid UTF-8.
func (f *Format) unescape(v string) string {
	if strings.IndexByte(v, '\\') < 0 {
		if isASCII(v) || utf8.ValidString(v) {
			return v
		}
		return escapeInvalid(v)
	}
	switch f.escape {
	case EscapeJSON:
		if d, ok := unescapeJSON(v); ok {
			return d
		}
		return escapeInvalid(v)
	case EscapeNone:
		if utf8.ValidString(v) {
			return v
		}
		return escapeInvalid(v)
	}
	d := unescapeNginx(v)
	if utf8.ValidString(d) {
		return d
	}
	// Bytes that are not UTF-8 (a Latin-1 referer, binary junk): keep nginx's own
	// escaped spelling, which is ASCII, rather than lose them.
	if utf8.ValidString(v) {
		return v
	}
	return escapeInvalid(v)
}

// unescapeNginx decodes nginx's \xXX and Apache's \" and \\.
func unescapeNginx(v string) string {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 >= len(v) {
			b.WriteByte(c)
			continue
		}
		switch n := v[i+1]; {
		case n == 'x' && i+3 < len(v) && isHex(v[i+2]) && isHex(v[i+3]):
			b.WriteByte(unhex(v[i+2])<<4 | unhex(v[i+3]))
			i += 3
		case n == '"' || n == '\\':
			b.WriteByte(n)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// escapeInvalid replaces bytes that are not part of valid UTF-8 by \xXX.
func escapeInvalid(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[v[i]>>4])
			b.WriteByte(hexDigits[v[i]&15])
			i++
			continue
		}
		b.WriteString(v[i : i+n])
		i += n
	}
	return b.String()
}

const hexDigits = "0123456789abcdef"

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
