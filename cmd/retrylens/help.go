package main

import (
	"embed"
	"strings"
)

// helpFiles are the commands' long help texts and examples, one file each
// (help/COMMAND.long.txt, help/COMMAND.example.txt), kept out of the Go so that the
// commands read as flags and calls; docs/reference.md is written from them
// (TestReferenceDoc).
//
//go:embed help/*.txt
var helpFiles embed.FS

// help returns the text of a help file, without its final newline.
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name)
	if err != nil {
		panic("retrylens: no help file " + name)
	}
	return strings.TrimSuffix(string(b), "\n")
}
