package parse

import (
	"bytes"
	"testing"
)

// ingress-nginx's default format: the upstream tries as unquoted lists (", " between
// tries, " : " between internal redirects), detected among the presets, read whole by
// both paths of the parser.
func TestIngressNginx(t *testing.T) {
	for _, c := range []struct {
		line, addr, status string
		tries              int
	}{
		// one try
		{`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "GET /api/orders/1042 HTTP/1.1" 200 157 "-" "checkout-web/2.3" 312 0.012 [default-orders-80] [] 10.244.0.9:8080 157 0.011 200 5f2d6c2a9b7e4f1a8c3d0e1f2a3b4c5d`,
			"10.244.0.9:8080", "200", 1},
		// proxy_next_upstream: a 502, then the next endpoint
		{`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "GET /api/orders/1042 HTTP/1.1" 200 157 "-" "checkout-web/2.3" 312 0.052 [default-orders-80] [] 10.244.0.9:8080, 10.244.0.10:8080 0, 157 0.020, 0.031 502, 200 5f2d6c2a9b7e4f1a8c3d0e1f2a3b4c5d`,
			"10.244.0.9:8080, 10.244.0.10:8080", "502, 200", 2},
		// an internal redirect (error_page) after two tries, the user agent escaped
		{`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "POST /pay HTTP/1.1" 503 0 "-" "curl/8.5 \x22x\x22" 90 1.004 [default-pay-80] [default-pay-canary-80] 10.244.0.11:8080, 10.244.0.12:8080 : 127.0.0.1:8181 0, 0 : 21 0.500, 0.501 : 0.001 504, 504 : 503 0c9a`,
			"10.244.0.11:8080, 10.244.0.12:8080 : 127.0.0.1:8181", "504, 504 : 503", 3},
		// no upstream (nginx answered itself)
		{`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.30" 80 0.000 [] [] - - - - 77aa`,
			"", "", 0},
	} {
		f, err := Detect([][]byte{[]byte(c.line)})
		if err != nil || f.Name != "ingress-nginx" {
			t.Errorf("detected %v, %v; want ingress-nginx: %s", f, err, c.line)
			continue
		}
		for _, general := range []bool{false, true} {
			forceGeneral = general
			r, err := f.ParseLine([]byte(c.line))
			forceGeneral = false
			if err != nil || r.UpstreamAddr != c.addr || r.UpstreamStatus != c.status || r.UpstreamTries != c.tries || r.RequestID != "" {
				t.Errorf("general path %v: %v, upstream %q, status %q, %d tries, request id %q; want %q, %q, %d, none:\n%s",
					general, err, r.UpstreamAddr, r.UpstreamStatus, r.UpstreamTries, r.RequestID, c.addr, c.status, c.tries, c.line)
			}
		}
	}
}

// go test ./parse -run '^$' -fuzz FuzzIngressNginx -fuzztime 5m
func FuzzIngressNginx(f *testing.F) {
	f.Add([]byte(`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "GET /api/orders/1042 HTTP/1.1" 200 157 "-" "checkout-web/2.3" 312 0.052 [default-orders-80] [] 10.244.0.9:8080, 10.244.0.10:8080 0, 157 0.020, 0.031 502, 200 5f2d`))
	f.Add([]byte(`10.0.0.7 - - [29/Nov/2026:14:20:01 +0000] "POST /pay HTTP/1.1" 503 0 "-" "curl/8.5" 90 1.004 [a] [b] 10.244.0.11:8080, 10.244.0.12:8080 : 127.0.0.1:8181 0, 0 : 21 0.500, 0.501 : 0.001 504, 504 : 503 0c9a`))
	format, _ := Preset("ingress-nginx")
	f.Fuzz(func(t *testing.T, line []byte) {
		// lines of plain values (nginx writes quotes, backslashes, control bytes and bytes
		// above ASCII as \xHH, whose decoding the other presets' fuzzers cover) format
		// back to what reads the same
		if !bytes.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r >= 0x7f || r == '\\' }) && bytes.Count(line, []byte(`"`)) == 6 {
			roundTrip(t, format, line)
		}
		fast, ferr := format.ParseLine(line)
		forceGeneral = true
		slow, serr := format.ParseLine(line)
		forceGeneral = false
		if (ferr == nil) != (serr == nil) || fast != slow {
			t.Fatalf("fast path %+v, %v; general %+v, %v\nline: %q", fast, ferr, slow, serr, line)
		}
	})
}
