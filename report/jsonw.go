package report

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"
)

// The JSON report is written as it goes, member by member, in exactly the bytes
// encoding/json's indenting Encoder writes (TestJSONWriterMatchesEncoding): a report with
// every endpoint of 100K routes is 100 MB, which the Encoder would build, check and
// indent whole in memory before writing a byte.

// field is one member of the report's top-level object.
type field struct {
	key   string
	value any  // stream, object, or anything encoding/json marshals
	omit  bool // left out (omitempty)
}

// stream is an array of objects made one at a time as they are written.
type stream struct {
	n  int
	at func(i int) object
}

// writeJSON writes fields as one indented JSON object and a newline.
func writeJSON(w io.Writer, fields []field) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	b := []byte("{\n")
	last := -1
	for i, f := range fields {
		if !f.omit {
			last = i
		}
	}
	for i, f := range fields {
		if f.omit {
			continue
		}
		b = append(b, "  "...)
		b = appendString(b, f.key)
		b = append(b, ": "...)
		var err error
		switch v := f.value.(type) {
		case stream:
			b, err = v.write(bw, b, "  ")
		case object:
			b, err = v.appendIndent(b, "  ")
		default:
			var enc []byte
			enc, err = json.MarshalIndent(v, "  ", "  ")
			b = append(b, enc...)
		}
		if err != nil {
			return err
		}
		if i != last {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = append(b, "}\n"...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// write appends the array at indent to b, writing out b between objects, and returns
// what is left to write.
func (s stream) write(w io.Writer, b []byte, indent string) ([]byte, error) {
	if s.n == 0 {
		return append(b, "[]"...), nil
	}
	b = append(b, "[\n"...)
	inner := indent + "  "
	for i := range s.n {
		b = append(b, inner...)
		var err error
		if b, err = s.at(i).appendIndent(b, inner); err != nil {
			return nil, err
		}
		if i < s.n-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		if len(b) > 1<<15 {
			if _, err := w.Write(b); err != nil {
				return nil, err
			}
			b = b[:0]
		}
	}
	return append(append(b, indent...), ']'), nil
}

// appendIndent appends the object as the Encoder indents it when its line starts at
// indent.
func (o object) appendIndent(b []byte, indent string) ([]byte, error) {
	if len(o) == 0 {
		return append(b, "{}"...), nil
	}
	b = append(b, "{\n"...)
	inner := indent + "  "
	for i, m := range o {
		b = append(b, inner...)
		b = appendString(b, m.key)
		b = append(b, ": "...)
		var err error
		if b, err = appendValue(b, m.value, inner); err != nil {
			return nil, err
		}
		if i < len(o)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(append(b, indent...), '}'), nil
}

// appendValue appends v as encoding/json does on a line that starts at indent: the
// column values (int64, *float64, string) directly, anything else through encoding/json.
func appendValue(b []byte, v any, indent string) ([]byte, error) {
	switch v := v.(type) {
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case *float64:
		if v == nil {
			return append(b, "null"...), nil
		}
		if f := *v; !math.IsNaN(f) && !math.IsInf(f, 0) {
			return appendFloat(b, f), nil
		}
	case string:
		return appendString(b, v), nil
	}
	enc, err := json.MarshalIndent(v, indent, "  ")
	return append(b, enc...), err
}

// appendFloat is encoding/json's encoding of a finite float64.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 as e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString appends s quoted as encoding/json quotes it (HTML characters escaped):
// plain printable ASCII directly, anything else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always marshals
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
