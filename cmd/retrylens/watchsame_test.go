package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/watch"
)

// The live figures are the report's: for each sample log and a generated one, a watch's
// batches (one mid-log, one after it) then its /metrics (gathered in-process) against
// 'retrylens report --until' the time the watch says its counters are final up to, with
// the same --max-attempts and --throttle-status, on every series /metrics exposes: a
// series this test does not know how to compare fails it. What each series is is
// written here from docs/live.md, not taken from the watch's own tables.
func TestWatchIsTheReport(t *testing.T) {
	if testing.Short() {
		t.Skip("six watches and their reports")
	}
	t.Parallel()
	gen := ""
	if testmain.EndToEnd {
		gen = generated(t, 20000, 5)
	}
	for _, c := range []struct {
		name, log, window string
	}{
		{"incident-hour", scenario("incident-hour"), "1m"},
		{"quiet-hour", scenario("quiet-hour"), "1m"},
		{"keys-that-lie", scenario("keys-that-lie"), "1m"},
		{"overlapping-attempts", scenario("overlapping-attempts"), "10s"},
		{"untagged-firsts", scenario("untagged-firsts"), "1m"},
		{"aws-throttles", awsThrottleLog(t), "1m"},                           // throttles by error code, reads that are POSTs
		{"aws-throttles retry-sdk", awsShortLog(t, awsThrottleLog(t)), "1m"}, // what the line cannot tell: not judged
		{"generated", gen, "1m"},
		{"incident-hour late", scenario("incident-hour"), "1m"},
		{"overlapping-attempts late", scenario("overlapping-attempts"), "10s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "generated" {
				testmain.EndToEndOnly(t) // 20 s of watches and reports
			}
			t.Parallel()
			if strings.HasSuffix(c.name, " late") {
				watchIsTheReportLate(t, c.log, "", c.window, 7) // a line in seven loaded after the rest was counted
				return
			}
			watchIsTheReport(t, c.log, "", c.window)
		})
	}
}

// liveReport is what the tests of watch read of a JSON report, to compare with /metrics.
type liveReport struct {
	Summary   map[string]any   `json:"summary"`
	Windows   []map[string]any `json:"windows"`
	Endpoints []map[string]any `json:"endpoints"`
	Hedging   map[string]any   `json:"hedging"`
	Loops     map[string]any   `json:"loops_429"`
	Findings  []map[string]any `json:"findings"`
	NotJudged []map[string]any `json:"not_judged"`
	Backoff   []map[string]any `json:"backoff"`
	Layers    struct {
		Fates map[string]float64 `json:"fates"`
	} `json:"layers"`
}

// watchIsTheReport is TestWatchIsTheReport's comparison for one log of a format preset
// ("" detects it) at a window width.
func watchIsTheReport(t *testing.T, log, format, window string) {
	t.Helper()
	watchIsTheReportLate(t, log, format, window, 0)
}

