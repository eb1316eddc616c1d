package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/watch"
	"github.com/retrylens/retrylens/watch/promrules"
)

type watchOptions struct {
	db, listen, window string
	formats            formatFlags
	figureFlags
	interval, settle time.Duration
	htmlWindow       time.Duration
	maxEndpoints     int
	once, promRules  bool
}

func (e *env) watchCmd() *cobra.Command {
	var o watchOptions
	c := &cobra.Command{
		Use:     "watch [flags] FILE|GLOB...",
		Short:   "Follow access logs, load new lines as they come and serve retry metrics to Prometheus",
		Long:    help("watch.long.txt"),
		Example: help("watch.example.txt"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && !o.promRules {
				return usagef("watch needs at least one FILE or GLOB to follow")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return e.runWatch(c.Context(), &o, args) },
	}
	f := c.Flags()
	f.StringVar(&o.db, "db", "", dbHelp)
	o.formats.register(c)
	f.DurationVar(&o.interval, "interval", 10*time.Second, "time between batches")
	f.StringVar(&o.listen, "listen", "127.0.0.1:9464", `where to serve /metrics and the HTML report ("" for nowhere)`)
	f.IntVar(&o.maxEndpoints, "max-endpoints", 100, "endpoints with series of their own; the rest are one \"other\" series")
	f.DurationVar(&o.settle, "settle", 2*time.Second, "how long a line may take to reach the file (a buffered access_log's flush=)")
	f.StringVar(&o.window, "window", "1m", "the window whose last closed one the window gauges show (1m, 10s…)")
	f.DurationVar(&o.htmlWindow, "html-window", time.Hour, "how much the HTML report at / shows, up to the last closed minute (0: none)")
	o.figureFlags.register(c) // --max-gap is also how long after its last attempt a request is final
	f.BoolVar(&o.once, "once", false, "run one batch and exit, serving nothing")
	f.BoolVar(&o.promRules, "prometheus-rules", false, "print a Prometheus rules file for these metrics (recording rules, and alerts with the thresholds of --rules) and exit")
	return c
}

// Validate checks the flags before anything is read.
func (o *watchOptions) Validate() error {
	if o.interval <= 0 || o.settle < 0 || o.htmlWindow < 0 {
		return usagef("--interval must be positive, --settle and --html-window not negative")
	}
	if o.maxEndpoints < 0 {
		return usagef("--max-endpoints must not be negative")
	}
	width, err := query.ParseWindow(o.window)
	if err != nil {
		return usagef("--window: %v", err)
	}
	if time.Minute%width != 0 && width%time.Minute != 0 {
		return usagef("--window %s: want a width that divides a minute or whole minutes", o.window)
	}
	return o.figureFlags.Validate()
}

func (e *env) runWatch(ctx context.Context, o *watchOptions, args []string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	width, _ := query.ParseWindow(o.window) // Validate parsed it
	format, err := o.formats.format()
	if err != nil {
		return err
	}
	router, err := o.formats.router()
	if err != nil {
		return err
	}
	var figures postmortem.Options
	if err := o.figureFlags.apply(&figures); err != nil {
		return err
	}
	if o.promRules {
		return promrules.Write(e.stdout, figures.Query.Rules)
	}
	w, err := watch.New(watch.Options{
		Location: e.dbPath(o.db), Args: args, Open: e.open,
		Load:     ingest.Options{Format: format, Router: router, Now: e.now},
		Interval: o.interval, Figures: figures, Settle: o.settle, Width: width, MaxEndpoints: o.maxEndpoints,
		HTMLWindow: o.htmlWindow, Now: e.now, Log: e.stderr,
	})
	if err != nil {
		return usageError{err}
	}
	if o.once {
		if err := w.Batch(ctx); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "retrylens watch: %s\n", w.Summary())
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if o.listen != "" {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(e.stderr, "retrylens watch: serving http://%s/metrics and http://%s/\n", ln.Addr(), ln.Addr())
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
