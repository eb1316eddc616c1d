package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/postmortem"
	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/report"
)

type reportOptions struct {
	rowFlags
	window string
	format string
	output string
	by     string
	figureFlags
	section string
	polBase time.Duration
	polMax  int
	top     int
	wide    bool
}

func (e *env) reportCmd() *cobra.Command {
	var o reportOptions
	c := &cobra.Command{
		Use:     "report [flags] [FILE...]",
		Short:   "Print retry metrics per time window and for the whole range",
		Long:    help("report.long.txt"),
		Example: help("report.example.txt"),
		RunE:    func(c *cobra.Command, args []string) error { return e.runReport(c.Context(), &o, args) },
	}
	f := c.Flags()
	o.rowFlags.register(c, ", window starts and day boundaries")
	f.StringVarP(&o.window, "window", "w", "1h", "window width: 1m, 5m, 1h, 1d or any Go duration such as 15m")
	f.StringVarP(&o.format, "format", "f", "", "output format: table, tsv, markdown, json, csv or html (default: from -o's extension, else table on a terminal, tsv in a pipe)")
	f.StringVar(&o.section, "section", "windows", "with --format csv, the table to write: "+strings.Join(report.Sections, ", "))
	f.StringVarP(&o.output, "output", "o", "", outputHelp)
	f.StringVar(&o.by, "by", "", "also break the range down by route, method, status, attempt or host, or several: route,status,attempt")
	o.figureFlags.register(c)
	f.DurationVar(&o.polBase, "policy-base", 0, "the declared retry policy's base delay (base·2^(n−1) + up to base of jitter before retry n), to compare the backoff profile with")
	f.IntVar(&o.polMax, "policy-max-retries", 0, "the declared retry policy's number of retries")
	f.BoolVar(&o.wide, "wide", false, "table format: every column, however wide (by default columns are left out to fit the terminal, or $COLUMNS)")
	f.IntVar(&o.top, "top", query.DefaultTop, "endpoints with retries shown in table, markdown and html (0: all; json and csv carry all)")
	return c
}

