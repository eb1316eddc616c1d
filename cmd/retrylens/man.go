package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCmd writes a man page per command (retrylens.1, retrylens-ingest.1, …) into a
// directory, from the same help text as --help: the release script ships them. Hidden:
// it is for packagers, not for the incident.
func (e *env) manCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages of every command into DIR",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(c *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := c.Root()
			root.DisableAutoGenTag = true // the same pages from the same source, whenever built
			header := &doc.GenManHeader{Title: "RETRYLENS", Section: "1", Source: "retrylens " + release, Manual: "retrylens manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}
}
