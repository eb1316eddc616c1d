package main

import (
	"bytes"
	"fmt"
	"os"
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
