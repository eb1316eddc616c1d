package main

import (
	"context"
	"fmt"
	"io"
	"math"
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
	model       string
	output      string
	compare     bool
	format      string
	ratio       float64
	minPerSec   float64
	ttl         time.Duration
	maxTokens   float64
	tokenRatio  float64
	envoyPct    float64
	envoyMin    int
	awsQuota    float64
	awsCost     float64
	awsTimeout  float64
	maxAttempts int
	window      string
}

var budgetModels = []string{"finagle", "linkerd2", "grpc", "envoy", "aws-standard", "cap", "retry-after"}

func (e *env) budgetCmd() *cobra.Command {
	var o budgetOptions
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
	f.StringVar(&o.model, "model", "finagle", "the budget: "+strings.Join(budgetModels, ", "))
	f.BoolVar(&o.compare, "compare", false, "run every model")
	f.StringVarP(&o.output, "output", "o", "", outputHelp)
	f.StringVarP(&o.format, "format", "f", "", "table, tsv or json (default: table on a terminal, tsv in a pipe)")
	f.Float64Var(&o.ratio, "ratio", 0.2, "finagle/linkerd2: retries per request")
	f.Float64Var(&o.minPerSec, "min-per-sec", 10, "finagle/linkerd2: retries per second allowed beyond the ratio")
	f.DurationVar(&o.ttl, "ttl", 10*time.Second, "finagle/linkerd2: the window")
	f.Float64Var(&o.maxTokens, "max-tokens", 10, "grpc: maxTokens")
	f.Float64Var(&o.tokenRatio, "token-ratio", 0.1, "grpc: tokenRatio")
	f.Float64Var(&o.envoyPct, "envoy-percent", 0.2, "envoy: budget_percent, as a fraction")
	f.IntVar(&o.envoyMin, "envoy-min", 3, "envoy: min_retry_concurrency")
	f.Float64Var(&o.awsQuota, "aws-quota", 500, "aws-standard: the token quota")
	f.Float64Var(&o.awsCost, "aws-cost", 5, "aws-standard: a retry's cost")
	f.Float64Var(&o.awsTimeout, "aws-timeout-cost", 10, "aws-standard: a retry's cost after a timeout")
	f.IntVar(&o.maxAttempts, "max-attempts", 3, "cap: attempts per request, the first included")
	f.StringVarP(&o.window, "window", "w", "", "also give the figures per window of this width (1m, 5m, 1h, 1d or any Go duration), by attempt start")
	return c
}

func (o *budgetOptions) models() []budget.Model {
	return []budget.Model{
		&budget.Ratio{Label: "finagle", Ratio: o.ratio, MinPerSec: o.minPerSec, TTL: o.ttl},
		&budget.Ratio{Label: "linkerd2", Ratio: o.ratio, MinPerSec: o.minPerSec, TTL: o.ttl},
		&budget.GRPC{MaxTokens: o.maxTokens, TokenRatio: o.tokenRatio},
		&budget.Envoy{Percent: o.envoyPct, MinConcurrent: o.envoyMin},
		&budget.AWS{Quota: o.awsQuota, Cost: o.awsCost, TimeoutCost: o.awsTimeout},
		&budget.Cap{Max: o.maxAttempts},
		budget.RetryAfter{},
	}
}

func (e *env) runBudget(ctx context.Context, o *budgetOptions, files []string) error {
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, o.output == "" && terminal(e.stdout)), report.FormatTable, report.FormatTSV, report.FormatJSON)
	if err != nil {
		return usagef("--format: %v", err)
	}
	models := o.models()
	if !o.compare {
		i := -1
		for k, name := range budgetModels {
			if name == o.model {
				i = k
			}
		}
		if i < 0 {
			return usagef("--model %q: want one of %s", o.model, strings.Join(budgetModels, ", "))
		}
		models = models[i : i+1]
	}
	if o.ttl <= 0 || o.maxAttempts < 1 || o.maxTokens <= 0 {
		return usagef("--ttl, --max-tokens and --max-attempts must be positive")
	}
	for name, v := range map[string]float64{"--ratio": o.ratio, "--min-per-sec": o.minPerSec, "--token-ratio": o.tokenRatio,
		"--envoy-percent": o.envoyPct, "--envoy-min": float64(o.envoyMin), "--aws-quota": o.awsQuota, "--aws-cost": o.awsCost,
		"--aws-timeout-cost": o.awsTimeout} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return usagef("%s %v: want a number, 0 or more", name, v)
		}
	}
	if o.envoyPct > 1 {
		return usagef("--envoy-percent is a fraction: 0 to 1")
	}
	var width time.Duration
	if o.window != "" {
		var err error
		if width, err = query.ParseWindow(o.window); err != nil {
			return usagef("--window: %v", err)
		}
	}
	if err := o.linkFlags.check(); err != nil {
		return err
	}
	qo, _, err := o.rows()
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
