package testmain

import (
	"os"
	"strings"
	"testing"
)

// DocSection checks that the file at path holds content between its begin and end
// marker lines, or with update writes it there; regenerate is the command that does, for
// the failure message. Docs carry tables the code computes (docs/metrics.md's figures,
// docs/formats.md's SDK families) this way, so that they cannot drift.
func DocSection(t *testing.T, path, begin, end, content string, update bool, regenerate string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q markers", path, begin, end)
	}
	want := doc[:i+len(begin)] + content + doc[j:]
	if update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s between %q and %q is not what the code computes: %s", path, strings.TrimSpace(begin), strings.TrimSpace(end), regenerate)
	}
}
