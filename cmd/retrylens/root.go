package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/backend"
	_ "github.com/retrylens/retrylens/cluster" // clickhouse:// locations
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
)

// exitCode is an error that only sets the exit code.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit %d", int(c)) }

// usageError marks errors in flags or arguments: they print the usage hint.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// env holds what commands take from the outside, injectable by tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// open opens a store (backend.Open); tests give a fake one to see what reaches it.
	open func(ctx context.Context, location string, o backend.Options) (backend.Store, error)
	wait time.Duration // --wait
}

// store opens a store (e.open), waiting --wait for a file another process holds.
func (e *env) store(ctx context.Context, location string, o backend.Options) (backend.Store, error) {
	o.Wait, o.Getenv = e.wait, e.getenv
	o.Waiting = func(err error) {
		fmt.Fprintf(e.stderr, "retrylens: waiting up to %s: %v\n", e.wait, err)
	}
	return e.open(ctx, location, o)
}

// terminal reports whether w is a terminal (a character device), so that output can be
// a table there and tab-separated in a pipe.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, now: time.Now}
	return e.run(args)
}

func (e *env) run(args []string) int {
	if e.open == nil {
		e.open = backend.Open
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := e.rootCmd()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // the command has said what it had to say
	}
	if say, code := explain(err); say != "" {
		fmt.Fprintf(e.stderr, "retrylens: %s\n(%v)\n", say, err)
		return code
	}
	fmt.Fprintf(e.stderr, "retrylens: %v\n", err)
	var ue usageError
	// cobra's own word for a command it does not know, or arguments it refuses: a usage error
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", strings.TrimSpace("retrylens "+commandName(root, args)))
		return exitUsage
	}
	return exitError
}

func commandName(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != root {
		return c.Name()
	}
	return ""
}

// cobra keeps template functions in one package-wide map: registered once here,
// never per command tree, which the tests build from parallel goroutines.
func init() {
	cobra.AddTemplateFunc("buildVersion", func() string { return version(duckdbVersion()) })
}

func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "retrylens",
		Short:         "Were client retries rescuing requests or fuelling the incident?",
		Long:          help("retrylens.long.txt") + "\n\n" + exitCodesText(),
		Example:       help("retrylens.example.txt"),
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       release,
	}
	root.SetVersionTemplate("retrylens {{buildVersion}}\n")
	root.PersistentFlags().DurationVar(&e.wait, "wait", 30*time.Second,
		"how long to wait for a database file another process holds (a 'retrylens watch' batch, an ingest), or on a cluster for a log another loader is loading; 0 fails at once")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(e.ingestCmd(), e.watchCmd(), e.reportCmd(), e.checkCmd(), e.budgetCmd(), e.queryCmd(), e.verifyCmd(), e.formatsCmd(), e.versionCmd(), e.manCmd())
	return root
}

// dbHelp is --db's help, the same for every command.
const dbHelp = "the database: a DuckDB file, or a ClickHouse cluster as clickhouse://HOST:PORT/DATABASE?cluster=NAME (default $RETRYLENS_DB or ./retrylens.duckdb)"

// dbPath resolves --db, $RETRYLENS_DB, ./retrylens.duckdb.
func (e *env) dbPath(flag string) string {
	if flag != "" {
		return flag
	}
	if p := e.getenv("RETRYLENS_DB"); p != "" {
		return p
	}
	return "retrylens.duckdb"
}

// formatFlags are the input flags shared by every command that reads logs.
type formatFlags struct {
	logFormat   string
	nginxFormat string
	escape      string
	routes      []string
	routesFile  string
	nginxConf   string
	formatName  string
	attemptHdr  string
	fields      []string // --field NAME=KEY.PATH
	captures    string   // --haproxy-captures
	changed     func(flag string) bool
}

