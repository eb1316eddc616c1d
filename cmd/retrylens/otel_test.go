package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenTelemetry traces as input: the hand-made OTLP file of testdata/otel gives the
// figures worked by hand in its README, and so does its Jaeger JSON; loaded again it adds
// nothing; loaded as it grew (three documents and half the fourth, which it says is
// unfinished, then all five) it gives the same rows as at once.
func TestTraces(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "testdata", "otel", "traces.json")
	type metrics struct {
		Requests, FirstAttempts, Retries, Recovered, Exhausted                      int
		Amplification, RetryRate, RetrySuccessRate, EffectiveSuccess, ActualSuccess float64
		Status5xxFirst, Status5xxRetry, Status429First, Status429Retry              int
	}
	want := metrics{Requests: 15, FirstAttempts: 8, Retries: 7, Recovered: 4, Exhausted: 1,
		Amplification: 1.875, RetryRate: 0.625, RetrySuccessRate: 4.0 / 7, EffectiveSuccess: 0.75, ActualSuccess: 0.4,
		Status5xxFirst: 3, Status5xxRetry: 3, Status429First: 2}
	summary := func(db string) (metrics, map[string]int) {
		t.Helper()
		out, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		var r struct {
			Summary map[string]any `json:"summary"`
			Linking map[string]int `json:"linking"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		num := func(k string) float64 { f, _ := r.Summary[k].(float64); return f }
		return metrics{int(num("requests")), int(num("first_attempts")), int(num("retries")), int(num("recovered")), int(num("exhausted")),
			num("amplification"), num("retry_rate"), num("retry_success_rate"), num("effective_success"), num("actual_success"),
			int(num("status_5xx_first")), int(num("status_5xx_retry")), int(num("status_429_first")), int(num("status_429_retry"))}, r.Linking
	}

	out, stderr, code := retrylens(t, nil, "ingest", "--dry-run=1", src)
	for _, want := range []string{"format otel", "  attempt          0 (from grpc-previous-rpc-attempts)", "  status           503", "  error_code       UNAVAILABLE"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dry run of the traces lacks %q:\n%s", want, out)
		}
	}

	db := filepath.Join(t.TempDir(), "t.duckdb")
	out, stderr, code = retrylens(t, nil, "ingest", "--db", db, src)
	if code != 0 || !strings.Contains(stderr, "otel format, 15 lines, 15 rows, 0 rejected") {
		t.Fatalf("ingest: exit %d: %s%s", code, out, stderr)
	}
	got, linking := summary(db)
	if got != want {
		t.Errorf("figures from the traces:\n got %+v\nwant %+v", got, want)
	}
	if linking["request_id"] != 7 || linking["heuristic"] != 1 {
		t.Errorf("linking %v, want 7 by request id and 1 by client, method and URI", linking)
	}
	// traces alone: their 15 attempts are the spans, no gateway line matched any, and what
	// they count is what clients sent, not what a gateway carried
	out, stderr, code = retrylens(t, nil, "report", "--db", db, "--format", "json")
	var layers struct {
		Layers struct{ Spans, Matched int } `json:"layers"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &layers) != nil || layers.Layers.Spans != 15 || layers.Layers.Matched != 0 {
		t.Errorf("layers of traces alone: %+v, exit %d: %s; want 15 spans, 0 matched", layers.Layers, code, stderr)
	}
	if out, _, _ = retrylens(t, nil, "report", "--db", db, "--format", "table"); !strings.Contains(out, "What was sent: 15 requests (15 read from traces that no gateway line matched)") ||
		strings.Contains(out, "gateway carried") {
		t.Errorf("traces alone read as what a gateway carried:\n%s", out)
	}
	// the same spans as Jaeger's JSON (one document over many lines, traces in its order)
	dbj := filepath.Join(t.TempDir(), "t.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", dbj, filepath.Join("..", "..", "testdata", "otel", "jaeger.json")); code != 0 {
		t.Fatalf("ingest of jaeger.json: exit %d: %s", code, stderr)
	}
	if gotj, _ := summary(dbj); gotj != want {
		t.Errorf("figures from Jaeger's JSON:\n got %+v\nwant %+v", gotj, want)
	}
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, src); code != 0 || !strings.Contains(stderr, "skipped, already loaded") {
		t.Errorf("the same traces again: exit %d: %s", code, stderr)
	}

	// a file that grew: its first three documents, then all of it
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.SplitAfter(string(b), "\n")
	grown := filepath.Join(t.TempDir(), "traces.json")
	db2 := filepath.Join(t.TempDir(), "t.duckdb")
	// the fourth half written: said, and read once complete
	half := strings.Join(docs[:3], "") + docs[3][:len(docs[3])/2]
	for _, content := range []string{half, strings.Join(docs, "")} {
		if err := os.WriteFile(grown, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := retrylens(t, nil, "ingest", "--db", db2, grown)
		if code != 0 {
			t.Fatalf("ingest of %d bytes: exit %d: %s%s", len(content), code, out, stderr)
		}
		unfinished := strings.Contains(stderr, "the trace document from line 4 on is unfinished")
		if unfinished != (content == half) {
			t.Errorf("ingest of %d bytes: says an unfinished document %v, want %v:\n%s", len(content), unfinished, content == half, stderr)
		}
	}
	if got2, _ := summary(db2); got2 != want {
		t.Errorf("loaded as it grew:\n got %+v\nwant %+v", got2, want)
	}
}

