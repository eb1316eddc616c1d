package ingest

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Router turns request URIs into routes: the path without its query string, with
// identifiers replaced by ":id" (decimal ids, UUIDs, long hex, base64-like tokens), unless
// a user template matches first. Routes are what endpoint tables group by, so their number
// must stay small.
type Router struct {
	templates [][]string // split templates; a "{name}" segment matches any one segment
}

// NewRouter compiles route templates such as "/api/users/{id}/orders". A last
// placeholder with a + ("/{bucket}/{key+}", as API Gateway writes it) matches the rest of
// the path, however many segments: an S3 object's key.
func NewRouter(templates []string) (*Router, error) {
	r := &Router{}
	for _, t := range templates {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, "/") {
			return nil, fmt.Errorf("route template %q: want a path starting with /", t)
		}
		segs := strings.Split(t, "/")
		for i, s := range segs {
			if greedy := strings.HasSuffix(s, "+}"); greedy && i < len(segs)-1 {
				return nil, fmt.Errorf("route template %q: segment %q: only the last placeholder may take the rest of the path", t, s)
			}
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && len(s) > 2 && s != "{+}" {
				segs[i] = ":" + s[1:len(s)-1]
			} else if strings.ContainsAny(s, "{}") {
				return nil, fmt.Errorf("route template %q: segment %q: a placeholder is a whole segment, like {id}", t, s)
			}
		}
		r.templates = append(r.templates, segs)
	}
	return r, nil
}

// ReadRoutes reads templates from a routes file: one per line, blank lines and lines
// starting with # ignored.
func ReadRoutes(rd io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// Route returns the route of a request URI; "" for an empty URI.
func (r *Router) Route(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	if uri == "" {
		return ""
	}
	if !strings.HasPrefix(uri, "/") {
		// Not an origin-form path (an absolute URL sent to a proxy, a TLS handshake): keep
		// it recognisable but bounded.
		if len(uri) > 64 {
			uri = uri[:64]
		}
		return uri
	}
	if r != nil {
		for _, t := range r.templates {
			if route, ok := match(t, uri); ok {
				return route
			}
		}
	}
	if !needsRewrite(uri) {
		return uri
	}
	return replaceIDs(uri)
}

// replaceIDs replaces each segment of path that isID by ":id". It allocates only when
// some segment is one (a path with digits often has none: /static/app.3.js), once.
func replaceIDs(path string) string {
	var b strings.Builder
	for start := 0; ; {
		end := strings.IndexByte(path[start:], '/')
		if end < 0 {
			end = len(path)
		} else {
			end += start
		}
		seg := path[start:end]
		switch {
		case isID(seg):
			if b.Cap() == 0 {
				b.Grow(len(path) + 2) // room for one ":id" in place of a one-byte id; more grow it
				b.WriteString(path[:start])
			}
			b.WriteString(":id")
		case b.Cap() > 0:
			b.WriteString(seg)
		}
		if end == len(path) {
			break
		}
		if b.Cap() > 0 {
			b.WriteByte('/')
		}
		start = end + 1
	}
	if b.Cap() == 0 {
		return path
	}
	return b.String()
}

func match(t []string, uri string) (string, bool) {
	n := strings.Count(uri, "/") + 1
	greedy := strings.HasSuffix(t[len(t)-1], "+")
	if n != len(t) && !(greedy && n > len(t)) {
		return "", false
	}
	i := 0
	for seg := range strings.SplitSeq(uri, "/") {
		if i == len(t)-1 && greedy {
			break // the rest of the path, at least one segment
		}
		if !strings.HasPrefix(t[i], ":") && t[i] != seg {
			return "", false
		}
		i++
	}
	return strings.Join(t, "/"), true
}

// needsRewrite is a quick check that some segment holds a digit or is long.
func needsRewrite(uri string) bool {
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c >= '0' && c <= '9' {
			return true
		}
	}
	return len(uri) > 40
}

// isID reports whether a path segment looks like an identifier rather than a name.
func isID(s string) bool {
	if s == "" {
		return false
	}
	digits, hex, letters, other := 0, 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
			hex++
		case c >= 'g' && c <= 'z' || c >= 'G' && c <= 'Z':
			letters++
		case c == '-' || c == '_' || c == '=' || c == '+' || c == '~':
			other++
		default:
			return false // '.', '%', ':' …: a file name or an encoded word
		}
	}
	switch {
	case digits == len(s):
		return true // decimal id
	case len(s) == 36 && isUUID(s):
		return true
	case letters == 0 && other == 0 && len(s) >= 12 && digits > 0:
		return true // long hex
	case len(s) >= 16 && digits > 0 && letters+hex > 0:
		return true // base64-like token, or a prefixed id such as ord_1a2b3c4d5e6f7a8b
	}
	return false
}

func isUUID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
