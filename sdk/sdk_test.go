package sdk

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

var update = flag.Bool("update", false, "rewrite the catalogue's table in docs/formats.md")

// docs/formats.md carries the catalogue as Markdown between its markers (go test ./sdk
// -update writes it again).
func TestCatalogueDoc(t *testing.T) {
	testmain.DocSection(t, filepath.Join("..", "docs", "formats.md"), "<!-- sdks: sdk.Markdown -->\n", "<!-- end of sdks -->\n",
		Markdown(), *update, "go test ./sdk -update")
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