// watchIsTheReportLate is watchIsTheReport with every lateEvery-th line of the log (0:
// none) held back and appended once the batches have counted every request: lines older
// than what the counters hold, which a third batch loads. The counters then equal the
// report of every line as well.
func watchIsTheReportLate(t *testing.T, log, format, window string, lateEvery int) {
	t.Helper()
	ctx := context.Background()
	var held []string
	if lateEvery > 0 {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for i, l := range strings.SplitAfter(string(b), "\n") {
			if i%lateEvery == lateEvery-1 {
				held = append(held, l)
			} else {
				kept = append(kept, l)
			}
		}
		log = filepath.Join(t.TempDir(), "early.log")
		if err := os.WriteFile(log, []byte(strings.Join(kept, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var load ingest.Options
	formatArgs := []string{}
	if format != "" {
		pf, err := parse.Preset(format)
		if err != nil {
			t.Fatal(err)
		}
		load.Format, formatArgs = pf, []string{"--log-format", format}
	}
	db := filepath.Join(t.TempDir(), "w.duckdb")
	width, err := query.ParseWindow(window)
	if err != nil {
		t.Fatal(err)
	}
	// The log's span, to place the batches: one in its middle, one well after it.
	if _, stderr, code := retrylens(t, nil, append(append([]string{"ingest", "--quiet", "--db", db}, formatArgs...), log)...); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	var span struct{ From, To time.Time }
	out, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
	if code != 0 || json.Unmarshal([]byte(out), &span) != nil {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	figures := postmortem.Options{Query: query.Options{Rules: judge.DefaultRules(), Throttle: []int{429, 503}}, MaxAttempts: 2}
	var now time.Time
	w, err := watch.New(watch.Options{Location: db, Args: []string{log}, Load: load, Figures: figures, Settle: time.Second,
		Width: width, MaxEndpoints: 1 << 20, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{span.From.Add(span.To.Sub(span.From) / 2), span.To.Add(10 * time.Minute)} {
		now = at
		if err := w.Batch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(held) > 0 {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(strings.Join(held, ""))
		f.Close()
		now = span.To.Add(20 * time.Minute)
		if err := w.Batch(ctx); err != nil {
			t.Fatal(err)
		}
		if late := counter(t, w, "retrylens_late_rows_total"); late == 0 {
			t.Fatalf("%d lines appended late, no late row counted", len(held))
		}
	}
	page := served(t, w)
	closed := page["retrylens_closed_until_seconds"]
	if closed == nil {
		t.Fatal("no retrylens_closed_until_seconds: the batches closed nothing")
	}
	until := time.Unix(int64(closed.Metric[0].GetGauge().GetValue()), 0).UTC()
	if until.Before(span.To) {
		t.Fatalf("closed until %s, before the log's end %s", until, span.To)
	}
	out, stderr, code = retrylens(t, nil, "report", "--db", db, "--format", "json", "--until", until.Format(time.RFC3339),
		"--window", window, "--max-attempts", "2", "--throttle-status", "429,503")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var rep liveReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	num := func(m map[string]any, k string) float64 {
		v, ok := m[k].(float64)
		if !ok && m[k] != nil {
			t.Fatalf("report's %s is %v", k, m[k])
		}
		return v
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.Label {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	value := func(m *dto.Metric) float64 {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		return math.NaN()
	}
	// the report's row of a series: its endpoint's, every row other than one named
	endpoint := func(m *dto.Metric) map[string]any {
		if label(m, "method") == "other" {
			return nil
		}
		for _, e := range rep.Endpoints {
			if e["method"] == label(m, "method") && e["route"] == label(m, "route") {
				return e
			}
		}
		t.Fatalf("a series for %s %s, an endpoint the report lacks", label(m, "method"), label(m, "route"))
		return nil
	}
	same := func(what string, got, want float64) {
		t.Helper()
		if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want))) {
			t.Errorf("%s: /metrics %v, report %v", what, got, want)
		}
	}
	// counts per endpoint, by the report's JSON key (an "other" series counts nothing:
	// every endpoint has series of its own here)
	perEndpoint := func(m *dto.Metric, what string, want func(row map[string]any) float64) {
		row := endpoint(m)
		w := 0.0
		if row != nil {
			w = want(row)
		}
		same(fmt.Sprintf("%s{%s %s}", what, label(m, "method"), label(m, "route")), value(m), w)
	}
	var lastWindow map[string]any
	for _, win := range rep.Windows {
		if win["start"] == until.Add(-width).Format(time.RFC3339) {
			lastWindow = win
		}
	}
	if lastWindow == nil { // a closed window without a request
		lastWindow = map[string]any{"verdict": judge.NoAttemptData, "alerts": []any{}, "first_attempts": 0.0, "retries": 0.0,
			"recovered": 0.0, "exhausted": 0.0, "amplification": nil, "retry_rate": nil, "retry_success_rate": nil,
			"extra_load": nil, "actual_success": nil, "effective_success": nil, "proxy_amplification": nil}
	}
	ratioOf := func(row map[string]any, key string) float64 {
		if row[key] == nil {
			return math.NaN()
		}
		return num(row, key)
	}
	// the ratio of a numerator and a denominator (NaN without one), as the report's figures
	figure := func(num, den float64) float64 {
		if den <= 0 {
			return math.NaN()
		}
		return num / den
	}
	findings := map[string]float64{}
	for _, f := range rep.Findings {
		findings[f["kind"].(string)] = num(f, "count")
	}
	notJudged := map[string]float64{}
	for _, f := range rep.NotJudged {
		notJudged[f["kind"].(string)] = num(f, "count")
	}
	// the counters of the whole range, and where the report has each
	scalars := map[string]struct {
		in  map[string]any
		key string
	}{
		"retrylens_hedged_requests_total": {rep.Hedging, "requests"}, "retrylens_hedges_total": {rep.Hedging, "hedges"},
		"retrylens_hedge_wins_total": {rep.Hedging, "wins"}, "retrylens_loops_429_total": {rep.Loops, "loops"},
		"retrylens_premature_retries_total": {rep.Loops, "premature_retries"}, "retrylens_blind_retries_total": {rep.Loops, "blind_retries"},
	}
	compared := 0
	pairs := map[string]map[string][2]float64{} // figure numerators and denominators, per endpoint
	fates := map[string]float64{}               // summed over the endpoints
	for name, mf := range page {
		for _, m := range mf.Metric {
			compared++
			switch name {
			case "retrylens_attempts_total":
				key := map[string]string{"first": "first_attempts", "retry": "retries", "untagged": "untagged"}[label(m, "attempt")]
				perEndpoint(m, name+" "+key, func(r map[string]any) float64 { return num(r, key) })
			case "retrylens_requests_retried_total": // retry rate's numerator
				perEndpoint(m, name, func(r map[string]any) float64 {
					if r["retry_rate"] == nil {
						return 0 // no first attempt: none retried
					}
					return math.Round(num(r, "retry_rate") * num(r, "first_attempts"))
				})
			case "retrylens_attempts_succeeded_total": // retry success's numerator
				perEndpoint(m, name, func(r map[string]any) float64 {
					if r["retry_success_rate"] == nil {
						return 0
					}
					return math.Round(num(r, "retry_success_rate") * (num(r, "retries") - num(r, "cancelled_retry")))
				})
			case "retrylens_attempts_failed_total":
				key := "status_" + label(m, "status") + "_" + label(m, "attempt")
				perEndpoint(m, name+" "+key, func(r map[string]any) float64 { return num(r, key) })
			case "retrylens_attempts_abandoned_total", "retrylens_attempts_cancelled_total":
				key := strings.TrimSuffix(strings.TrimPrefix(name, "retrylens_attempts_"), "_total") + "_" + label(m, "attempt")
				perEndpoint(m, name+" "+key, func(r map[string]any) float64 { return num(r, key) })
			case "retrylens_requests_total":
				key := label(m, "outcome")
				perEndpoint(m, name+" "+key, func(r map[string]any) float64 { return num(r, key) })
			case "retrylens_request_fates_total":
				fates[label(m, "fate")] += value(m)
			case "retrylens_figure_numerator_total", "retrylens_figure_denominator_total":
				ep := label(m, "method") + " " + label(m, "route")
				if pairs[ep] == nil {
					pairs[ep] = map[string][2]float64{}
				}
				p := pairs[ep][label(m, "figure")]
				p[map[bool]int{true: 0, false: 1}[strings.Contains(name, "numerator")]] = value(m)
				pairs[ep][label(m, "figure")] = p
			case "retrylens_hedged_requests_total", "retrylens_hedges_total", "retrylens_hedge_wins_total",
				"retrylens_loops_429_total", "retrylens_premature_retries_total", "retrylens_blind_retries_total":
				sc := scalars[name]
				same(name, value(m), num(sc.in, sc.key))
			case "retrylens_findings_total":
				same(name+" "+label(m, "kind"), value(m), findings[label(m, "kind")])
			case "retrylens_not_judged_total":
				same(name+" "+label(m, "kind"), value(m), notJudged[label(m, "kind")])
			case "retrylens_backoff_seconds": // every retry that waited, of every attempt number
				var n float64
				for _, b := range rep.Backoff {
					n += num(b, "count")
				}
				same(name+" count", float64(m.Histogram.GetSampleCount()), n)
			case "retrylens_window_start_seconds":
				same(name, value(m), float64(until.Add(-width).Unix()))
			case "retrylens_window_first_attempts", "retrylens_window_retries", "retrylens_window_recovered", "retrylens_window_exhausted":
				same(name, value(m), num(lastWindow, strings.TrimPrefix(name, "retrylens_window_")))
			case "retrylens_window_verdict":
				same(name+" "+label(m, "verdict"), value(m), map[bool]float64{true: 1, false: 0}[lastWindow["verdict"] == label(m, "verdict")])
			case "retrylens_window_alert_firing":
				firing := 0.0
				for _, a := range lastWindow["alerts"].([]any) {
					if a == label(m, "rule") {
						firing = 1
					}
				}
				same(name+" "+label(m, "rule"), value(m), firing)
			case "retrylens_closed_until_seconds", "retrylens_lines_total", "retrylens_lines_rejected_total", "retrylens_batches_total",
				"retrylens_batch_failures_total", "retrylens_rotations_total", "retrylens_last_batch_timestamp_seconds",
				"retrylens_last_batch_duration_seconds", "retrylens_ingest_lag_bytes", "retrylens_endpoints_overflow_total", "retrylens_late_rows_total":
				// the ingest's health, not figures of the report
			default:
				if key, ok := strings.CutPrefix(name, "retrylens_window_"); ok && lastWindow != nil {
					if _, isFigure := lastWindow[key]; isFigure {
						same(name, value(m), ratioOf(lastWindow, key))
						continue
					}
				}
				t.Errorf("/metrics has %s, which this test does not compare with the report", name)
			}
		}
	}
	// the fates of the whole range, each endpoint's summed (the report's add up to its
	// logical requests, as watch's must)
	var total float64
	for fate, want := range rep.Layers.Fates {
		if fate == "logical_requests" {
			continue
		}
		same("retrylens_request_fates_total "+fate, fates[fate], want)
		total += fates[fate]
	}
	if len(fates) == 0 || total != rep.Layers.Fates["logical_requests"] {
		t.Errorf("fates %v add up to %v; the report's logical requests %v", fates, total, rep.Layers.Fates["logical_requests"])
	}
	// each figure, per endpoint, is its numerator over its denominator
	for ep, figs := range pairs {
		var row map[string]any
		for _, e := range rep.Endpoints {
			if e["method"].(string)+" "+e["route"].(string) == ep {
				row = e
			}
		}
		for key, p := range figs {
			if row == nil {
				if p != [2]float64{} {
					t.Errorf("figure %s of %s: %v over %v, an endpoint the report lacks", key, ep, p[0], p[1])
				}
				continue
			}
			same(fmt.Sprintf("figure %s of %s", key, ep), figure(p[0], p[1]), ratioOf(row, key))
		}
	}
	if compared < 50 || len(pairs) == 0 {
		t.Errorf("compared %d series, %d endpoints' figures: too few to say anything", compared, len(pairs))
	}
	rulesGiveTheReport(t, pairs, rep.Summary)
}

// rulesGiveTheReport runs the recording rules of contrib/prometheus on the figures'
// counters as /metrics served them (summed over endpoints, reached linearly over five
// minutes) with promtool, and requires each retrylens:<figure>:ratio5m to be the report's
// figure for the whole range.
func rulesGiveTheReport(t *testing.T, pairs map[string]map[string][2]float64, summary map[string]any) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (Debian: apt-get install prometheus)")
		}
		t.Skip("promtool not found (Debian: apt-get install prometheus)")
	}
	rules, err := filepath.Abs(filepath.Join("..", "..", "contrib", "prometheus", "retrylens.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string][2]float64{}
	for _, figs := range pairs {
		for key, p := range figs {
			tt := totals[key]
			totals[key] = [2]float64{tt[0] + p[0], tt[1] + p[1]}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files: [%q]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	var exprs strings.Builder
	keys := slices.Sorted(maps.Keys(totals))
	for _, key := range keys {
		for i, name := range []string{"retrylens_figure_numerator_total", "retrylens_figure_denominator_total"} {
			fmt.Fprintf(&b, "      - series: '%s{figure=%q,method=\"all\",route=\"all\"}'\n        values: '0+%gx5'\n", name, key, totals[key][i])
		}
		want, ok := summary[key].(float64)
		if !ok {
			continue // no denominator: NaN, which a test cannot expect
		}
		fmt.Fprintf(&exprs, "      - expr: retrylens:%s:ratio5m\n        eval_time: 5m\n        exp_samples:\n          - labels: 'retrylens:%s:ratio5m'\n            value: %s\n",
			key, key, strconv.FormatFloat(want, 'g', -1, 64))
	}
	if exprs.Len() == 0 {
		t.Fatal("the report has no figure to compare the rules with")
	}
	b.WriteString("    promql_expr_test:\n" + exprs.String())
	test := filepath.Join(t.TempDir(), "figures.test.yml")
	if err := os.WriteFile(test, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", test).CombinedOutput(); err != nil {
		t.Errorf("the recording rules on /metrics's counters are not the report's figures: %v\n%s", err, out)
	}
}