// Every retry layer at once (testdata/otel/README.md, "gateway.log"): the traces and a
// gateway's lines of the same attempts in one database give the figures worked by hand,
// each attempt counted once, whichever is loaded first and whether in one ingest or two;
// the gateway's own retries show in the fates, the join in its match.
func TestLayers(t *testing.T) {
	t.Parallel()
	traces, gateway := filepath.Join("..", "..", "testdata", "otel", "traces.json"), filepath.Join("..", "..", "testdata", "otel", "gateway.log")
	type summary struct {
		Requests, FirstAttempts, Retries, Recovered, Exhausted int
		EffectiveSuccess, ProxyAmplification                   float64
	}
	type layers struct {
		Spans          int       `json:"spans"`
		Matched        int       `json:"matched"`
		MatchRate      float64   `json:"match_rate"`
		UnmatchedLines int       `json:"unmatched_lines"`
		Fates          jsonFates `json:"fates"`
	}
	want := struct {
		Summary summary
		Layers  layers
	}{
		summary{Requests: 16, FirstAttempts: 9, Retries: 7, Recovered: 4, Exhausted: 1, EffectiveSuccess: 7.0 / 9, ProxyAmplification: 17.0 / 15},
		layers{Spans: 15, Matched: 14, MatchRate: 14.0 / 15, UnmatchedLines: 1,
			Fates: jsonFates{Logical: 9, FirstTry: 2, Gateway: 1, Client: 4, Exhausted: 1, FailedWithoutRetry: 1}},
	}
	orders := [][][]string{{{gateway}, {traces}}, {{traces, gateway}}, {{traces}, {gateway}}}
	if testing.Short() {
		orders = orders[:1] // the one whose second load joins rows loaded before
	}
	for _, loads := range orders {
		db := filepath.Join(t.TempDir(), "r.duckdb")
		for _, files := range loads {
			if _, stderr, code := retrylens(t, nil, append([]string{"ingest", "--db", db}, files...)...); code != 0 {
				t.Fatalf("ingest %v: exit %d: %s", files, code, stderr)
			}
		}
		out, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		var got struct {
			Summary struct {
				Requests           int     `json:"requests"`
				FirstAttempts      int     `json:"first_attempts"`
				Retries            int     `json:"retries"`
				Recovered          int     `json:"recovered"`
				Exhausted          int     `json:"exhausted"`
				EffectiveSuccess   float64 `json:"effective_success"`
				ProxyAmplification float64 `json:"proxy_amplification"`
			} `json:"summary"`
			Layers layers `json:"layers"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		s := summary(got.Summary)
		if s != want.Summary || got.Layers != want.Layers {
			t.Errorf("loaded as %v:\n got  %+v\n      %+v\n want %+v\n      %+v", loads, s, got.Layers, want.Summary, want.Layers)
		}
	}
}
