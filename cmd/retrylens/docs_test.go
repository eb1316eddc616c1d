package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

const referencePath = "../../docs/reference.md"

// docs/reference.md is the one reference: every command's --help, generated here, each
// followed by the command at work (help/COMMAND.md, examples and details too long for
// --help). A command, flag or help/*.md changed without it fails this test (go test
// ./cmd/retrylens -run TestReferenceDoc -update writes it again).
func TestReferenceDoc(t *testing.T) {
	t.Parallel()
	var doc bytes.Buffer
	doc.WriteString("# Reference\n\nEvery command's `--help`, then the command at work. Generated from the commands and\n" +
		"`cmd/retrylens/help/*.md` by `go test ./cmd/retrylens -run TestReferenceDoc -update`.\n")
	e := &env{}
	for _, c := range append([]*cobra.Command{nil}, e.rootCmd().Commands()...) {
		args, name := []string{"--help"}, "retrylens"
		if c != nil {
			if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
				continue
			}
			args, name = []string{c.Name(), "--help"}, "retrylens "+c.Name()
		}
		var out, errOut bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("%s --help: exit %d: %s", name, code, errOut.String())
		}
		fmt.Fprintf(&doc, "\n## %s\n\n```text\n%s```\n", name, out.String())
		short := strings.TrimPrefix(strings.TrimPrefix(name, "retrylens"), " ")
		if short == "" {
			short = "retrylens"
		}
		if at, err := os.ReadFile("help/" + short + ".md"); err == nil {
			fmt.Fprintf(&doc, "\n%s", at)
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if *update {
		if err := os.WriteFile(referencePath, doc.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(referencePath)
	if err != nil || !bytes.Equal(have, doc.Bytes()) {
		t.Errorf("docs/reference.md is not the commands' --help (%v): go test ./cmd/retrylens -run TestReferenceDoc -update", err)
	}
}

// The JSON sample in help/report.md is what the command it shows prints on the quick
// start's database (but for when it was generated): a field added to the report reaches
// the docs, or this fails (-update writes it again).
func TestReportJSONSample(t *testing.T) {
	t.Parallel()
	const cmd = "$ ./retrylens report --db demo.duckdb --format json --since 2026-11-29T09:00:00Z --until 2026-11-29T10:00:00Z\n"
	db := filepath.Join(t.TempDir(), "demo.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", db,
		"../../testdata/quiet-hour/access.log", "../../testdata/incident-hour/access.log"); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	out, stderr, code := retrylens(t, nil, strings.Fields(strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(cmd), "$ ./retrylens "), "demo.duckdb", db))...)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	const path = "help/report.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, cmd)
	if i < 0 {
		t.Fatalf("%s shows no %q", path, cmd)
	}
	i += len(cmd)
	j := i + strings.Index(doc[i:], "```")
	generated := regexp.MustCompile(`"generated_at": "[^"]*"`)
	have := doc[i:j]
	want := generated.ReplaceAllString(out, generated.FindString(have))
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if have != want {
		t.Errorf("%s's JSON sample is not what the command prints: go test ./cmd/retrylens -run 'TestReportJSONSample|TestReferenceDoc' -update", path)
	}
}

// docs/budgets.md's worked example is what the command prints: its table, row by row,
// and the configuration it quotes.
func TestBudgetsDocExample(t *testing.T) {
	t.Parallel()
	const cmd = "$ retrylens budget --target-amplification 1.3 --instances 1 testdata/incident-hour/access.log\n"
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "budgets.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, cmd)
	if i < 0 {
		t.Fatalf("docs/budgets.md shows no %q", cmd)
	}
	i += len(cmd)
	example := doc[i : i+strings.Index(doc[i:], "```")]
	args := strings.Fields(strings.TrimPrefix(strings.TrimSpace(cmd), "$ retrylens "))
	args[len(args)-1] = filepath.Join("..", "..", args[len(args)-1])
	out, stderr, code := retrylens(t, nil, append(args, "--format", "table")...)
	if code != 0 {
		t.Fatalf("budget: exit %d: %s", code, stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(example), "\n") {
		if l != "…" && !strings.Contains(out, l) {
			t.Errorf("docs/budgets.md's example has %q, the command does not print it:\n%s", l, out)
		}
	}
}
