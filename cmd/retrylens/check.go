package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/report"
)

type checkOptions struct {
	rowFlags
	figureFlags
	failOn   string
	findings string // --fail-on-finding
	window   string
	format   string
	output   string
}

func (e *env) checkCmd() *cobra.Command {
	var o checkOptions
	c := &cobra.Command{
		Use:     "check [flags] [FILE...]",
		Short:   "Evaluate the alert rules; exit 3 when one at or above --fail-on fired",
		Long:    help("check.long.txt"),
		Example: help("check.example.txt"),
		RunE:    func(c *cobra.Command, args []string) error { return e.runCheck(c.Context(), &o, args) },
	}
	f := c.Flags()
	o.rowFlags.register(c, ", and for the output")
	f.StringVar(&o.failOn, "fail-on", "P1", "exit 3 when an alert of this severity or above fired: P1 or P2")
	f.StringVar(&o.findings, "fail-on-finding", "", "exit 3 when one of these findings is present: "+strings.Join(checkFindings(), ", ")+" (comma-separated)")
	f.StringVarP(&o.window, "window", "w", "1m", "the windows the rules judge: minutes, or as report --window under a minute (10s: each window on its own counts)")
	f.StringVarP(&o.output, "output", "o", "", outputHelp)
	f.StringVarP(&o.format, "format", "f", "", "output format: table, tsv, json or markdown (a block for a pull request comment); default: table on a terminal, tsv in a pipe")
	o.figureFlags.register(c)
	return c
}

// checkFindings are what --fail-on-finding takes: the findings of logical requests, and
// the retry-sustained overload of the checked minutes.
func checkFindings() []string {
	return append(slices.Clone(query.FindingKinds), judge.SustainedFinding)
}

// Validate checks the flags before anything is read (and writes --fail-on in capitals).
func (o *checkOptions) Validate() error {
	o.failOn = strings.ToUpper(o.failOn) // p1 as P1
	if o.failOn != "P1" && o.failOn != "P2" {
		return usagef("--fail-on %q: want P1 or P2", o.failOn)
	}
	for _, k := range o.failKinds() {
		if !slices.Contains(checkFindings(), k) {
			return usagef("--fail-on-finding %q: want one or more of %s, joined by commas", k, strings.Join(checkFindings(), ", "))
		}
	}
	width, err := query.ParseWindow(o.window)
	if err != nil {
		return usagef("--window: %v", err)
	}
	if width > time.Minute || time.Minute%width != 0 {
		return usagef("--window %s: check judges minutes, or windows that divide one (10s, 30s)", o.window)
	}
	return o.figureFlags.Validate()
}

// failKinds are the findings --fail-on-finding names.
func (o *checkOptions) failKinds() []string {
	var kinds []string
	if o.findings != "" {
		for _, k := range strings.Split(o.findings, ",") {
			kinds = append(kinds, strings.TrimSpace(k))
		}
	}
	return kinds
}

func (e *env) runCheck(ctx context.Context, o *checkOptions, files []string) error {
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, o.output == "" && terminal(e.stdout)), report.FormatTable, report.FormatTSV, report.FormatJSON, report.FormatMarkdown)
	if err != nil {
		return usagef("--format: %v", err)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	width, _ := query.ParseWindow(o.window) // Validate parsed it
	qo, loc, err := o.rows(e.now())
	if err != nil {
		return err
	}
	po := postmortem.Options{Query: qo, Width: width}
	if err := o.figureFlags.apply(&po); err != nil {
		return err
	}
	db, done, err := e.openRows(ctx, &o.rowFlags, files, &po.Query, false)
	if err != nil {
		return err
	}
	defer done()
	po.Doubled = o.health.Repeats > 0
	check, err := postmortem.Alerts(ctx, db, po, o.failOn, o.failKinds())
	if err != nil {
		return err
	}
	if err := e.writeOutput(o.output, func(w io.Writer) error { return report.Check(w, format, check, loc) }); err != nil {
		return err
	}
	says, failed, noData := report.CheckSays(check, loc)
	for _, l := range says {
		fmt.Fprintf(e.stderr, "retrylens: %s\n", l)
	}
	switch {
	case failed:
		return exitCode(exitAlert)
	case noData:
		return exitCode(exitNoData)
	}
	return nil
}
