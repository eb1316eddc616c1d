package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/*/golden (never the inputs)")

// Each sample's postmortem in every output format, against golden files. The numbers in
// them are the ones the other tests check against EXPECTED.md; the goldens pin the
// presentation.
// Each log is loaded once, and every format is reported from that database (through its
// report cache, which must give the same bytes as linking the rows).
func TestGolden(t *testing.T) {
	t.Parallel()
	scenarios := []string{"incident-hour", "quiet-hour"}
	if testing.Short() {
		scenarios = scenarios[:1] // every format of the hour with alerts and findings
	}
	for _, sc := range scenarios {
		db := ingested(t, sc)
		for _, tt := range []struct{ name, format string }{
			{"report.table", "table"}, {"report.tsv", "tsv"}, {"report.md", "markdown"}, {"report.json", "json"},
			{"windows.csv", "csv"}, {"report.html", "html"},
		} {
			t.Run(sc+"/"+tt.name, func(t *testing.T) { golden(t, sc, db, tt.name, tt.format) })
		}
	}
}

func golden(t *testing.T, sc, db, name, format string) {
	stdout, stderr, code := retrylens(t, nil, "report", "--format", format, "--window", "10m",
		"--policy-base", "1s", "--policy-max-retries", "2", "--by", "route,status,attempt", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join("..", "..", "testdata", sc, "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/retrylens -run Golden -update)", err)
	}
	if diff := cmp.Diff(string(want), stdout); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
	if format == "markdown" {
		checkMarkdownTables(t, stdout)
	}
}

var mdSeparator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

// checkMarkdownTables checks that every table in a Markdown text is well formed: a
// header, a separator row of the same width, rows of the same width, counting cells by
// the pipes that are not escaped.
func checkMarkdownTables(t *testing.T, md string) {
	t.Helper()
	var table []string
	tables := 0
	flush := func() {
		if len(table) == 0 {
			return
		}
		tables++
		if len(table) < 2 || !mdSeparator.MatchString(table[1]) {
			t.Errorf("table without a separator row:\n%s", strings.Join(table, "\n"))
		}
		width := cellCount(table[0])
		for _, row := range table {
			if cellCount(row) != width {
				t.Errorf("row with %d cells in a %d-column table: %s", cellCount(row), width, row)
			}
		}
		table = nil
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
			continue
		}
		flush()
	}
	flush()
	if tables == 0 {
		t.Error("no table in the Markdown report")
	}
}

func cellCount(row string) int {
	n := 0
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++ // an escaped character, a pipe among them
		case '|':
			n++
		}
	}
	return n - 1
}
