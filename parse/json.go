package parse

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSON reads one flat JSON object whose keys are nginx variable names, as written by
// a log_format with escape=json. Values may be strings, numbers, booleans or null; nested
// objects and arrays are skipped.
func (f *Format) parseJSON(r *Record, st *state, s string) *Error {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return errAt(i, ErrBadJSON, "want '{', found %s", excerpt(s, i, 16))
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			if i >= len(s) || s[i] != '"' {
				return errAt(i, ErrBadJSON, "want a quoted key, found %s", excerpt(s, i, 16))
			}
			kend := jsonStringEnd(s, i+1)
			if kend < 0 {
				return errAt(i, ErrBadJSON, "unterminated key")
			}
			key := s[i+1 : kend]
			i = skipSpace(s, kend+1)
			if i >= len(s) || s[i] != ':' {
				return errAt(i, ErrBadJSON, "want ':' after key %q, found %s", key, excerpt(s, i, 16))
			}
			i = skipSpace(s, i+1)
			vstart := i
			var val string
			var isNull bool
			switch {
			case i < len(s) && s[i] == '"':
				end := jsonStringEnd(s, i+1)
				if end < 0 {
					return errAt(i, ErrBadJSON, "unterminated string for key %q", key)
				}
				val = s[i+1 : end]
				if strings.IndexByte(val, '\\') >= 0 {
					d, ok := unescapeJSON(val)
					if !ok {
						return errAt(i, ErrBadJSON, "bad escape in value of %q", key)
					}
					val = d
				}
				if !utf8.ValidString(val) {
					val = escapeInvalid(val)
				}
				i = end + 1
			case i < len(s) && (s[i] == '{' || s[i] == '['):
				end := skipNested(s, i)
				if end < 0 {
					return errAt(i, ErrBadJSON, "unterminated value for key %q", key)
				}
				i, isNull = end, true
			default:
				end := i
				for end < len(s) && s[end] != ',' && s[end] != '}' && s[end] != ' ' && s[end] != '\t' {
					end++
				}
				val = s[i:end]
				if val == "" {
					return errAt(i, ErrBadJSON, "missing value for key %q", key)
				}
				if !jsonLiteral(val) {
					return errAt(i, ErrBadJSON, "want a string, number, true, false or null for key %q, found %s", key, excerpt(val, 0, 16))
				}
				isNull = val == "null"
				i = end
			}
			if fl, ok := variables[key]; ok && fl != fieldIgnore && !isNull && val != "" && val != "-" {
				if err := set(r, st, fl, val, vstart); err != nil {
					return err
				}
			}
			i = skipSpace(s, i)
			if i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
				continue
			}
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			return errAt(i, ErrBadJSON, "want ',' or '}', found %s", excerpt(s, i, 16))
		}
	}
	if i = skipSpace(s, i); i != len(s) {
		return errAt(i, ErrTrailing, "found %s", excerpt(s, i, 24))
	}
	return nil
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

// skipNested returns the index just past the object or array starting at i.
func skipNested(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		case '"':
			end := jsonStringEnd(s, i+1)
			if end < 0 {
				return -1
			}
			i = end
		}
		i++
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
