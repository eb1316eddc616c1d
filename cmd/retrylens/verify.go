package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/report"
)

// exitDamaged is verify's exit code when the database is not what its registry says.
const exitDamaged = 5

type verifyOptions struct {
	db     string
	repair bool
}

func (e *env) verifyCmd() *cobra.Command {
	var o verifyOptions
	c := &cobra.Command{
		Use:   "verify [flags]",
		Short: "Prove the database holds each loaded line once, and the report cache matches the rows",
		Long: `Prove that the database holds what its registry of loads says, and nothing else:

  - every load's rows: as many as it registered, each line once, within its lines, and
    its rejected lines counted as registered;
  - no rows or rejects under a load the registry does not hold (a load that never
    committed: DuckDB can bring a killed transaction's rows back);
  - the report cache: each stored table equal to the same table built again from the
    rows (the slow part: about as long as the cache build after an ingest).

Every ingest runs the first two checks before it loads and repairs what they find.
verify prints each problem on a line and exits 5 when there is one. With --repair it
deletes unregistered rows, deletes each damaged load with the later loads of the same
file (ingest that file again to load those lines, once) and rebuilds the cache.

Without --repair verify writes nothing: a database written by an older retrylens is
upgraded by --repair (or any ingest).

Exit codes: 0 the database is sound (or was repaired), 1 error, 5 damage found (a file
that cannot be read back included).`,
		Example: `  retrylens verify
  retrylens verify --db incident.duckdb --repair`,
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
	// A file that does not read back is damage like any other: exit 5.
	damaged := func(err error) error {
		if backend.Damaged(err) {
			sayDamaged(e.stderr, err)
			return exitCode(exitDamaged)
		}
		return err
	}
	st, err := e.store(ctx, e.dbPath(o.db), backend.Options{Mode: mode})
	if err != nil {
		return damaged(err)
	}
	defer st.Close()
	v, err := st.Verify(ctx, o.repair)
	for _, l := range v.Lines {
		fmt.Fprintln(e.stdout, l)
	}
	if err != nil {
		return damaged(err)
	}
	if v.Damaged {
		fmt.Fprintf(e.stderr, "retrylens: %s is damaged; run 'retrylens verify --repair' (any ingest also repairs the rows)\n", report.Clean(st.String()))
		return exitCode(exitDamaged)
	}
	return nil
}
