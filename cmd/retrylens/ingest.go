package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/report"
)

type ingestOptions struct {
	db        string
	formats   formatFlags
	samples   int
	quiet     bool
	maxRoutes int64
	maxReject float64
	chunkMiB  int64
	dryRun    int
	dedupe    bool
	changed   func(flag string) bool
}

func (e *env) ingestCmd() *cobra.Command {
	var o ingestOptions
	c := &cobra.Command{
		Use:     "ingest [flags] FILE...",
		Short:   "Parse access logs and load them into the database",
		Long:    help("ingest.long.txt"),
		Example: help("ingest.example.txt"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("ingest needs at least one FILE (or - for stdin)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return e.runIngest(c.Context(), &o, args) },
	}
	c.Flags().StringVar(&o.db, "db", "", dbHelp)
	o.changed = c.Flags().Changed
	o.formats.register(c)
	c.Flags().IntVar(&o.samples, "samples", 20, "rejected lines kept in full per file (all are counted)")
	c.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print nothing but errors")
	c.Flags().IntVar(&o.dryRun, "dry-run", 0, "load nothing: show how the first N lines of each FILE parse, field by field")
	c.Flags().Lookup("dry-run").NoOptDefVal = "5"
	c.Flags().BoolVar(&o.dedupe, "dedupe", false, "leave out lines that repeat rows already loaded (same second, key, attempt, status, method, URI, client): the same traffic logged twice; without it they load and a warning says how many")
	c.Flags().Int64Var(&o.chunkMiB, "chunk-mib", 256, "MiB of a file loaded per transaction: a killed load resumes after the last one that committed")
	c.Flags().Float64Var(&o.maxReject, "max-reject-ratio", defaultMaxReject, "exit 4 when more than this share of lines (0..1) was rejected: the rows read are loaded all the same (1: never)")
	c.Flags().Int64Var(&o.maxRoutes, "max-routes", 500, "warn, naming the path prefixes behind them, past this many distinct routes")
	return c
}

// Validate checks the flags before anything is read.
func (o *ingestOptions) Validate() error {
	switch {
	case o.samples < 0:
		return usagef("--samples must be 0 or more")
	case o.maxReject < 0 || o.maxReject > 1:
		return usagef("--max-reject-ratio must be between 0 and 1")
	case o.chunkMiB < 1:
		return usagef("--chunk-mib must be at least 1")
	}
	return nil
}

func (e *env) runIngest(ctx context.Context, o *ingestOptions, args []string) error {
	// "--dry-run 3": the flag's value is optional, so the parser left 3 as a FILE. A
	// number that names no file is the count.
	if o.changed("dry-run") && len(args) > 1 {
		if n, err := strconv.Atoi(args[0]); err == nil {
			if _, err := os.Stat(args[0]); errors.Is(err, fs.ErrNotExist) {
				o.dryRun, args = n, args[1:]
			}
		}
	}
	// --dry-run=0 would load: a dry run shows at least a line
	if o.changed("dry-run") && o.dryRun < 1 {
		return usagef("--dry-run takes how many lines to show, 1 or more (--dry-run alone shows 5)")
	}
	if err := o.Validate(); err != nil {
		return err
	}
	format, err := o.formats.format()
	if err != nil {
		return err
	}
	files, err := ingest.Inputs(args)
	if err != nil {
		return err
	}
	router, err := o.formats.router()
	if err != nil {
		return err
	}
	if o.dryRun > 0 {
		for _, path := range files {
			f, samples, err := ingest.DryRun(path, e.stdin, format, o.dryRun)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := ingest.WriteDryRun(e.stdout, path, f, samples); err != nil {
				return err
			}
		}
		return nil
	}
	opts := ingest.Options{Format: format, Samples: o.samples, Stdin: e.stdin, Now: e.now, Router: router,
		MaxRoutes: o.maxRoutes, ChunkBytes: o.chunkMiB << 20, Step: ingestStep, Dedupe: o.dedupe}
	show := !o.quiet && terminal(e.stderr)
	if show {
		opts.Progress = ingest.ProgressBar(e.stderr)
	}
	st, err := e.store(ctx, e.dbPath(o.db), backend.Options{Mode: backend.Create})
	if err != nil {
		return err
	}
	defer st.Close()
	var summaryErr error
	done, err := st.Ingest(ctx, files, opts, backend.Events{
		Loaded: func(res ingest.Result) { summaryErr = e.loadSummary(res, o.quiet) },
		Caching: func() {
			if show {
				fmt.Fprintln(e.stderr, "Updating the report cache…")
			}
		},
	})
	switch {
	case errors.Is(err, backend.ErrUnsupported):
		return usageError{err}
	case summaryErr != nil:
		return summaryErr
	case done.Removed && err == nil:
		fmt.Fprintf(e.stderr, "retrylens: nothing loaded, so no database was created at %s\n", report.Clean(st.String()))
		return nil
	}
	if done.CacheErr != nil && (err == nil || !diskFull(done.CacheErr)) { // a full disk is said once, below
		fmt.Fprintf(e.stderr, "retrylens: warning: the report cache was not built (reports will link the rows themselves, slower): %v\n", done.CacheErr)
	} else if done.Cache != "" && !o.quiet {
		fmt.Fprintf(e.stderr, "Report cache %s in %.1fs.\n", done.Cache, done.CacheTime.Seconds())
	}
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	return e.rejectRatio(done.Load, o.maxReject)
}

// loadSummary says what the load repaired first (even with quiet: rows were deleted)
// and, unless quiet, what it loaded.
func (e *env) loadSummary(res ingest.Result, quiet bool) error {
	if !res.Repaired.OK() {
		fmt.Fprintf(e.stderr, "retrylens: repaired the database before loading: %s (%d rows deleted; see 'retrylens verify')\n",
			res.Repaired.Summary(), res.RepairedRows)
	}
	if quiet {
		return nil
	}
	return ingest.WriteSummary(e.stderr, &res)
}

// defaultMaxReject is --max-reject-ratio's default: a log a tenth of whose lines cannot be
// read is most likely read in the wrong format, and its figures stand on the rest alone;
// a run that says so by its exit code is noticed in a script, which a warning is not.
const defaultMaxReject = 0.1

// rejectRatio is ingest's exit when the rejected share passed --max-reject-ratio.
func (e *env) rejectRatio(res ingest.Result, maxReject float64) error {
	if t := res.Totals(); t.Lines > 0 && float64(t.Rejected)/float64(t.Lines) > maxReject {
		fmt.Fprintf(e.stderr, "retrylens: %d of %d lines (%.2f%%) rejected, more than --max-reject-ratio %g: the rest is loaded; "+
			"is the format right? ('retrylens ingest --dry-run FILE' shows how lines parse)\n",
			t.Rejected, t.Lines, 100*float64(t.Rejected)/float64(t.Lines), maxReject)
		return exitCode(exitRejects)
	}
	return nil
}

// ingestStep is called at each step of a chunk's transaction; crash tests set it to kill
// a load exactly there. Nil in the product.
var ingestStep func(ingest.Step)