func (f *formatFlags) register(c *cobra.Command) {
	f.changed = c.Flags().Changed
	c.Flags().StringVar(&f.logFormat, "log-format", "auto", "input format preset: auto, "+strings.Join(parse.PresetNames(), ", ")+" (see 'retrylens formats'), or json (keys from --field)")
	c.Flags().StringVar(&f.nginxFormat, "nginx-format", "", "an nginx log_format string, verbatim (the quoted pieces from nginx.conf work too)")
	c.Flags().StringVar(&f.escape, "escape", "default", "the escape= of --nginx-format: default, json or none")
	c.Flags().StringVar(&f.nginxConf, "nginx-conf", "", "read the format from this nginx.conf (includes followed): its one log_format, the one its access_log uses, or --log-format-name's")
	c.Flags().StringVar(&f.formatName, "log-format-name", "", "the name of the log_format in --nginx-conf")
	c.Flags().StringArrayVar(&f.fields, "field", nil, "read a JSON key path as a field, NAME=KEY.PATH, e.g. attempt=request.headers.X-Retry-Attempt (repeatable; on top of a JSON preset, or alone); NAME is one of "+strings.Join(parse.FieldNames(), ", "))
	c.Flags().StringVar(&f.captures, "haproxy-captures", strings.Join(parse.DefaultHAProxyCaptures, ","), "with --log-format haproxy: the request headers the frontend captures, in order ('-' for one to skip)")
	c.Flags().StringVar(&f.attemptHdr, "attempt-header", "", "take attempt numbers from this header only: "+strings.Join(parse.AttemptSources(), ", "))
	c.Flags().StringArrayVar(&f.routes, "route", nil, "a route template such as '/api/users/{id}/orders' ('/{bucket}/{key+}': a last {name+} takes the rest of the path, an S3 object's key); wins over the built-in id rules (repeatable)")
	c.Flags().StringVar(&f.routesFile, "routes", "", "a file of route templates, one per line (# comments)")
}

// router builds the route rules from --route and --routes.
func (f *formatFlags) router() (*ingest.Router, error) {
	templates := f.routes
	if f.routesFile != "" {
		fh, err := os.Open(f.routesFile)
		if err != nil {
			return nil, usagef("--routes: %v", err)
		}
		defer fh.Close()
		more, err := ingest.ReadRoutes(fh)
		if err != nil {
			return nil, usagef("--routes: %v", err)
		}
		templates = append(templates, more...)
	}
	r, err := ingest.NewRouter(templates)
	if err != nil {
		return nil, usagef("--route: %v", err)
	}
	return r, nil
}

// format returns the chosen format, nil for auto-detection.
func (f *formatFlags) format() (*parse.Format, error) {
	pf, err := parse.Spec{Preset: f.logFormat, PresetGiven: f.changed("log-format"), NginxFormat: f.nginxFormat,
		Escape: f.escape, NginxConf: f.nginxConf, FormatName: f.formatName, Fields: f.fields,
		Captures: f.captures, CapturesGiven: f.changed("haproxy-captures"), AttemptHeader: f.attemptHdr}.Format()
	if err != nil {
		return nil, usageError{err}
	}
	return pf, nil
}

// linkFlags are how report and check link attempts into logical requests.
type linkFlags struct {
	maxGap time.Duration
	infer  bool
}

func (l *linkFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.DurationVar(&l.maxGap, "max-gap", query.DefaultMaxGap, "most time between two attempts of one request: for heuristic links, --infer-attempts, and how long after its last attempt a request is final")
	f.BoolVar(&l.infer, "infer-attempts", false, "infer attempt numbers for lines without an attempt header")
}

func (l *linkFlags) check() error {
	if l.maxGap <= 0 {
		return usagef("--max-gap must be positive")
	}
	return nil
}

func (l *linkFlags) apply(qo *query.Options) { qo.MaxGap, qo.InferAttempts = l.maxGap, l.infer }

// figureFlags are the flags that change a figure, the same for report, check and watch
// so that the live figures cannot drift from the report's: the rules, the linking, the
// statuses that throttle and the policy's cap on attempts.
type figureFlags struct {
	linkFlags
	rules    string
	maxAtt   int
	throttle []int
}

func (o *figureFlags) register(c *cobra.Command) {
	f := c.Flags()
	o.linkFlags.register(c)
	f.StringVar(&o.rules, "rules", "", "a JSON file overriding the alert rules' thresholds, sustain times or severities")
	f.IntVar(&o.maxAtt, "max-attempts", query.DefaultMaxAttempts, "the retry policy's cap on attempts per request, first included (for the over_cap finding, where the client states none: amz-sdk-request max=)")
	f.IntSliceVar(&o.throttle, "throttle-status", []int{http.StatusTooManyRequests}, "the statuses that throttle, for 429 loops and blind retries (nginx's limit_req answers 503: 429,503)")
}

// Validate checks the flags before anything is read.
func (o *figureFlags) Validate() error {
	if o.maxAtt < 1 {
		return usagef("--max-attempts must be at least 1")
	}
	for _, c := range o.throttle {
		if c < 100 || c > 599 {
			return usagef("--throttle-status %d: want HTTP statuses such as 429,503", c)
		}
	}
	return o.linkFlags.check()
}

// apply sets what the flags change in po: the rules (read from --rules), linking and
// throttle statuses of its Query, and MaxAttempts.
func (o *figureFlags) apply(po *postmortem.Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	rules, err := loadRules(o.rules)
	if err != nil {
		return err
	}
	po.Query.Rules, po.Query.Throttle, po.MaxAttempts = rules, o.throttle, o.maxAtt
	o.linkFlags.apply(&po.Query)
	return nil
}
