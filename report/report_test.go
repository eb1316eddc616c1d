package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func fp(x float64) *float64 { return &x }

// sample is a hand-made report: two windows, one calm and one storming, and a range
// summary that is their sum (done by hand: 100+130 requests, 98+60 first attempts…).
func sample() *Report {
	calm := judge.Metrics{Requests: 100, Untagged: 2, FirstAttempts: 98, Retries: 0, EffectiveSuccess: fp(1),
		Amplification: fp(1), RetryRate: fp(0), ExtraLoad: fp(0), ActualSuccess: fp(1)}
	storm := judge.Metrics{Requests: 130, Untagged: 0, FirstAttempts: 60, Retries: 70,
		Amplification: fp(130.0 / 60), RetryRate: fp(40.0 / 60), RetrySuccessRate: fp(21.0 / 70),
		ExtraLoad: fp(70.0 / 130), ActualSuccess: fp(51.0 / 130),
		Recovered: 21, Exhausted: 12, EffectiveSuccess: fp(48.0 / 60),
		Status5xx: judge.Split{First: 35, Retry: 44}, Status429: judge.Split{First: 4, Retry: 5}}
	all := judge.Metrics{Requests: 230, Untagged: 2, FirstAttempts: 158, Retries: 70,
		Amplification: fp(228.0 / 158), RetryRate: fp(40.0 / 158), RetrySuccessRate: fp(21.0 / 70),
		ExtraLoad: fp(70.0 / 228), ActualSuccess: fp(149.0 / 228),
		Recovered: 21, Exhausted: 12, EffectiveSuccess: fp(146.0 / 158),
		Status5xx: judge.Split{First: 35, Retry: 44}, Status429: judge.Split{First: 4, Retry: 5}}
	// retry_storm fired in the storm's first minutes: it and the range are fuelling
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	storm15 := judge.Alert{Rule: "retry_storm", Severity: "P1", Start: t0.Add(time.Hour), End: t0.Add(time.Hour + 5*time.Minute), Peak: 2.4}
	rules, fired := judge.DefaultRules(), []string{"retry_storm"}
	calm, storm, all = judge.Judged(calm, nil, rules), judge.Judged(storm, fired, rules), judge.Judged(all, fired, rules)
	return &Report{GeneratedAt: time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC), Window: "1h", Result: postmortem.Result{
		Width: time.Hour,
		From:  t0.Add(512 * time.Millisecond), To: t0.Add(119*time.Minute + 30*time.Second),
		Summary: all,
		Windows: []judge.Window{{Start: t0, Metrics: calm}, {Start: t0.Add(time.Hour), Metrics: storm}},
		Alerts:  []judge.Alert{storm15},
		Loops:   query.Loops429{Loops: 3, MaxLength: 4, PrematureRetries: 5, BlindRetries: 2, Retry429Share: fp(5.0 / 9)},
		Findings: []query.Finding{
			{Kind: "duplicate_write_risk", Count: 2, Attempts: 3, Examples: []string{"req-1", "req-<b>2</b>\x1b[2J"}},
		},
		Endpoints: []query.Group{{Key: "GET /api/items/:id", Metrics: storm}, {Key: "GET /healthz", Metrics: calm}},
		Linking:   query.Linking{RequestID: 150, IdempotencyKey: 4, Heuristic: 4},
	}}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestGolden(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		format := string(f)
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, f, sample()); err != nil {
				t.Fatal(err)
			}
			golden(t, "sample."+format+".golden", b.Bytes())
		})
		// The same report grouped by status (an attacker-chosen key among them), shown in
		// Paris time.
		t.Run(format+" by status", func(t *testing.T) {
			r := sample()
			r.Location, r.By, r.Endpoint = paris, "status", "/api/items/:id"
			r.Groups = []query.Group{{Key: "502", Metrics: r.Windows[1].Metrics}, {Key: "<i>200</i>\x07", Metrics: r.Windows[0].Metrics}}
			var b bytes.Buffer
			if err := Write(&b, f, r); err != nil {
				t.Fatal(err)
			}
			golden(t, "by-status."+format+".golden", b.Bytes())
		})
	}
}

