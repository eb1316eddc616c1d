package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/budget"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/report"
)

type budgetOptions struct {
	rowFlags
	linkFlags
	budget.Params
	model   string
	output  string
	compare bool
	format  string
	window  string
}

func (e *env) budgetCmd() *cobra.Command {
	o := budgetOptions{Params: budget.DefaultParams}
	c := &cobra.Command{
		Use:     "budget [flags] [FILE...]",
		Short:   "Replay the recorded retries through a retry budget: what would it have denied?",
		Long:    help("budget.long.txt"),
		Example: help("budget.example.txt"),
		RunE:    func(c *cobra.Command, args []string) error { return e.runBudget(c.Context(), &o, args) },
	}
	f := c.Flags()
	o.rowFlags.register(c, "")
	o.linkFlags.register(c)
	f.StringVar(&o.model, "model", "finagle", "the budget: "+strings.Join(budget.Names, ", "))
	f.BoolVar(&o.compare, "compare", false, "run every model")
	f.StringVarP(&o.output, "output", "o", "", outputHelp)
	f.StringVarP(&o.format, "format", "f", "", "table, tsv or json (default: table on a terminal, tsv in a pipe)")
	p := &o.Params
	f.Float64Var(&p.Ratio, "ratio", p.Ratio, "finagle/linkerd2: retries per request")
	f.Float64Var(&p.MinPerSec, "min-per-sec", p.MinPerSec, "finagle/linkerd2: retries per second allowed beyond the ratio")
	f.DurationVar(&p.TTL, "ttl", p.TTL, "finagle/linkerd2: the window")
	f.Float64Var(&p.MaxTokens, "max-tokens", p.MaxTokens, "grpc: maxTokens")
	f.Float64Var(&p.TokenRatio, "token-ratio", p.TokenRatio, "grpc: tokenRatio")
	f.Float64Var(&p.EnvoyPct, "envoy-percent", p.EnvoyPct, "envoy: budget_percent, as a fraction")
	f.IntVar(&p.EnvoyMin, "envoy-min", p.EnvoyMin, "envoy: min_retry_concurrency")
	f.Float64Var(&p.AWSQuota, "aws-quota", p.AWSQuota, "aws-standard: the token quota")
	f.Float64Var(&p.AWSCost, "aws-cost", p.AWSCost, "aws-standard: a retry's cost")
	f.Float64Var(&p.AWSTimeout, "aws-timeout-cost", p.AWSTimeout, "aws-standard: a retry's cost after a timeout")
	f.IntVar(&p.Attempts, "max-attempts", p.Attempts, "cap: attempts per request, the first included")
	f.StringVarP(&o.window, "window", "w", "", "also give the figures per window of this width (1m, 5m, 1h, 1d or any Go duration), by attempt start")
	return c
}

// Validate checks the flags before anything is read: the models' parameters, the model,
// the window and the linking.
func (o *budgetOptions) Validate() error {
	if err := o.Params.Validate(); err != nil {
		var pe *budget.ParamError
		if errors.As(err, &pe) {
			return usagef("--%s: want %s", pe.Flag, pe.Want)
		}
		return usageError{err}
	}
	if !o.compare && !slices.Contains(budget.Names, o.model) {
		return usagef("--model %q: want one of %s", o.model, strings.Join(budget.Names, ", "))
	}
	if o.window != "" {
		if _, err := query.ParseWindow(o.window); err != nil {
			return usagef("--window: %v", err)
		}
	}
	return o.linkFlags.check()
}

func (e *env) runBudget(ctx context.Context, o *budgetOptions, files []string) error {
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, o.output == "" && terminal(e.stdout)), report.FormatTable, report.FormatTSV, report.FormatJSON)
	if err != nil {
		return usagef("--format: %v", err)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	models := o.Models()
	if !o.compare {
		i := slices.Index(budget.Names, o.model)
		models = models[i : i+1]
	}
	var width time.Duration
	if o.window != "" {
		width, _ = query.ParseWindow(o.window) // Validate parsed it
	}
	qo, _, err := o.rows(e.now())
	if err != nil {
		return err
	}
	o.linkFlags.apply(&qo)
	db, done, err := e.openRows(ctx, &o.rowFlags, files, &qo, true)
	if err != nil {
		return err
	}
	defer done()
	results, err := postmortem.Budget(ctx, db, qo, models, width)
	if err != nil {
		return err
	}
	if len(results) > 0 && results[0].FirstAttempts+results[0].Retries == 0 {
		// Nothing to replay: a table of zeros would read as a budget that changed nothing.
		fmt.Fprintln(e.stderr, "retrylens: nothing to replay: no line in the range carries an attempt number (log the attempt header, see the README, or try --infer-attempts)")
		return exitCode(exitNoData)
	}
	return e.writeOutput(o.output, func(w io.Writer) error { return report.Budget(w, format, results) })
}
