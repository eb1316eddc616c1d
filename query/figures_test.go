package query

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite the table of figures in docs/metrics.md")

// docs/metrics.md carries the table of Figures as the code computes them, between its
// "figures" markers (go test ./query -run TestFiguresDoc -update writes it again).
func TestFiguresDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "metrics.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- figures: query.FiguresMarkdown -->\n", "<!-- end of figures -->\n"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q markers", path, begin, end)
	}
	want := doc[:i+len(begin)] + FiguresMarkdown() + doc[j:]
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s's table of figures is not query.Figures: go test ./query -run TestFiguresDoc -update", path)
	}
}

// Every figure's counts are in the catalogue of counts, and Sums computes what Metrics
// holds: the surfaces that serve counts give the report's ratios.
func TestFiguresSums(t *testing.T) {
	var c counts
	for i, col := range countColumns {
		*col.place(&c) = int64(1000 - 7*i) // every denominator positive
	}
	m := c.metrics(DefaultRules())
	for _, f := range Figures {
		num, den := f.Sums(m.Counts)
		typed := map[string]*float64{"amplification": m.Amplification, "retry_rate": m.RetryRate, "retry_success_rate": m.RetrySuccessRate,
			"extra_load": m.ExtraLoad, "actual_success": m.ActualSuccess, "effective_success": m.EffectiveSuccess,
			"proxy_amplification": m.ProxyAmplification}
		got, ok := typed[f.Key]
		if !ok { // a figure without a field of its own: the JSON's (Metrics.Figure)
			got = m.Figure(f.Key)
		}
		if got == nil || den <= 0 || *got != float64(num)/float64(den) {
			t.Errorf("%s: Metrics %v, Sums %d / %d", f.Key, got, num, den)
		}
	}
}
