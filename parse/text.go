package parse

import (
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The text dialect: nginx log_format strings, compiled into steps (format.go).

func (f *Format) parseText(r *Record, st *state, s string) *Error {
	if f.plainLits && !forceGeneral {
		if f.parseClean(r, st, s) {
			return nil
		}
		r.reset() // something needs decoding, or an error to explain: start again
		*st = state{}
	}
	return f.parseGeneral(r, st, s, plain(s))
}

// parseClean is parseText for a line none of whose values needs decoding (ASCII, no
// backslash), which most are: every value ends at the first closing literal, and the
// check that the line is clean rides along the scans. It reports false, leaving r and st
// half set, when the line is not clean or does not parse.
func (f *Format) parseClean(r *Record, st *state, s string) bool {
	if !strings.HasPrefix(s, f.lead) {
		return false
	}
	var seen uint64 // every word scanned, through bad (see plain): the line is clean while no high bit is set
	i := len(f.lead)
	steps := f.steps[:len(f.steps)-1]
	for k := range steps {
		sp := &steps[k]
		end, w := findLit(s, i+dashed(sp, s, i), &sp.match)
		seen |= w
		if end < 0 {
			return false
		}
		if sp.list {
			// the items past the first were not scanned for what needs decoding
			e := end
			if end = listEnd(s, end); !sp.match.at(s, end) || !plain(s[e:end]) {
				return false
			}
		}
		if v := s[i:end]; sp.field != fieldIgnore && len(v) > 0 && (len(v) > 1 || v[0] != '-') {
			if sp.str != 0 { // a string field of the Record, stored as is
				*(*string)(unsafe.Add(unsafe.Pointer(r), sp.str)) = v
			} else if set(r, st, sp.field, v, i) != nil {
				return false
			}
		}
		i = end + len(sp.lit)
	}
	sp := &f.steps[len(f.steps)-1]
	end := len(s) - len(sp.lit)
	if seen&highs != 0 || end < i || !strings.HasSuffix(s, sp.lit) || !plain(s[i:end]) {
		return false
	}
	if f.nextField(sp, s[i:end]) >= 0 {
		return false // more fields than the format's: parseGeneral says so
	}
	return f.value(r, st, sp, s, i, end, true) == nil
}

// parseGeneral parses any line; clean says that no value needs decoding.
func (f *Format) parseGeneral(r *Record, st *state, s string, clean bool) *Error {
	if !strings.HasPrefix(s, f.lead) {
		return errAt(0, ErrLiteral, "want %q at the start, found %s", f.lead, excerpt(s, 0, 20))
	}
	i := len(f.lead)
	steps := f.steps[:len(f.steps)-1]
	for k := range steps {
		sp := &steps[k]
		var end int
		switch {
		case clean:
			// No backslash in the line: a quoted value ends at the first closing literal
			// too (nginx writes a quote inside a value as \x22).
			end, _ = findLit(s, i+dashed(sp, s, i), &sp.match)
		case sp.quoted:
			end = quotedEnd(s, i, &sp.match)
		default:
			end = indexFrom(s, i+dashed(sp, s, i), &sp.match)
		}
		if end >= 0 && sp.list {
			if end = listEnd(s, end); !sp.match.at(s, end) {
				end = -1
			}
		}
		if end < 0 {
			return errAt(i, ErrLiteral, "want %q after $%s, found %s", sp.lit, sp.name, excerpt(s, i, 24))
		}
		// As value does, inline: the loop is the parser's hot path.
		if v := s[i:end]; sp.field != fieldIgnore && len(v) > 0 && (len(v) > 1 || v[0] != '-') {
			if !clean {
				v = f.unescape(v)
			}
			if sp.str != 0 { // a string field of the Record, stored as is
				*(*string)(unsafe.Add(unsafe.Pointer(r), sp.str)) = v
			} else if err := set(r, st, sp.field, v, i); err != nil {
				return err
			}
		}
		i = end + len(sp.lit)
	}
	// The last variable: up to the closing literal, which ends the line. Everything up to
	// it is the value, so a stray quote inside it cannot cut the line short.
	sp := &f.steps[len(f.steps)-1]
	end := len(s) - len(sp.lit)
	switch {
	case end >= i && strings.HasSuffix(s, sp.lit) && f.nextField(sp, s[i:end]) >= 0:
		// A log_format longer than this one, whose next field reading it as part of the
		// last value would hide (an attempt header read as no number).
		k := i + f.nextField(sp, s[i:end])
		return errAt(k+1, ErrTrailing, "found %s: the line has fields after $%s, a longer log_format than this one", excerpt(s, k+1, 24), sp.name)
	case end >= i && strings.HasSuffix(s, sp.lit):
	case sp.quoted && sp.lit == `"` && strings.IndexByte(s[i:], '"') < 0:
		// A cut-off last quoted value (real logs have them: a user agent that lost its
		// closing quote) still tells everything else about the request.
		end = len(s)
	default:
		return errAt(i, ErrLiteral, "want %q after $%s, found %s", sp.lit, sp.name, excerpt(s, i, 24))
	}
	return f.value(r, st, sp, s, i, end, clean)
}

// nextField returns where, in v, the value of the last step sp, a field of a longer
// log_format begins (at the space before its name=), or -1: after a closing quote nginx
// would have escaped inside the value ('" name=', not for escape=none), or, for a value
// not quoted and ending the line, after a space ('1795960800.500 tenant=').
func (f *Format) nextField(sp *step, v string) int {
	switch {
	case sp.quoted && sp.lit == `"` && f.escape != EscapeNone:
		for o := 0; o < len(v); {
			k := foldedField(v[o:])
			if k < 0 {
				break
			}
			if k += o; k == 0 || v[k-1] != '\\' { // Apache's \" is a quote inside the value
				return k + 1
			}
			o = k + 1
		}
	case !sp.quoted && sp.lit == "":
		if k := strings.IndexByte(v, ' '); k >= 0 && foldedField(`"`+v[k:]) == 0 {
			return k
		}
	}
	return -1
}

// dashed is 1 when the value of step sp at s[i] starts with the '-' its literal starts
// with (step.dash): the search for the literal starts after it.
func dashed(sp *step, s string, i int) int {
	if sp.dash && i < len(s) && s[i] == '-' {
		return 1
	}
	return 0
}

// value stores the value s[i:end] of step sp: "-" and "" are absent.
func (f *Format) value(r *Record, st *state, sp *step, s string, i, end int, clean bool) *Error {
	v := s[i:end]
	if sp.field == fieldIgnore || len(v) == 0 || len(v) == 1 && v[0] == '-' {
		return nil
	}
	if !clean {
		v = f.unescape(v)
	}
	return set(r, st, sp.field, v, i)
}

// forceGeneral makes parseText take its general path for every line: for FuzzCleanPath.
var forceGeneral = false

// swarScan is how many bytes indexFrom and indexByteFrom read eight at a time before
// they hand over to the vectorised search: most values are short (a status, a byte count,
// a time), and starting the vectorised search costs more than reading them.
const swarScan = 64

// indexFrom returns the index of the first lit in s at or after i, or -1.
func indexFrom(s string, i int, lit *literal) int {
	for {
		j := indexByteFrom(s, i, lit.s[0])
		if j < 0 || len(lit.s) == 1 || lit.at(s, j) {
			return j
		}
		i = j + 1
	}
}

// literal is the text between two variables, with its first eight bytes ready to compare
// in one load.
type literal struct {
	s          string
	word, mask uint64 // little-endian: the first min(8, len(s)) bytes, and which bytes count
	first      uint64 // the first byte in every byte of a word
}

func newLiteral(s string) literal {
	l := literal{s: s}
	if s != "" {
		l.first = uint64(s[0]) * 0x0101010101010101
	}
	for k := 0; k < len(s) && k < 8; k++ {
		l.word |= uint64(s[k]) << (8 * k)
		l.mask |= 0xff << (8 * k)
	}
	return l
}

// at reports whether s[j:] starts with the literal.
func (l *literal) at(s string, j int) bool {
	if j >= 0 && j+8 <= len(s) {
		if load64(s, j)&l.mask != l.word {
			return false
		}
		return len(l.s) <= 8 || hasLit(s, j+8, l.s[8:])
	}
	return hasLit(s, j, l.s)
}

// load64 reads the eight bytes of s at i (0 <= i, i+8 <= len(s): the caller checks) as a
// little-endian word, whatever the machine: byte i is the lowest.
func load64(s string, i int) uint64 {
	w := *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i)) // unaligned: fine where Go runs
	if bigEndian {
		w = bits.ReverseBytes64(w)
	}
	return w
}

