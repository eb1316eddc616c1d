//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTracedClient runs a real traced client: grpc-go with a retry policy and its
// OpenTelemetry tracing, its spans exported by the OpenTelemetry SDK's own OTLP/HTTP
// exporter and written as OTLP JSON (lab/otel, its own module). The report from the
// traces alone must equal the client's and the server's record: calls, attempts (the
// server counts what it answered), retries, recovered and exhausted calls, every call
// linked by its span.
func TestTracedClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client := filepath.Join(dir, "otelclient")
	build := exec.Command("go", "-C", filepath.Join("..", "..", "lab", "otel"), "build", "-o", client, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the traced client (lab/otel, its own module): %v\n%s", err, out)
	}
	traces := filepath.Join(dir, "traces.json")
	run := exec.Command(client, "-calls", "60", "-out", traces)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("otelclient: %v\n%s", err, stderr.Bytes())
	}
	// the truth: each call's attempts as the server answered them, and how it ended
	var calls, attempts, recovered, exhausted int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c struct {
			Attempts int
			Code     string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		calls++
		attempts += c.Attempts
		switch {
		case c.Code == "OK" && c.Attempts > 1:
			recovered++
		case c.Code != "OK" && c.Attempts > 1:
			exhausted++
		}
	}
	if calls != 60 || recovered == 0 || exhausted == 0 {
		t.Fatalf("the client's record: %d calls, %d recovered, %d exhausted; want 60 and some of each", calls, recovered, exhausted)
	}

	db := filepath.Join(dir, "t.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, traces); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	js, stderr2, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr2)
	}
	var r struct {
		Summary map[string]any
		Linking map[string]int
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	num := func(k string) int { f, _ := r.Summary[k].(float64); return int(f) }
	got := [5]int{num("requests"), num("first_attempts"), num("retries"), num("recovered"), num("exhausted")}
	want := [5]int{attempts, calls, attempts - calls, recovered, exhausted}
	if got != want {
		t.Errorf("attempts, first attempts, retries, recovered, exhausted from the traces %v; the client's record %v", got, want)
	}
	if r.Linking["request_id"] != calls || r.Linking["heuristic"] != 0 {
		t.Errorf("linking %v: want every one of %d calls linked by its span", r.Linking, calls)
	}
}
