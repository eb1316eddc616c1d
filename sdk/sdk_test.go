package sdk

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the catalogue's table in docs/formats.md")

// docs/formats.md carries the catalogue as Markdown between its markers (go test ./sdk
// -update writes it again).
func TestCatalogueDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "formats.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- sdks: sdk.Markdown -->\n", "<!-- end of sdks -->\n"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q markers", path, begin, end)
	}
	want := doc[:i+len(begin)] + Markdown() + doc[j:]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s's table of SDK families is not sdk.Families: go test ./sdk -update", path)
	}
}

// Every family is read by its attempt header, once; the unions hold each code once.
func TestFamilies(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Families {
		if f.Attempt == "" || seen[f.Attempt] || (f.First != 0 && f.First != 1) {
			t.Errorf("%s: attempt header %q (first %d): want one of its own, numbered from 0 or 1", f.Name, f.Attempt, f.First)
		}
		seen[f.Attempt] = true
		if (f.Operation == "") != (f.Reads == "") {
			t.Errorf("%s: an operation header and what reads go together", f.Name)
		}
	}
	codes := ThrottleCodes()
	for i, c := range codes {
		for _, d := range codes[i+1:] {
			if c == d {
				t.Errorf("%s twice", c)
			}
		}
	}
}
