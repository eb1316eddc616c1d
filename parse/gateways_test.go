package parse

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func utc(y int, mo time.Month, d, h, mi, s, msec int) time.Time {
	return time.Date(y, mo, d, h, mi, s, msec*1e6, time.UTC)
}

// The expected records are read off the lines by hand: times are the start plus the
// request's duration, proxy tries the try count (or retries + 1).
func TestGatewayFormats(t *testing.T) {
	preset := func(name string) *Format {
		f, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	const syslogDoc = `Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"`
	tests := []struct {
		name   string
		format *Format
		line   string
		want   Record
	}{
		{
			name: "envoy: start + duration ms, proxy tries, x-retry-attempt", format: preset("envoy"),
			line: lineOf(t, "gateways/envoy.jsonl", 1),
			want: Record{Time: utc(2026, 11, 29, 10, 0, 0, 12), RemoteAddr: "10.0.0.1", Method: "GET", URI: "/api/orders/7",
				Protocol: "HTTP/1.1", Status: 503, Bytes: 91, UserAgent: "curl/8.0", Host: "shop.local", RequestTime: 0.012,
				UpstreamAddr: "10.0.0.9:8080", UpstreamTries: 2, Attempt: 0, AttemptSource: "x-retry-attempt", RequestID: "r-1"},
		},
		{
			name: "envoy: IPv6 client, x-envoy-attempt-count 2 is attempt 1", format: preset("envoy"),
			line: lineOf(t, "gateways/envoy.jsonl", 2),
			want: Record{Time: utc(2026, 11, 29, 10, 0, 1, 4), RemoteAddr: "2001:db8::1", Method: "GET", URI: "/api/orders/7",
				Protocol: "HTTP/2", Status: 200, Bytes: 3, UserAgent: "grpc-go/1.60", Host: "shop.local", RequestTime: 0.004,
				UpstreamAddr: "10.0.0.9:8080", UpstreamTries: 1, Attempt: 1, AttemptSource: "x-envoy-attempt-count", RequestID: "r-1"},
		},
		{
			name: "traefik: StartUTC + Duration ns, RetryAttempts 1 is 2 tries, kept request headers", format: preset("traefik"),
			line: lineOf(t, "gateways/traefik.jsonl", 1),
			want: Record{Time: utc(2026, 11, 29, 10, 0, 0, 12), RemoteAddr: "10.0.0.1", Method: "GET", URI: "/api/orders/7",
				Protocol: "HTTP/1.1", Status: 502, Bytes: 19, UserAgent: "curl/8.0", Host: "shop.local", RequestTime: 0.012,
				UpstreamAddr: "10.0.0.9:8080", UpstreamStatus: "502", UpstreamTries: 2, Attempt: 2, AttemptSource: "x-retry-attempt", RequestID: "r-1"},
		},
		{
			name: "kong: started_at ms + latencies.request, two tries, Retry-After", format: preset("kong"),
			line: lineOf(t, "gateways/kong.json", 1),
			want: Record{Time: utc(2026, 11, 29, 10, 0, 0, 12), RemoteAddr: "10.0.0.1", Method: "POST", URI: "/api/orders?x=1",
				Status: 429, Bytes: 434, UserAgent: "curl/8.0", Host: "shop.local:8000", RequestTime: 0.012, UpstreamTries: 2,
				Attempt: 1, AttemptSource: "x-retry-attempt", IdempotencyKey: "k-1", RetryAfter: "2"},
		},
		{
			name: "haproxy 2.6 (real): %tr + %Ta, captures", format: preset("haproxy"),
			line: lineOf(t, "gateways/haproxy.log", 1),
			want: Record{Time: utc(2026, 11, 30, 0, 56, 3, 748), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/api/orders/7",
				Protocol: "HTTP/1.1", Status: 404, Bytes: 500, UserAgent: "curl/7.88.1", RequestTime: 0.008,
				UpstreamAddr: "up/s1", UpstreamTries: 1, Attempt: 0, AttemptSource: "x-retry-attempt", RequestID: "r-1"},
		},
		{
			name: "haproxy 2.6 (real): backend down, 2 redispatch retries are 3 tries", format: preset("haproxy"),
			line: lineOf(t, "gateways/haproxy.log", 2),
			want: Record{Time: utc(2026, 11, 30, 0, 56, 4, 165), RemoteAddr: "127.0.0.1", Method: "POST", URI: "/down/orders",
				Protocol: "HTTP/1.1", Status: 503, Bytes: 217, UserAgent: "curl/7.88.1", RequestTime: 0.403,
				UpstreamAddr: "down/s2", UpstreamTries: 3, Attempt: 0, AttemptSource: "x-retry-attempt", RequestID: "r-2", IdempotencyKey: "k-2"},
		},
		{
			name: "haproxy 2.6 (real): #XX escapes in a capture and the request line", format: preset("haproxy"),
			line: lineOf(t, "gateways/haproxy.log", 4),
			want: Record{Time: utc(2026, 11, 30, 0, 56, 4, 599), RemoteAddr: "127.0.0.1", Method: "GET", URI: `/?q=a%20b&x="1"`,
				Protocol: "HTTP/1.1", Status: 200, Bytes: 459, UserAgent: `weird "agent" {x|y}`, RequestTime: 0.002,
				UpstreamAddr: "up/s1", UpstreamTries: 1, Attempt: -1},
		},
		{
			name: "haproxy 2.6 (real): a control byte and a pipe in the user agent", format: preset("haproxy"),
			line: lineOf(t, "gateways/haproxy.log", 5),
			want: Record{Time: utc(2026, 11, 30, 0, 56, 4, 766), RemoteAddr: "127.0.0.1", Method: "GET", URI: "/raw",
				Protocol: "HTTP/1.1", Status: 404, Bytes: 500, UserAgent: "a|b\x01c", RequestTime: 0.001,
				UpstreamAddr: "up/s1", UpstreamTries: 1, Attempt: 2, AttemptSource: "x-retry-attempt"},
		},
		{
			name: "haproxy documentation example behind syslog: a Host capture is no attempt number", format: preset("haproxy"),
			line: syslogDoc,
			want: Record{Time: utc(2009, 2, 6, 12, 14, 14, 764), RemoteAddr: "10.0.1.2", Method: "GET", URI: "/index.html",
				Protocol: "HTTP/1.1", Status: 200, Bytes: 2750, RequestTime: 0.109, UpstreamAddr: "static/srv1", UpstreamTries: 1, Attempt: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.format.ParseLine([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseLine: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every line of the gateway samples parses with its preset.
func TestGatewaySamples(t *testing.T) {
	for file, name := range map[string]string{"envoy.jsonl": "envoy", "traefik.jsonl": "traefik", "kong.json": "kong", "haproxy.log": "haproxy"} {
		f, _ := Preset(name)
		for i, line := range strings.Split(strings.TrimSpace(readTestdata(t, "gateways/"+file)), "\n") {
			if _, err := f.ParseLine([]byte(line)); err != nil {
				t.Errorf("%s:%d: %v", file, i+1, err)
			}
		}
	}
}

func TestWithFields(t *testing.T) {
	const line = `{"when":"2026-11-29T10:00:00.5Z","req":{"verb":"PUT","path":"/v1/x","hdr":{"X-Attempt":"3","X-Corr":"c-9"}},"res":{"code":500},"took_ms":250,"peer":"10.1.1.1"}`
	f, err := WithFields(nil, []string{"time=when", "method=req.verb", "uri=req.path", "attempt=req.hdr.x-attempt",
		"request_id=REQ.HDR.X-Corr", "status=res.code", "duration_ms=took_ms", "remote_addr=peer"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ParseLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Record{Time: utc(2026, 11, 29, 10, 0, 0, 500), RemoteAddr: "10.1.1.1", Method: "PUT", URI: "/v1/x", Status: 500,
		Bytes: -1, RequestTime: 0.25, Attempt: 3, AttemptSource: "x-retry-attempt", RequestID: "c-9"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// On top of a preset: another request id header, and one field switched off.
	caddy, _ := Preset("caddy")
	g, err := WithFields(caddy, []string{"request_id=request.headers.X-Correlation-Id", "user_agent="})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := g.ParseLine([]byte(`{"ts":1795946400.25,"request":{"method":"GET","uri":"/","headers":{"User-Agent":["curl"],"X-Correlation-Id":["c-1"],"X-Retry-Attempt":["1"]}},"status":200}`))
	if err != nil {
		t.Fatal(err)
	}
	if rec.RequestID != "c-1" || rec.UserAgent != "" || rec.Attempt != 1 {
		t.Errorf("caddy+fields: request id %q, user agent %q, attempt %d; want c-1, \"\", 1", rec.RequestID, rec.UserAgent, rec.Attempt)
	}
	for _, bad := range []string{"nope=x", "attempt", "=x"} {
		if _, err := WithFields(nil, []string{bad}); err == nil {
			t.Errorf("WithFields(%q): no error", bad)
		}
	}
	retry, _ := Preset("retry")
	if _, err := WithFields(retry, []string{"attempt=x"}); err == nil {
		t.Error("WithFields on a text format: no error")
	}
}

func TestParseTimeAny(t *testing.T) {
	want := utc(2026, 11, 29, 10, 0, 0, 250)
	for _, v := range []string{"1795946400.25", "1795946400250", "1795946400250000", "1795946400250000000", "2026-11-29T10:00:00.25Z", "2026-11-29T11:00:00.250+01:00"} {
		got, ok := parseTimeAny(v)
		if !ok || !got.Equal(want) {
			t.Errorf("parseTimeAny(%q) = %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "abc", "1e400", "2026-13-01T00:00:00Z"} {
		if _, ok := parseTimeAny(v); ok {
			t.Errorf("parseTimeAny(%q): ok", v)
		}
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTimeISOHint(t *testing.T) {
	f, err := Compile(`$remote_addr [$time_local] $status`, EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ParseLine([]byte(`10.0.0.1 [2026-11-29T10:00:00+00:00] 200`))
	if err == nil || !strings.Contains(err.Error(), "this looks like $time_iso8601") {
		t.Errorf("err = %v; want the $time_iso8601 hint", err)
	}
}

// decimal must give exactly what strconv.ParseFloat gives, or decline.
func FuzzDecimal(f *testing.F) {
	for _, s := range []string{"0.012", "12", "0.000", "123456789012345", "99999999999999.9", "1.", ".5", "0.1", "3.14159265358979"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := decimal(s)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || got != want {
			t.Fatalf("decimal(%q) = %v; ParseFloat gives %v, %v", s, got, want, err)
		}
	})
}
