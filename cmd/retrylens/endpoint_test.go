package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --endpoint takes the form the tables show, a route or a raw path; a name that matches
// nothing is an error naming the closest endpoints, not an empty quiet report. 243 is
// `grep -c '"GET /api/orders/'` over the two sample logs (121 + 122).
func TestEndpointForms(t *testing.T) {
	t.Parallel()
	db := ingested(t, "quiet-hour", "incident-hour")
	forms := []string{"GET /api/orders/:id", "/api/orders/1042?x=1", "get /api/orders/:id", "/api/orders/:id", "/api/orders/1042"}
	if testing.Short() {
		forms = forms[:2] // the route as the report names it, and a path to template
	}
	for _, e := range forms {
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

// The endpoints table says how many it shows of how many, and --top sets how many: a
// log of 12 endpoints, each with one failed first attempt and one retry.
func TestTopEndpoints(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 12 {
		for attempt, status := range []int{502, 200} {
			fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:%02d:%02d +0000] "GET /api/e%d HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="r%d" ik="-" retry_after="-" msec=%d.000`+"\n",
				i, attempt, i, status, status, attempt, i, 1795960800+60*i+attempt)
		}
	}
	log := filepath.Join(t.TempDir(), "twelve.log")
	os.WriteFile(log, []byte(b.String()), 0o644)
	for _, tc := range []struct {
		top        string
		rows       int
		cut, notIn string
	}{
		{"10", 10, "endpoints with retries, most first (10 of 12 shown; --top 0 for all):", ""},
		{"3", 3, "(3 of 12 shown; --top 0 for all)", ""},
		{"0", 12, "endpoints with retries, most first:", "shown"},
	} {
		out, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--format", "table", "--top", tc.top, log)
		rows := strings.Count(out, "│ GET /api/e")
		if code != 0 || rows != tc.rows || !strings.Contains(out, tc.cut) || (tc.notIn != "" && strings.Contains(out, tc.notIn)) {
			t.Errorf("--top %s: exit %d, %d rows, want %d and %q:\n%s%s", tc.top, code, rows, tc.rows, tc.cut, out, stderr)
		}
	}
	if _, _, code := retrylens(t, nil, "report", "--log-format", "retry", "--top", "-1", log); code != exitUsage {
		t.Errorf("--top -1: exit %d, want %d", code, exitUsage)
	}
}

// -o's extension sets the format unless --format says otherwise, and a flag that does
// nothing in the chosen format is an error.
func TestOutputFormatFromFile(t *testing.T) {
	t.Parallel()
	db := ingested(t, "incident-hour")
	dir := t.TempDir()
	for _, tc := range []struct {
		file, format, starts string
	}{
		{"p.html", "", "<!DOCTYPE html>"},
		{"p.json", "", "{"},
		{"p.md", "", "## retrylens report"},
		{"p.csv", "", "start,requests,"},
		{"p.txt", "", "retrylens report"},
		{"p2.json", "html", "<!DOCTYPE html>"},
	} {
		args := []string{"report", "--db", db, "-o", filepath.Join(dir, tc.file)}
		if tc.format != "" {
			args = append(args, "--format", tc.format)
		}
		if _, stderr, code := retrylens(t, nil, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(dir, tc.file))
		if !strings.HasPrefix(string(b), tc.starts) {
			t.Errorf("-o %s --format %q: starts %.40q, want %q", tc.file, tc.format, b, tc.starts)
		}
	}
	for _, args := range [][]string{
		{"--section", "endpoints"}, // tsv in a pipe
		{"--section", "endpoints", "--format", "json"},
		{"--top", "3", "--format", "json"},
		{"--top", "3", "--format", "csv"},
	} {
		_, stderr, code := retrylens(t, nil, append([]string{"report", "--db", db}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}
