package judge

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

var updateDocs = flag.Bool("update", false, "rewrite the table of figures in docs/metrics.md")

// docs/metrics.md carries the table of Figures as the code computes them, between its
// "figures" markers (go test ./judge -run TestFiguresDoc -update writes it again).
func TestFiguresDoc(t *testing.T) {
	testmain.DocSection(t, filepath.Join("..", "docs", "metrics.md"), "<!-- figures: judge.FiguresMarkdown -->\n", "<!-- end of figures -->\n",
		FiguresMarkdown(), *updateDocs, "go test ./judge -run TestFiguresDoc -update")
}
