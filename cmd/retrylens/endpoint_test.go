package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --endpoint takes the form the tables show, a route or a raw path; a name that matches
// nothing is an error naming the closest endpoints, not an empty quiet report. 243 is
// `grep -c '"GET /api/orders/'` over the two sample logs (121 + 122).
func TestEndpointForms(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "e.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db, scenario("quiet-hour"), scenario("incident-hour")); code != 0 {
		t.Fatal(stderr)
	}
	for _, e := range []string{"GET /api/orders/:id", "get /api/orders/:id", "/api/orders/:id", "/api/orders/1042", "/api/orders/1042?x=1"} {
		out, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json", "--endpoint", e)
		if code != 0 || !strings.Contains(out, `"requests": 243,`) {
			t.Errorf("--endpoint %q: exit %d, want 243 requests:\n%.300s%s", e, code, out, stderr)
		}
	}
	for _, e := range []string{"POST /api/orders/:id", "/api/order"} {
		_, stderr, code := retrylens(t, nil, "check", "--db", db, "--endpoint", e)
		if want := `matches no request; the closest endpoints are "GET /api/orders/:id"`; code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("--endpoint %q: exit %d, want %d and %q:\n%s", e, code, exitError, want, stderr)
		}
	}
	out, _, _ := retrylens(t, nil, "report", "--db", db, "--format", "table", "--by", "method")
	if !strings.Contains(out, "│ GET    │      248 │") {
		t.Errorf("--by method: no GET row of 248 requests (every parsed line is a GET):\n%s", out)
	}
}
