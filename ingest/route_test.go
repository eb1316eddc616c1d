package ingest

import (
	"strings"
	"testing"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	r, err := NewRouter([]string{"/api/users/{id}/orders", "/v1/{tenant}/items"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ uri, want string }{
		{"/api/orders/1042?fail=1", "/api/orders/:id"},
		{"/api/users/42/orders", "/api/users/:id/orders"},
		{"/api/users/alice/orders", "/api/users/:id/orders"}, // the template wins over the rules
		{"/v1/acme/items", "/v1/:tenant/items"},
		{"/api/items/3f2504e0-4f89-11d3-9a0c-0305e82c3301", "/api/items/:id"},
		{"/blobs/deadbeef0123", "/blobs/:id"},
		{"/pay/ord_1a2b3c4d5e6f7a8b", "/pay/:id"},
		{"/t/dGhpcyBpcyBhIHRva2VuMTIz", "/t/:id"},
		{"/static/app.d8f9.js", "/static/app.d8f9.js"}, // a file name, not an id
		{"/api/v2/health", "/api/v2/health"},
		{"/search?q=caf%C3%A9", "/search"},
		{"/", "/"},
		{"", ""},
		{"\x16\x03\x01", "\x16\x03\x01"},
	}
	for _, tt := range tests {
		if got := r.Route(tt.uri); got != tt.want {
			t.Errorf("Route(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
	// A last placeholder with a + takes the rest of the path: every key of a bucket is
	// one route, however many segments it has; a bucket alone is not one.
	s3, err := NewRouter([]string{"/{bucket}/{key+}"})
	if err != nil {
		t.Fatal(err)
	}
	for uri, want := range map[string]string{
		"/photos/2026/11/cat.jpg?versionId=3": "/:bucket/:key+",
		"/photos/obj-0042":                    "/:bucket/:key+",
		"/photos":                             "/photos",
		"/:bucket/:key+":                      "/:bucket/:key+",
	} {
		if got := s3.Route(uri); got != want {
			t.Errorf("/{bucket}/{key+}: Route(%q) = %q, want %q", uri, got, want)
		}
	}
	for _, bad := range []string{"api/x", "/api/{id}x", "/{key+}/x"} {
		if _, err := NewRouter([]string{bad}); err == nil {
			t.Errorf("NewRouter(%q) accepted", bad)
		}
	}
}

// go test ./ingest -run '^$' -fuzz FuzzRoute -fuzztime 1m
func FuzzRoute(f *testing.F) {
	f.Add("/api/orders/1042?fail=1")
	f.Add("/a//b/3f2504e0-4f89-11d3-9a0c-0305e82c3301")
	r, _ := NewRouter([]string{"/api/users/{id}/orders"})
	f.Fuzz(func(t *testing.T, uri string) {
		got := r.Route(uri)
		// ":id" replaces a segment of at least one byte: at most 2 bytes more a segment.
		if limit := len(uri) + 2*strings.Count(uri, "/") + len("/api/users/:id/orders"); len(got) > limit {
			t.Fatalf("Route(%q) = %q grew past %d bytes", uri, got, limit)
		}
		if again := r.Route(got); again != got {
			t.Fatalf("Route is not idempotent: %q -> %q -> %q", uri, got, again)
		}
		// replaceIDs against the obvious split, replace and join.
		segs := strings.Split(uri, "/")
		for i, s := range segs {
			if isID(s) {
				segs[i] = ":id"
			}
		}
		if want, got := strings.Join(segs, "/"), replaceIDs(uri); got != want {
			t.Fatalf("replaceIDs(%q) = %q, want %q", uri, got, want)
		}
	})
}
