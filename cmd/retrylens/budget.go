package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
	// the advice (--target-amplification, --max-lost): the settings that meet a target
	target    float64
	maxLost   int
	instances int
	families  string
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
	f.StringVarP(&o.format, "format", "f", "", "table, tsv or json, and html with --target-amplification or --max-lost (default: table on a terminal, tsv in a pipe)")
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
	f.Float64Var(&o.target, "target-amplification", 0, "say what to set so that retries add at most this: attempts per first attempt, 1.2 for a fifth more (each budget's settings replayed per client instance)")
	f.IntVar(&o.maxLost, "max-lost", -1, "with or without --target-amplification: the recovered requests one accepts to lose")
	f.IntVar(&o.instances, "instances", 0, "client instances, each with its own budget (its floors hold per instance); default: the distinct client addresses the log shows")
	f.StringVar(&o.families, "family", "", "the budgets to size, comma-separated: "+strings.Join(budget.FamilyNames(), ", ")+" (default: all)")
	return c
}

// advising reports whether the command gives advice rather than a replay.
func (o *budgetOptions) advising() bool { return o.target > 0 || o.maxLost >= 0 }

// chosenFamilies are the families --family names, all by default.
func (o *budgetOptions) chosenFamilies() ([]budget.Family, error) {
	if o.families == "" {
		return budget.Families, nil
	}
	var out []budget.Family
	for _, name := range strings.Split(o.families, ",") {
		i := slices.IndexFunc(budget.Families, func(f budget.Family) bool { return f.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, usagef("--family %q: want one or more of %s, joined by commas", name, strings.Join(budget.FamilyNames(), ", "))
		}
		out = append(out, budget.Families[i])
	}
	return out, nil
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
	switch {
	case o.target != 0 && (o.target < 1 || math.IsNaN(o.target) || math.IsInf(o.target, 0)):
		return usagef("--target-amplification %g: want attempts per first attempt, 1 or more (1.2: retries add a fifth)", o.target)
	case o.maxLost < -1:
		return usagef("--max-lost %d: want 0 or more", o.maxLost)
	case o.instances < 0:
		return usagef("--instances %d: want 1 or more (0: the client addresses the log shows)", o.instances)
	case o.advising() && (o.compare || o.window != ""):
		return usagef("--target-amplification and --max-lost say what to set; --compare and --window replay settings you give: one or the other")
	case !o.advising() && (o.instances != 0 || o.families != ""):
		return usagef("--instances and --family size a budget: give --target-amplification or --max-lost")
	}
	if _, err := o.chosenFamilies(); err != nil {
		return err
	}
	return o.linkFlags.check()
}

func (e *env) runBudget(ctx context.Context, o *budgetOptions, files []string) error {
	formats := []report.Format{report.FormatTable, report.FormatTSV, report.FormatJSON}
	if o.advising() {
		formats = append(formats, report.FormatHTML) // the curve
	}
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, o.output == "" && terminal(e.stdout)), formats...)
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
	if o.advising() {
		families, _ := o.chosenFamilies() // Validate checked them
		attempts, err := postmortem.Attempts(ctx, db, qo)
		if err != nil {
			return err
		}
		if len(attempts) == 0 {
			fmt.Fprintln(e.stderr, "retrylens: nothing to replay: no line in the range carries an attempt number (log the attempt header, see the README, or try --infer-attempts)")
			return exitCode(exitNoData)
		}
		advice := budget.Advise(attempts, families, budget.Target{Amplification: o.target, MaxLost: o.maxLost}, o.instances)
		return e.writeOutput(o.output, func(w io.Writer) error {
			return report.Advice(w, format, advice, budget.Target{Amplification: o.target, MaxLost: o.maxLost})
		})
	}
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
