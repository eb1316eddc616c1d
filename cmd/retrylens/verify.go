package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/report"
)

type verifyOptions struct {
	db     string
	repair bool
}

func (e *env) verifyCmd() *cobra.Command {
	var o verifyOptions
	c := &cobra.Command{
		Use:     "verify [flags]",
		Short:   "Prove the database holds each loaded line once, and the report cache matches the rows",
		Long:    help("verify.long.txt"),
		Example: help("verify.example.txt"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("verify takes no FILE: it checks the database (--db)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return e.runVerify(c.Context(), &o) },
	}
	c.Flags().StringVar(&o.db, "db", "", dbHelp)
	c.Flags().BoolVar(&o.repair, "repair", false, "repair what is found: delete rows no load registered and damaged loads, rebuild the cache")
	return c
}

func (e *env) runVerify(ctx context.Context, o *verifyOptions) error {
	// Without --repair verify changes nothing, an old database's upgrade included.
	mode := backend.ReadOnly
	if o.repair {
		mode = backend.ReadWrite
	}
	// A file that does not read back is damage like any other: run() says so, exit 5.
	st, err := e.store(ctx, e.dbPath(o.db), backend.Options{Mode: mode})
	if err != nil {
		return err
	}
	defer st.Close()
	v, err := st.Verify(ctx, o.repair)
	for _, l := range v.Lines {
		fmt.Fprintln(e.stdout, l)
	}
	if err != nil {
		return err
	}
	if v.Damaged {
		fmt.Fprintf(e.stderr, "retrylens: %s is damaged; run 'retrylens verify --repair' (any ingest also repairs the rows)\n", report.Clean(st.String()))
		return exitCode(exitDamaged)
	}
	return nil
}
