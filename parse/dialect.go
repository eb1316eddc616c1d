package parse

// A dialect is a family of log formats: how a line of one reads into a Record and, for
// the formats retrylens also writes (nginx text, nginx-json, Caddy), how a Record is
// written as a line. Each lives in its own file: text.go (nginx log_format strings),
// json.go (JSON objects, keys mapped to fields), haproxy.go (HAProxy's httplog).
type dialect interface {
	parse(f *Format, r *Record, st *state, s string) *Error
	// appendLine appends r as a line of f (AppendRecord); writes says whether it can.
	appendLine(f *Format, dst []byte, r *Record) []byte
	writes() bool
}

// jsonLayout is the layout a JSON format writes: the keys of nginx's variables, Caddy's
// layout, or none (read only).
type jsonLayout uint8

const (
	jsonReadOnly jsonLayout = iota
	jsonNginx
	jsonCaddy
)

type (
	textDialect    struct{}
	jsonDialect    struct{ layout jsonLayout }
	haproxyDialect struct{}
)

func (textDialect) parse(f *Format, r *Record, st *state, s string) *Error {
	return f.parseText(r, st, s)
}
func (textDialect) writes() bool { return true }
func (textDialect) appendLine(f *Format, dst []byte, r *Record) []byte {
	dst = append(dst, f.lead...)
	for i := range f.steps {
		s := &f.steps[i]
		v := value(r, s.field)
		if v == "" {
			dst = append(dst, '-')
		} else {
			dst = f.appendEscaped(dst, v)
		}
		dst = append(dst, s.lit...)
	}
	return dst
}

func (jsonDialect) parse(f *Format, r *Record, st *state, s string) *Error {
	return f.parseJSON(r, st, s)
}
func (d jsonDialect) writes() bool { return d.layout != jsonReadOnly }
func (d jsonDialect) appendLine(_ *Format, dst []byte, r *Record) []byte {
	if d.layout == jsonCaddy {
		return appendCaddy(dst, r)
	}
	return appendJSON(dst, r)
}

func (haproxyDialect) parse(f *Format, r *Record, st *state, s string) *Error {
	return f.parseHAProxy(r, st, s)
}
func (haproxyDialect) writes() bool                                       { return false }
func (haproxyDialect) appendLine(_ *Format, dst []byte, _ *Record) []byte { return dst }
