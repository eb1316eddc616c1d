package parse

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonMaxDepth bounds nesting, so that hostile input cannot exhaust the stack.
const jsonMaxDepth = 16

// parseJSON reads one JSON object per line. Keys are looked up in the format's key map:
// nginx variable names for nginx-json, dotted lower-case paths such as
// "request.headers.x-retry-attempt" for Caddy. Values may be strings, numbers, booleans,
// null, objects (walked) or arrays (the first element is taken when the path is wanted:
// Caddy logs each header as a list).
func (f *Format) parseJSON(r *Record, st *state, s string) *Error {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return errAt(i, ErrBadJSON, "want '{', found %s", excerpt(s, i, 16))
	}
	var path [128]byte
	i, err := f.jsonObject(r, st, s, i, path[:0], 0)
	if err != nil {
		return err
	}
	if i = skipSpace(s, i); i != len(s) {
		return errAt(i, ErrTrailing, "found %s", excerpt(s, i, 24))
	}
	return nil
}

// jsonObject walks the object at s[i] == '{' and returns the index after it.
func (f *Format) jsonObject(r *Record, st *state, s string, i int, path []byte, depth int) (int, *Error) {
	if depth > jsonMaxDepth {
		return i, errAt(i, ErrBadJSON, "nested deeper than %d", jsonMaxDepth)
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, errAt(i, ErrBadJSON, "want a quoted key, found %s", excerpt(s, i, 16))
		}
		kend := jsonStringEnd(s, i+1)
		if kend < 0 {
			return i, errAt(i, ErrBadJSON, "unterminated key")
		}
		key := s[i+1 : kend]
		i = skipSpace(s, kend+1)
		if i >= len(s) || s[i] != ':' {
			return i, errAt(i, ErrBadJSON, "want ':' after key %q, found %s", key, excerpt(s, i, 16))
		}
		i = skipSpace(s, i+1)
		p := path
		if len(p) > 0 {
			p = append(p, '.')
		}
		if f.foldKeys {
			for k := 0; k < len(key); k++ {
				c := key[k]
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				p = append(p, c)
			}
		} else {
			p = append(p, key...)
		}
		fl := f.keys[string(p)]
		var err *Error
		if i, err = f.jsonValue(r, st, s, i, p, fl, depth); err != nil {
			return i, err
		}
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
			continue
		}
		if i < len(s) && s[i] == '}' {
			return i + 1, nil
		}
		return i, errAt(i, ErrBadJSON, "want ',' or '}', found %s", excerpt(s, i, 16))
	}
}

// jsonValue reads the value at s[i], stores it in field fl when wanted, and returns the
// index after it.
func (f *Format) jsonValue(r *Record, st *state, s string, i int, path []byte, fl field, depth int) (int, *Error) {
	if i >= len(s) {
		return i, errAt(i, ErrBadJSON, "missing value for %q", path)
	}
	vstart := i
	var val string
	switch s[i] {
	case '{':
		return f.jsonObject(r, st, s, i, path, depth+1)
	case '[':
		// Take the first element for a wanted path; walk the rest only to skip it.
		i = skipSpace(s, i+1)
		first := fl
		if fl == fieldProxyTryList {
			first = fieldIgnore // counted, not read
		}
		k := 0
		for ; i < len(s) && s[i] != ']'; k++ {
			var err *Error
			if i, err = f.jsonValue(r, st, s, i, path, first, depth+1); err != nil {
				return i, err
			}
			first = fieldIgnore
			i = skipSpace(s, i)
			if i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
			} else if i < len(s) && s[i] != ']' {
				return i, errAt(i, ErrBadJSON, "want ',' or ']', found %s", excerpt(s, i, 16))
			}
		}
		if i >= len(s) {
			return i, errAt(vstart, ErrBadJSON, "unterminated array for %q", path)
		}
		if fl == fieldProxyTryList && k > 0 {
			st.tries = k
		}
		return i + 1, nil
	case '"':
		end := jsonStringEnd(s, i+1)
		if end < 0 {
			return i, errAt(i, ErrBadJSON, "unterminated string for %q", path)
		}
		val = s[i+1 : end]
		if fl != fieldIgnore && strings.IndexByte(val, '\\') >= 0 {
			d, ok := unescapeJSON(val)
			if !ok {
				return i, errAt(i, ErrBadJSON, "bad escape in value of %q", path)
			}
			val = d
		}
		if fl != fieldIgnore && !utf8.ValidString(val) {
			val = escapeInvalid(val)
		}
		i = end + 1
	default:
		end := i
		for end < len(s) && s[end] != ',' && s[end] != '}' && s[end] != ']' && s[end] != ' ' && s[end] != '\t' {
			end++
		}
		val = s[i:end]
		if val == "" || !jsonLiteral(val) {
			return i, errAt(i, ErrBadJSON, "want a string, number, true, false or null for %q, found %s", path, excerpt(s, i, 16))
		}
		if val == "null" {
			val = ""
		}
		i = end
	}
	if fl != fieldIgnore && val != "" && val != "-" {
		if err := set(r, st, fl, val, vstart); err != nil {
			return i, err
		}
	}
	return i, nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// jsonStringEnd returns the index of the quote closing a string whose body starts at i.
func jsonStringEnd(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return -1
}

// unescapeJSON decodes a JSON string body.
func unescapeJSON(v string) (string, bool) {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(v) {
			return "", false
		}
		i++
		switch v[i] {
		case '"', '\\', '/':
			b.WriteByte(v[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(v, i+1)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(v, i+3); ok && i+2 < len(v) && v[i+1] == '\\' && v[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
	}
	return b.String(), true
}

func hex4(v string, i int) (rune, bool) {
	if i+4 > len(v) {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		if !isHex(v[k]) {
			return 0, false
		}
		r = r<<4 | rune(unhex(v[k]))
	}
	return r, true
}

// jsonLiteral reports whether v is a bare JSON value: a number, true, false or null.
func jsonLiteral(v string) bool {
	switch v {
	case "true", "false", "null":
		return true
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return false
		}
	}
	return true
}
