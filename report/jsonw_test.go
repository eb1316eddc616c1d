package report

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

// TestJSONWriterMatchesEncoding checks that the JSON report is laid out as
// encoding/json's indenting Encoder lays it out: indenting its compact form again with
// encoding/json gives the same bytes, for a report with every kind of member (empty and
// nil lists, missing ratios, a grouping, text to escape, alerts).
func TestJSONWriterMatchesEncoding(t *testing.T) {
	r := sample()
	storm := r.Windows[1].Metrics
	storm.Fired = []string{"retry_storm", "retry_rate_high"}
	r.Endpoints = append(r.Endpoints, query.Group{Key: "POST /<script>\u2028\xff\"q\"", Metrics: storm}, query.Group{Key: "", Metrics: judge.Metrics{}})
	r.By, r.Groups = "status", []query.Group{{Key: "502", Metrics: storm}}
	r.Incidents = []query.Incident{{Span: judge.Span{Start: r.From, End: r.To}, During: storm}}
	r.Alerts = []judge.Alert{{Rule: "retry_storm", Severity: "P1", Start: r.From, End: r.From.Add(time.Minute), Peak: 2.5}}
	r.Endpoint = "GET /api/items/:id"
	for name, rep := range map[string]*Report{"rich": r, "empty": {GeneratedAt: r.GeneratedAt, Window: "1m"}} {
		var got bytes.Buffer
		if err := JSON(&got, rep); err != nil {
			t.Fatal(err)
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, got.Bytes()); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, got.String())
		}
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		want.WriteByte('\n')
		if got.String() != want.String() {
			t.Errorf("%s: laid out unlike encoding/json:\n%s\nwant:\n%s", name, got.String(), want.String())
		}
	}
}

// FuzzJSONValue checks the writer's strings and numbers against encoding/json's.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{"", "GET /api", "<a&b>", "\u2028", "\xff", "\x00\t\"\\"} {
		f.Add(s, 0.1, int64(-3))
	}
	f.Add("x", 1e-7, int64(math.MaxInt64))
	f.Add("x", 1e21, int64(math.MinInt64))
	f.Add("x", -123456.789e-12, int64(0))
	f.Fuzz(func(t *testing.T, s string, x float64, n int64) {
		for _, v := range []any{s, &x, n, []string{s}} {
			want, err := json.MarshalIndent(v, "", "  ")
			got, gerr := appendValue(nil, v, "")
			if (err == nil) != (gerr == nil) {
				t.Fatalf("%#v: error %v, encoding/json's %v", v, gerr, err)
			}
			if err == nil && string(got) != string(want) {
				t.Fatalf("%#v: %s, encoding/json writes %s", v, got, want)
			}
		}
	})
}