// The verdicts follow from docs/metrics.md: an alert fired in the storm window (and so in
// the range); the calm one has 98 first attempts and no retries.
func TestVerdicts(t *testing.T) {
	r := sample()
	got := []string{r.Windows[0].Verdict, r.Windows[1].Verdict, r.Summary.Verdict}
	want := []string{"quiet", "fuelling", "fuelling"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}

// Log-derived cells that a spreadsheet would run as formulas are defused in CSV.
func TestCSVFormulaSafe(t *testing.T) {
	r := sample()
	r.Findings = []query.Finding{{Kind: "false_success", Count: 1, Attempts: 1, Examples: []string{`=HYPERLINK("http://x","y")`}}}
	r.Groups, r.By = []query.Group{{Key: "@SUM(A1)", Metrics: r.Summary}, {Key: "-12", Metrics: r.Summary}}, "host"
	var b bytes.Buffer
	if err := CSV(&b, r, "findings"); err != nil {
		t.Fatal(err)
	}
	if want := "kind,count,attempts,examples\nfalse_success,1,1,\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\n"; b.String() != want {
		t.Errorf("findings CSV:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := CSV(&b, r, "groups"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[1], "'@SUM(A1),") || !strings.HasPrefix(lines[2], "-12,") {
		t.Errorf("groups CSV:\n%s", b.String())
	}
}

// Past ten bars, the tail of the attempts chart folds into a last "N+" bar that holds
// its requests; ten bars exactly are labelled as they are.
func TestAttemptBarsFold(t *testing.T) {
	var cs []query.AttemptCount
	for n := 1; n <= 12; n++ {
		cs = append(cs, query.AttemptCount{Attempts: n, Requests: int64(100 - n)})
	}
	b := attemptBars(cs)
	if len(b.Bars) != 10 || b.Bars[9].Label != "267" || b.Labels[9].Text != "10+" {
		t.Errorf("12 counts: %d bars, last %q labelled %q; want 10 bars, the last 90+89+88 = 267 labelled 10+", len(b.Bars), b.Bars[9].Label, b.Labels[9].Text)
	}
	b = attemptBars(cs[:10])
	if len(b.Bars) != 10 || b.Labels[9].Text != "10" {
		t.Errorf("10 counts: last labelled %q, want 10", b.Labels[9].Text)
	}
}

// How good the linking is: orphans are named in the linking note, and a heuristic that
// linked more than a tenth of the retries (5 of 10 here) gets a warning line; at a tenth
// (1 of 10), none.
func TestLinkingQuality(t *testing.T) {
	r := sample()
	r.Linking = query.Linking{RequestID: 7, Heuristic: 3, Retries: 10, HeuristicRetries: 5, Orphans: 2}
	var b bytes.Buffer
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"; 2 retries with no earlier attempt to link to",
		"warning: 50% of the retries (5 of 10) were linked by client, method and URI"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	r.Linking.HeuristicRetries = 1
	b.Reset()
	Table(&b, r)
	if strings.Contains(b.String(), "warning:") {
		t.Errorf("a warning at a tenth:\n%s", b.String())
	}
}

// Time labels fall on round clock times, evenly spaced, at most timeTicks+1 of them.
func TestTicks(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 250_000_000, time.UTC)
	clock := func(ts []time.Time) string {
		var s []string
		for _, at := range ts {
			s = append(s, at.Format("15:04:05"))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		from, to time.Time
		want     string
	}{
		// the quick start's hour, which ends half a minute early: 10-minute steps
		{t0, t0.Add(59*time.Minute + 30*time.Second), "09:10:00 09:20:00 09:30:00 09:40:00 09:50:00"},
		// six hours: one an hour
		{t0.Add(-250 * time.Millisecond), t0.Add(6 * time.Hour), "09:00:00 10:00:00 11:00:00 12:00:00 13:00:00 14:00:00 15:00:00"},
		// 90 seconds: every 15 s
		{t0, t0.Add(90 * time.Second), "09:00:15 09:00:30 09:00:45 09:01:00 09:01:15 09:01:30"},
	} {
		if got := clock(ticks(tc.from, tc.to, time.UTC)); got != tc.want {
			t.Errorf("ticks(%s, %s) = %s, want %s", tc.from.Format("15:04:05.000"), tc.to.Format("15:04:05.000"), got, tc.want)
		}
	}
	// on the report's own clock: a +05:30 zone's hours
	kolkata := time.FixedZone("IST", 5*3600+1800)
	if got := ticks(t0, t0.Add(3*time.Hour), kolkata); len(got) == 0 || got[0].In(kolkata).Minute() != 0 {
		t.Errorf("ticks in +05:30: %v, want whole hours there", got)
	}
}

// A range of a single bucket draws its figures as points: a line needs two.
func TestSingleBucketPoints(t *testing.T) {
	r := sample()
	r.Chart, r.ChartWidth = r.Windows[:1], time.Hour
	var out bytes.Buffer
	if err := HTML(&out, r); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, class := range []string{"amp", "retry"} {
		if !strings.Contains(page, `<circle class="series `+class+`"`) {
			t.Errorf("no point for %s in the one-bucket chart", class)
		}
	}
	if strings.Contains(page, "<polyline") {
		t.Error("a line of one point")
	}
}

// A table in a terminal fits it: a 120-character endpoint is cut with "…" to a quarter
// of the width, so that the table keeps its requests column.
func TestLongEndpointFits(t *testing.T) {
	r := sample()
	long := "GET /api/" + strings.Repeat("segment/", 14) + ":id"
	r.Endpoints = []query.Group{{Key: long, Metrics: r.Endpoints[0].Metrics}}
	r.Columns = 100
	var out bytes.Buffer
	if err := Table(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(l); strings.HasPrefix(l, "│") && n > 100 {
			t.Errorf("a table line of %d columns in 100:\n%s", n, l)
		}
	}
	if !strings.Contains(out.String(), "│ GET /api/segment/segment… │      130 │") || strings.Contains(out.String(), long) {
		t.Errorf("the endpoint is not cut with a marker:\n%s", out.String())
	}
}
