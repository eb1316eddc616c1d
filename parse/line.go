package parse

import (
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
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
	if st.timeLocal != "" {
		// A better time ($msec, $time_iso8601) wins; $time_local must still look right.
		var t time.Time
		ok := (st.haveMsec || st.haveISO) && timeLocalShape(st.timeLocal)
		if !ok {
			t, ok = parseTimeLocal(st.timeLocal)
		}
		if !ok {
			hint := ""
			if _, iso := parseTimeISO(st.timeLocal); iso {
				hint = ": this looks like $time_iso8601, put that in the format instead"
			}
			return errAt(st.timeLocalPos, ErrBadTime, "want $time_local like 10/Oct/2026:13:55:36 +0000, found %s%s", excerpt(st.timeLocal, 0, 32), hint)
		}
		if !st.haveMsec && !st.haveISO {
			r.Time = t
		}
	}
	finish(r, &st, f.only)
	return nil
}

func (f *Format) parseText(r *Record, st *state, s string) *Error {
	clean := plain(s) // no value of the line needs decoding
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
			end = indexFrom(s, i, sp.lit)
		}
		if end < 0 {
			return errAt(i, ErrLiteral, "want %q after $%s, found %s", sp.lit, sp.name, excerpt(s, i, 24))
		}
		if v := s[i:end]; sp.field != fieldIgnore && v != "-" && v != "" {
			if !clean {
				v = f.unescape(v)
			}
			if err := set(r, st, sp.field, v, i); err != nil {
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

// shortScan is how many bytes indexFrom and quotedEnd look at one by one before they
// hand over to the vectorised search: most values are short (a status, a byte count, a
// time), and starting the vectorised search costs more than reading them.
const shortScan = 16

// indexFrom returns the index of the first lit in s at or after i, or -1.
func indexFrom(s string, i int, lit string) int {
	c := lit[0]
	stop := min(len(s), i+shortScan)
	for j, b := range []byte(s[i:stop]) { // no copy: the compiler reads the string in place
		if b == c && (len(lit) == 1 || hasLit(s, i+j, lit)) {
			return i + j
		}
	}
	if stop == len(s) {
		return -1
	}
	if k := strings.Index(s[stop:], lit); k >= 0 {
		return stop + k
	}
	return -1
}

// hasLit reports whether s[j:] starts with lit, byte by byte: literals are a few bytes
// long, shorter than it takes to set up a memory compare.
func hasLit(s string, j int, lit string) bool {
	if len(s)-j < len(lit) {
		return false
	}
	for k := 0; k < len(lit); k++ {
		if s[j+k] != lit[k] {
			return false
		}
	}
	return true
}

// indexByteFrom returns the index of the first c in s at or after i, or -1.
func indexByteFrom(s string, i int, c byte) int {
	stop := min(len(s), i+shortScan)
	for j := 0; j < stop-i; j++ {
		if s[i+j] == c {
			return i + j
		}
	}
	if stop == len(s) {
		return -1
	}
	if k := strings.IndexByte(s[stop:], c); k >= 0 {
		return stop + k
	}
	return -1
}

// quotedEnd finds where a quoted value ends: the first '"' not escaped by a backslash
// (nginx writes \x22, Apache and escape=json write \") that starts lit.
func quotedEnd(s string, i int, lit string) int {
	if i+1 < len(s) && s[i] == '-' && s[i+1] == '"' && hasLit(s, i+1, lit) {
		return i + 1 // "-": the most common quoted value
	}
	for j := i; j < len(s); {
		q := indexByteFrom(s, j, '"')
		if q < 0 {
			return -1
		}
		bs := 0
		for k := q - 1; k >= i && s[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 && hasLit(s, q, lit) {
			return q
		}
		j = q + 1
	}
	return -1
}

// unescape decodes a value as the format's escaping wrote it. The result is valid UTF-8.
func (f *Format) unescape(v string) string {
	if plain(v) {
		return v
	}
	if strings.IndexByte(v, '\\') < 0 {
		if utf8.ValidString(v) {
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

// plain reports whether s is ASCII without a backslash: nothing to decode. Most values
// are; it reads eight bytes at a time.
func plain(s string) bool {
	const ones, highs, backslashes = 0x0101010101010101, 0x8080808080808080, 0x5c5c5c5c5c5c5c5c
	i := 0
	p := unsafe.Pointer(unsafe.StringData(s))
	for ; i+8 <= len(s); i += 8 {
		w := *(*uint64)(unsafe.Add(p, i)) // unaligned loads: fine on amd64 and arm64
		x := w ^ backslashes              // a zero byte where w has a backslash
		if (w|((x-ones)&^x))&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] == '\\' {
			return false
		}
	}
	return true
}

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
