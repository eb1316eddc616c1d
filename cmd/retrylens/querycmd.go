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
		Use:     "query [flags] SQL",
		Short:   "Run SQL on the database, for everything the reports do not cover",
		Long:    help("query.long.txt"),
		Example: help("query.example.txt"),
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
