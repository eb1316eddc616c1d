package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/query"
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
		RunE: func(c *cobra.Command, _ []string) error { return e.runVerify(c, &o) },
	}
	c.Flags().StringVar(&o.db, "db", "", dbHelp)
	c.Flags().BoolVar(&o.repair, "repair", false, "repair what is found: delete rows no load registered and damaged loads, rebuild the cache")
	return c
}

func (e *env) runVerify(c *cobra.Command, o *verifyOptions) error {
	ctx := c.Context()
	path := e.dbPath(o.db)
	if ingest.IsClusterURL(path) {
		return e.verifyCluster(c, o, path)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s", path)
	}
	// Without --repair verify changes nothing, an old database's upgrade included.
	open := ingest.OpenReadOnly
	if o.repair {
		open = ingest.Open
	}
	// A file that does not read back is damage like any other: exit 5.
	damaged := func(err error) error {
		if ingest.Damaged(err) {
			sayDamaged(e.stderr, err)
			return exitCode(exitDamaged)
		}
		return err
	}
	db, err := open(ctx, path)
	if err != nil {
		return damaged(err)
	}
	defer db.Close()
	var loads, rows int64
	if err := db.QueryRowContext(ctx, "SELECT count(*), (SELECT count(*) FROM requests) FROM files").Scan(&loads, &rows); err != nil {
		return err
	}
	// Every block of every table is read back first: a damaged file fails here, whatever
	// the registry says.
	if err := ingest.ReadAll(ctx, db); err != nil {
		return damaged(err)
	}
	damage, err := ingest.Check(ctx, db, true)
	if err != nil {
		return err
	}
	problems := damage.Problems()
	for _, p := range problems {
		fmt.Fprintf(e.stdout, "%s\n", report.Clean(p))
	}
	if damage.OK() {
		fmt.Fprintf(e.stdout, "registry: %d loads, %d rows, each line once: ok\n", loads, rows)
	}
	if o.repair && !damage.OK() {
		n, err := ingest.Repair(ctx, db, damage)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "repaired: %s (%d rows deleted)\n", damage.Summary(), n)
	}
	if err := query.SetCacheMemory(ctx, db); err != nil {
		return err
	}
	state, diffs, err := query.CheckCache(ctx, db)
	if err != nil {
		return fmt.Errorf("report cache: %w", err)
	}
	for _, d := range diffs {
		fmt.Fprintf(e.stdout, "report cache: %s\n", d)
	}
	switch state {
	case query.CacheMatches:
		fmt.Fprintln(e.stdout, "report cache: matches the rows")
	case query.CacheNone:
		fmt.Fprintln(e.stdout, "report cache: none (reports link the rows themselves)")
	case query.CacheStale:
		fmt.Fprintln(e.stdout, "report cache: out of date, not read by reports (the next ingest rebuilds it)")
	}
	if o.repair && state != query.CacheMatches {
		if err := query.Rebuild(ctx, db); err != nil {
			return fmt.Errorf("rebuild the report cache: %w", err)
		}
		fmt.Fprintln(e.stdout, "repaired: report cache rebuilt from the rows")
	}
	if o.repair || (damage.OK() && state != query.CacheDiffers) {
		return nil
	}
	fmt.Fprintf(e.stderr, "retrylens: %s is damaged; run 'retrylens verify --repair' (any ingest also repairs the rows)\n", report.Clean(path))
	return exitCode(exitDamaged)
}

// verifyCluster checks a ClickHouse cluster's rows against its registry (it has no
// report cache: reports count on the shards).
func (e *env) verifyCluster(c *cobra.Command, o *verifyOptions, url string) error {
	ctx := c.Context()
	cl, err := ingest.OpenCluster(ctx, url)
	if err != nil {
		return err
	}
	defer cl.Close()
	damage, err := ingest.CheckCluster(ctx, cl)
	if err != nil {
		return err
	}
	for _, p := range damage.Problems() {
		fmt.Fprintf(e.stdout, "%s\n", report.Clean(p))
	}
	if damage.OK() {
		fmt.Fprintln(e.stdout, "registry: every load's rows on the shards as registered: ok")
		return nil
	}
	if !o.repair {
		fmt.Fprintln(e.stderr, "retrylens: the cluster's rows do not match its registry; run 'retrylens verify --repair' (any ingest also repairs them)")
		return exitCode(exitDamaged)
	}
	n, err := ingest.RepairCluster(ctx, cl, damage)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "repaired: %s (%d rows deleted)\n", damage.Summary(), n)
	return nil
}