// loadRules reads --rules, or returns the default rules.
func loadRules(path string) ([]judge.Rule, error) {
	if path == "" {
		return judge.DefaultRules(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--rules: %v", err)
	}
	defer f.Close()
	rules, err := judge.ReadRules(f)
	if err != nil {
		return nil, usagef("--rules %s: %v", path, err)
	}
	return rules, nil
}

// Validate checks the flags before anything is read; format is the one -f and -o chose.
func (o *reportOptions) Validate(format report.Format) error {
	if err := report.CheckSection(o.section); err != nil {
		return usagef("--section: %v", err)
	}
	// A flag that changes nothing in the chosen format is a mistake to say, not to ignore.
	if o.changed("section") && format != report.FormatCSV {
		return usagef("--section chooses the table --format csv writes; the %s format writes them all", format)
	}
	if o.wide && format != report.FormatTable {
		return usagef("--wide applies to the table format; %s leaves no column out", format)
	}
	if o.changed("top") && format != report.FormatTable && format != report.FormatMarkdown && format != report.FormatHTML {
		return usagef("--top applies to the table, markdown and html formats; %s carries every endpoint", format)
	}
	if o.top < 0 {
		return usagef("--top must be 0 (all) or more")
	}
	if o.polBase < 0 || o.polMax < 0 {
		return usagef("--policy-base and --policy-max-retries must not be negative")
	}
	if o.section == "groups" && o.by == "" {
		return usagef("--section groups writes the --by breakdown: give --by (route, method, status, attempt or host)")
	}
	if _, err := query.GroupingKey(o.by); o.by != "" && err != nil {
		return usagef("--by %q: want one or more of %s, joined by commas", o.by, strings.Join(groupings(), ", "))
	}
	if _, err := query.ParseWindow(o.window); err != nil {
		return usagef("--window: %v", err)
	}
	return o.figureFlags.Validate()
}

func (e *env) runReport(ctx context.Context, o *reportOptions, files []string) error {
	toTerminal := o.output == "" && terminal(e.stdout)
	format, err := report.ParseFormat(report.OutputFormat(o.format, o.output, toTerminal))
	if err != nil {
		return usagef("--format: %v", err)
	}
	if err := o.Validate(format); err != nil {
		return err
	}
	width, _ := query.ParseWindow(o.window) // Validate parsed it
	qo, loc, err := o.rows(e.now())
	if err != nil {
		return err
	}
	po := postmortem.Options{Query: qo, Width: width, Location: loc, By: o.by, PolicyBase: o.polBase, PolicyMaxRetries: o.polMax,
		Charts: format == report.FormatHTML}
	if err := o.figureFlags.apply(&po); err != nil {
		return err
	}
	o.shown = toTerminal && format == report.FormatTable
	db, done, err := e.openRows(ctx, &o.rowFlags, files, &po.Query, false)
	if err != nil {
		return err
	}
	defer done()
	po.Doubled = o.health.Repeats > 0
	if format == report.FormatTable || format == report.FormatMarkdown || format == report.FormatHTML {
		po.Top = o.top // the machine formats carry every endpoint
	}
	pm, err := postmortem.Build(ctx, db, po)
	if err != nil {
		return err
	}
	r := &report.Report{Result: *pm, Health: o.health, GeneratedAt: e.now(), Window: o.window, Endpoint: o.endpoint, Section: o.section, Top: o.top,
		Color: toTerminal && e.getenv("NO_COLOR") == ""}
	if o.top == 0 {
		r.Top = -1 // all
	}
	if format == report.FormatTable && !o.wide {
		r.Columns = e.columns(toTerminal)
	}
	return e.writeOutput(o.output, func(w io.Writer) error { return report.Write(w, format, r) })
}

// rowFlags are the flags of the commands that read rows (report, check, budget): where
// from, which, and the input flags for FILE arguments.
type rowFlags struct {
	db, since, until, tz, endpoint string
	formats                        formatFlags
	command                        string // the command's name, for messages
	changed                        func(flag string) bool
	// health is what openRows found of the store: what a report carries beside its
	// figures (rejected lines, rows loaded twice), and says on stderr too unless shown is
	// set: the report's table on the terminal says it already
	health backend.Health
	shown  bool
}

// register adds the flags to c; tzHelp says what --tz also sets for the command.
func (o *rowFlags) register(c *cobra.Command, tzHelp string) {
	f := c.Flags()
	o.command, o.changed = c.Name(), f.Changed
	f.StringVar(&o.db, "db", "", dbHelp)
	o.formats.register(c)
	f.StringVar(&o.since, "since", "", "first time included: a time (2026-11-29T10:00:00Z, '2026-11-29 10:00') or a duration before now (30m, 2h, 1d)")
	f.StringVar(&o.until, "until", "", "first time excluded: a time, or a duration before now")
	f.StringVar(&o.tz, "tz", "UTC", "time zone for --since/--until without a zone"+tzHelp)
	f.StringVar(&o.endpoint, "endpoint", "", "only this endpoint: as the tables show it ('GET /api/orders/:id'), a route (/api/orders/:id) or a raw path (/api/orders/1042)")
}

// rows parses the range flags into the rows to select (the endpoint as typed: openRows
// resolves it), before anything is opened.
func (o *rowFlags) rows(now time.Time) (query.Options, *time.Location, error) {
	qo, loc, err := query.ParseRange(o.since, o.until, o.tz, now)
	if err != nil {
		return qo, loc, usageError{err}
	}
	qo.Route = o.endpoint
	return qo, loc, err
}

// openRows opens the store of the command's row flags (or loads FILEs into a temporary
// one), says what a report should say beside its figures, and returns the rows qo
// reads, qo's endpoint resolved; every brings every row (a budget's replay). done
// closes the store.
func (e *env) openRows(ctx context.Context, o *rowFlags, files []string, qo *query.Options, every bool) (*sql.DB, func(), error) {
	router, err := o.formats.router()
	if err != nil {
		return nil, nil, err
	}
	var st backend.Store
	health := make(chan backend.Health, 1)
	if len(files) == 0 {
		var trace io.Writer
		if e.getenv("RETRYLENS_TRAFFIC") != "" {
			trace = e.stderr
		}
		if st, err = e.store(ctx, e.dbPath(o.db), backend.Options{Trace: trace}); err != nil {
			if errors.Is(err, backend.ErrNoDatabase) {
				err = fmt.Errorf("%w, or give log files to %s", err, o.command)
			}
			return nil, nil, err
		}
	} else if st, err = e.loadTemp(ctx, o, files, router); err != nil {
		return nil, nil, err
	}
	// checked while the rows are read: on a cluster the check reads every shard
	go func() { health <- st.Health(ctx) }()
	db, err := st.Rows(ctx, qo, router.Route, every)
	o.health = <-health
	// a report carries them in every format too (report.Report.Health); a temporary
	// load's summary said them
	if len(files) == 0 && !o.shown {
		for _, w := range o.health.Warnings(o.command == "report") {
			fmt.Fprintf(e.stderr, "retrylens: %s\n", w)
		}
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return db, func() { st.Close() }, nil
}

// loadTemp loads FILEs into a temporary store, for a report on them.
func (e *env) loadTemp(ctx context.Context, o *rowFlags, files []string, router *ingest.Router) (backend.Store, error) {
	if o.changed("db") {
		return nil, usagef("--db and FILE arguments are exclusive: FILEs are read into a temporary database")
	}
	format, err := o.formats.format()
	if err != nil {
		return nil, err
	}
	if files, err = ingest.Inputs(files); err != nil {
		return nil, err
	}
	st, res, err := backend.Temp(ctx, files, ingest.Options{Format: format, Stdin: e.stdin, Now: e.now, Router: router})
	if t := res.Totals(); err != nil || t.Rejected > 0 {
		ingest.WriteSummary(e.stderr, &res)
	}
	return st, err
}

// columns is the width the table format fits: the terminal's when stdout is one, else
// $COLUMNS when set, else 0 (no limit).
func (e *env) columns(toTerminal bool) int {
	if f, ok := e.stdout.(*os.File); ok && toTerminal {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	n, _ := strconv.Atoi(e.getenv("COLUMNS"))
	return max(n, 0)
}

func groupings() []string {
	var g []string
	for k := range query.Groupings {
		g = append(g, k)
	}
	sort.Strings(g)
	return g
}

// outputHelp is -o's help, for every command that writes a report of some kind.
const outputHelp = "write to this file instead of stdout (its extension picks the format when --format is not given)"

// writeOutput writes to path, or stdout when path is "" or "-". A file is written whole
// or not at all: rendered first, then written beside path and renamed over it, so a
// failed render or a full disk leaves no half file behind.
func (e *env) writeOutput(path string, render func(io.Writer) error) error {
	if path == "" || path == "-" {
		return render(e.stdout)
	}
	var b strings.Builder
	if err := render(&b); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing by that name
	_, err = tmp.WriteString(b.String())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
