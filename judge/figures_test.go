package judge

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
	const begin, end = "<!-- figures: judge.FiguresMarkdown -->\n", "<!-- end of figures -->\n"
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
		t.Errorf("%s's table of figures is not judge.Figures: go test ./query -run TestFiguresDoc -update", path)
	}
}
