package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/report"
)

type ingestOptions struct {
	db        string
	formats   formatFlags
	samples   int
	quiet     bool
	maxRoutes int64
}

func (e *env) ingestCmd() *cobra.Command {
	var o ingestOptions
	c := &cobra.Command{
		Use:   "ingest [flags] FILE...",
		Short: "Parse access logs and load them into the database",
		Long: `Parse access logs and load them into the database, one row per line.

FILE may be plain text, gzip (recognised by content, not name) or - for stdin. Each file
is loaded in one transaction: wholly or not at all. A file whose content was loaded
before, under any name, adds nothing, so running ingest again is safe.

Malformed lines never stop a load: they are counted by reason, the first ones are kept
with file and line number in the rejects table, and the summary shows them. When no
--log-format or --nginx-format is given, each file's format is detected from its first
lines.`,
		Example: `  retrylens ingest /var/log/nginx/access.log /var/log/nginx/access.log.1
  retrylens ingest --log-format retry --db incident.duckdb access.log.2.gz
  retrylens ingest --nginx-format '$remote_addr [$time_local] "$request" $status $http_x_retry_attempt' app.log
  zcat access.log.*.gz | retrylens ingest -`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("ingest needs at least one FILE (or - for stdin)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return e.runIngest(c, &o, args) },
	}
	c.Flags().StringVar(&o.db, "db", "", "database file (default $RETRYLENS_DB or ./retrylens.duckdb)")
	o.formats.register(c)
	c.Flags().IntVar(&o.samples, "samples", 20, "rejected lines kept in full per file (all are counted)")
	c.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print nothing but errors")
	c.Flags().Int64Var(&o.maxRoutes, "max-routes", 500, "warn, naming the path prefixes behind them, past this many distinct routes")
	return c
}

func (e *env) runIngest(c *cobra.Command, o *ingestOptions, files []string) error {
	format, err := o.formats.format(c)
	if err != nil {
		return err
	}
	if o.samples < 0 {
		return usagef("--samples must be 0 or more")
	}
	router, err := o.formats.router()
	if err != nil {
		return err
	}
	ctx := c.Context()
	path := e.dbPath(o.db)
	db, err := ingest.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	res, loadErr := ingest.Load(ctx, db, files, ingest.Options{Format: format, Samples: o.samples, Stdin: e.stdin, Now: e.now, Router: router, MaxRoutes: o.maxRoutes})
	if !o.quiet {
		if err := report.Ingest(e.stderr, &res); err != nil {
			return err
		}
	}
	if loadErr != nil {
		return fmt.Errorf("some input was not loaded:\n%w", loadErr)
	}
	return db.Close()
}
