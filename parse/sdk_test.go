package parse

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/sdk"
)

// nginxVar is the nginx variable of a header: $http_… for a request's, $upstream_http_…
// for a response's.
func nginxVar(prefix, header string) string {
	return prefix + strings.ReplaceAll(strings.ToLower(header), "-", "_")
}

// Parsing reads what the catalogue says each family sends and answers: its attempt header
// in the catalogue's order of precedence, numbered from its first (and its cap where it
// states one), its key, its error code's header, the operation and the retry-after headers
// it waits for.
func TestCatalogue(t *testing.T) {
	var order []string
	for _, f := range sdk.Families {
		order = append(order, f.Attempt)
	}
	if !slices.Equal(order, AttemptSources()) {
		t.Errorf("attempt headers, in order: parse reads %v, the catalogue has %v", AttemptSources(), order)
	}
	for _, f := range sdk.Families {
		src := "$msec " + nginxVar("$http_", f.Attempt)
		line := fmt.Sprintf("1796040000.5 %d", f.First+1)
		if f.StatesCap {
			line = fmt.Sprintf(`1796040000.5 attempt=%d;max=5`, f.First+1)
		}
		format, err := Compile(src, EscapeDefault)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		r, err := format.ParseLine([]byte(line))
		if err != nil || r.Attempt != 1 || r.AttemptSource != f.Attempt || (f.StatesCap && r.MaxAttempts != 5) {
			t.Errorf("%s: %q read as attempt %d (%s) of max %d, %v; want its second attempt", f.Name, line, r.Attempt, r.AttemptSource, r.MaxAttempts, err)
		}
		checks := []struct{ v, want string }{{nginxVar("upstream_http_", f.ErrorHeader), "error code"}}
		if !strings.HasPrefix(f.Operation, ":") { // a pseudo-header: gRPC's path (TestGRPCOperation)
			checks = append(checks, struct{ v, want string }{nginxVar("http_", f.Operation), "operation"})
		}
		for _, k := range f.Keys {
			checks = append(checks, struct{ v, want string }{nginxVar("http_", k), "key"})
		}
		for _, h := range checks {
			if h.v != "http_" && h.v != "upstream_http_" && variables[h.v] == fieldIgnore {
				t.Errorf("%s: $%s, its %s, is not read", f.Name, h.v, h.want)
			}
		}
		for _, ra := range f.RetryAfter {
			if v := nginxVar("upstream_http_", ra); variables[v] != fieldRetryAfter && variables[v] != fieldRetryAfterMs {
				t.Errorf("%s: $%s, a retry-after it waits for, is not read", f.Name, v)
			}
		}
	}
}

// A gRPC call's path names its operation, as X-Amz-Target does; an HTTP request's path
// names none.
func TestGRPCOperation(t *testing.T) {
	for _, c := range []struct{ src, line, want string }{
		{`$msec "$request" $http_grpc_previous_rpc_attempts`, `1796040000.5 "POST /shop.Orders/Get HTTP/2.0" 1`, "shop.Orders/Get"},
		{`$msec "$request" $upstream_trailer_grpc_status`, `1796040000.5 "POST /grpc.health.v1.Health/Check HTTP/2.0" 14`, "grpc.health.v1.Health/Check"},
		{`$msec "$request" $http_grpc_previous_rpc_attempts`, `1796040000.5 "POST /shop.Orders/Get/x HTTP/2.0" 1`, ""},
		{`$msec "$request" $http_x_retry_attempt`, `1796040000.5 "POST /shop.Orders/Get HTTP/2.0" 1`, ""},
		{`$msec "$request" $http_grpc_previous_rpc_attempts $http_x_amz_target`, `1796040000.5 "POST / HTTP/1.1" 1 DynamoDB_20120810.GetItem`, "DynamoDB_20120810.GetItem"},
	} {
		format, err := Compile(c.src, EscapeDefault)
		if err != nil {
			t.Fatal(err)
		}
		r, err := format.ParseLine([]byte(c.line))
		if err != nil || r.Operation != c.want {
			t.Errorf("%s: operation %q, %v; want %q", c.line, r.Operation, err, c.want)
		}
	}
}