// findLit returns the index of the first lit in s at or after i, or -1: indexFrom in one
// loop, for the parser's hot path. It reads eight bytes at a time, and checks each byte
// flagged as lit's first against the whole literal (a flag above a true match can be
// false; the check drops it).
//
// It also returns, ORed through bad, every word it read: the caller learns whether the
// bytes it went over hold a backslash or a non-ASCII byte without reading them again.
func findLit(s string, i int, lit *literal) (int, uint64) {
	var seen uint64
	for ; i >= 0 && i+8 <= len(s); i += 8 {
		w := load64(s, i)
		seen |= bad(w)
		x := w ^ lit.first
		for t := (x - ones) &^ x & highs; t != 0; t &= t - 1 {
			j := i + bits.TrailingZeros64(t)/8 // load64 puts byte i lowest on every machine
			if j+8 <= len(s) && len(lit.s) <= 8 {
				if load64(s, j)&lit.mask == lit.word {
					return j, seen
				}
			} else if lit.at(s, j) {
				return j, seen
			}
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] == '\\' {
			seen |= highs
		}
		if s[i] == lit.s[0] && lit.at(s, i) {
			return i, seen
		}
	}
	return -1, seen
}

// hasLit reports whether s[j:] starts with lit, byte by byte.
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

// indexByteFrom returns the index of the first c in s at or after i, or -1. It reads
// eight bytes at a time (a zero byte of w^cccccccc is a c), then hands long values over
// to strings.IndexByte.
func indexByteFrom(s string, i int, c byte) int {
	cs := uint64(c) * ones
	stop := min(len(s), i+swarScan)
	for ; i >= 0 && i+8 <= stop; i += 8 {
		x := load64(s, i) ^ cs
		// The lowest flagged byte is a zero byte of x; only bytes above it can be false.
		if t := (x - ones) &^ x & highs; t != 0 {
			return i + bits.TrailingZeros64(t)/8
		}
	}
	for ; i < stop; i++ {
		if s[i] == c {
			return i
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
func quotedEnd(s string, i int, lit *literal) int {
	if i+1 < len(s) && s[i] == '-' && s[i+1] == '"' && lit.at(s, i+1) {
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
		if bs%2 == 0 && lit.at(s, q) {
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
	i := 0
	p := unsafe.Pointer(unsafe.StringData(s))
	for ; i+32 <= len(s); i += 32 { // unaligned loads: fine on amd64 and arm64
		w0 := *(*uint64)(unsafe.Add(p, i))
		w1 := *(*uint64)(unsafe.Add(p, i+8))
		w2 := *(*uint64)(unsafe.Add(p, i+16))
		w3 := *(*uint64)(unsafe.Add(p, i+24))
		if (bad(w0)|bad(w1)|bad(w2)|bad(w3))&highs != 0 {
			return false
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if bad(*(*uint64)(unsafe.Add(p, i)))&highs != 0 {
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

const ones, highs = 0x0101010101010101, 0x8080808080808080

// bad sets the high bit of the bytes of w that are not ASCII, and of the backslashes (a
// zero byte of w^5c5c…; bytes above a backslash may be flagged too): bad(w)&highs is not
// zero exactly when w holds a non-ASCII byte or a backslash.
func bad(w uint64) uint64 {
	const backslashes = 0x5c5c5c5c5c5c5c5c
	x := w ^ backslashes
	return w | (x-ones)&^x
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
