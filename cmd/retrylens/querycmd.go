package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/report"
)

type queryOptions struct {
	db     string
	format string
	output string
	write  bool
}

func (e *env) queryCmd() *cobra.Command {
	var o queryOptions
	c := &cobra.Command{
		Use:   "query [flags] SQL",
		Short: "Run SQL on the database, for everything the reports do not cover",
		Long: `Run one SQL statement on the database and print its result.

Tables: requests (one row per line: ts, method, uri, route, status, attempt, …),
files (the registry of loaded content), reject_counts and rejects (malformed lines,
with file_id and line number). The request keys are stored as hashes
(request_id_hash, idempotency_key_hash, invocation_id_hash; retrylens_key('text')
computes one), their text in key_text on every line but first attempts.

On a ClickHouse cluster (--db clickhouse://…) the statement is ClickHouse's SQL, run on
the server the URL names: requests is the Distributed table over every shard, with the
time as ts_us (microseconds since the epoch) and the keys as their text.

Text from the logs is printed with control characters escaped.

The database is opened read-only: a DELETE or DROP could take rows out of the registry's
reach. --write allows changes; the next ingest repairs rows and registry that no longer
match (see 'retrylens verify').`,
		Example: `  retrylens query 'SELECT * FROM rejects'
  retrylens query 'SELECT route, count(*) FROM requests WHERE attempt >= 1 GROUP BY 1 ORDER BY 2 DESC LIMIT 10'
  retrylens query --format csv 'SELECT * FROM requests WHERE status = 429' > throttled.csv
  retrylens query "SELECT ts, attempt, status FROM requests WHERE request_id_hash = retrylens_key('f3a9c2')"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("query takes one SQL statement, quoted")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return e.runQuery(c.Context(), &o, args[0]) },
	}
	c.Flags().StringVar(&o.db, "db", "", dbHelp)
	c.Flags().StringVarP(&o.output, "output", "o", "", outputHelp)
	c.Flags().StringVarP(&o.format, "format", "f", "", "table, tsv, csv or json (default: table on a terminal, tsv in a pipe)")
	c.Flags().BoolVar(&o.write, "write", false, "open the database for writing: allow INSERT, UPDATE, DELETE, CREATE and DROP")
	return c
}

func (e *env) runQuery(ctx context.Context, o *queryOptions, q string) error {
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, o.output == "" && terminal(e.stdout)),
		report.FormatTable, report.FormatTSV, report.FormatCSV, report.FormatJSON)
	if err != nil {
		return usagef("--format: %v", err)
	}
	mode := backend.ReadOnly
	if o.write {
		mode = backend.ReadWrite
	}
	st, err := e.store(ctx, e.dbPath(o.db), backend.Options{Mode: mode})
	if err != nil {
		return err
	}
	defer st.Close()
	cols, vals, err := st.Run(ctx, q)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	return e.writeOutput(o.output, func(w io.Writer) error { return report.Result(w, format, cols, vals) })
}
