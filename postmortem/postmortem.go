// Package postmortem computes what retrylens's report, check and budget show, each into
// one value that package report renders: the commands parse flags, open the database,
// call one function here and render what it returns.
package postmortem

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrylens/retrylens/budget"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

// Options is what a postmortem covers and what it computes.
type Options struct {
	Query            query.Options  // the rows (range, endpoint), how they link, the rules
	Width            time.Duration  // the windows' width
	Location         *time.Location // where days start (windows of a day start at local midnight); nil is UTC
	By               string         // a grouping for Groups (query.GroupingKey), "" for none
	MaxAttempts      int            // the policy's cap on attempts, for the over_cap finding
	PolicyBase       time.Duration  // the declared policy, for the backoff profile (0: none)
	PolicyMaxRetries int
	Charts           bool // compute what only the HTML page draws
	// Top is how many endpoints with retries the report shows (0: every endpoint): only
	// those are judged against the alert rules and kept in Endpoints, the work that grows
	// with the routes.
	Top int
	// Doubled says that the store holds rows loaded twice (backend.Health.Repeats): the
	// findings a doubled load makes up are not judged (query.Doubled).
	Doubled bool
}

// MaxIncidents is how many incident windows a postmortem compares before and after: the
// first five are plenty, the windows show the rest.
const MaxIncidents = 5

// Result is the postmortem of a time range: every figure a report shows, in any format.
type Result struct {
	Width     time.Duration  // the windows' width; under a minute, times show seconds
	Location  *time.Location // how times are shown; nil is UTC
	By        string         // the grouping of Groups (--by), if any
	From, To  time.Time
	Summary   judge.Metrics
	Windows   []judge.Window
	Endpoints []query.Group // by "METHOD route"
	// MoreEndpoints is how many endpoints with retries Endpoints leaves out (Options.Top).
	MoreEndpoints int
	Groups        []query.Group
	Loops         query.Loops429
	Findings      []query.Finding
	// NotJudged are the findings the log lacks a field to judge on some requests, with
	// the field to log (docs/metrics.md, "What the log cannot tell").
	NotJudged []query.NotJudged
	Linking   query.Linking
	Alerts    []judge.Alert
	Backoff   []query.Backoff
	Hedging   query.Hedging
	Layers    query.Layers // traces joined with a gateway's lines (docs/metrics.md, "Layers")
	Incidents []query.Incident
	Sustained []judge.Sustained // stretches of retry-sustained overload, in the windows
	// For html: the timeline's buckets (see ChartWidth), logical requests per number of
	// attempts and the gap histograms.
	Chart      []judge.Window
	ChartWidth time.Duration
	// Closeup is the minutes around the first incident (as long again before and after)
	// when the chart shows it poorly (closeup): its own timeline gives it the width.
	Closeup       []judge.Window
	AttemptCounts []query.AttemptCount
	Gaps          []query.GapHistogram
}

// Build computes the postmortem of the rows o selects.
func Build(ctx context.Context, db *sql.DB, o Options) (*Result, error) {
	rules := o.Query.Rules
	if rules == nil {
		rules = judge.DefaultRules()
	}
	set, err := query.Open(ctx, db, o.Query)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	r := &Result{Width: o.Width, Location: o.Location, By: o.By}
	top := o.Top
	if o.By == "route" {
		top = 0 // the --by table shows them all
	}
	if r.From, r.To, err = set.Span(ctx); err != nil {
		return nil, err
	}
	// Windows start on multiples of the width in the zone's offset at the range start (so
	// that days start at local midnight); a DST change inside the range shifts later ones.
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	_, off := r.From.In(loc).Zone()
	offset := time.Duration(off) * time.Second
	steps := []func() error{
		func() (err error) { r.Summary, err = set.Summary(ctx); return },
		func() (err error) { r.Windows, err = set.Windows(ctx, o.Width, offset); return },
		func() (err error) { r.Endpoints, r.MoreEndpoints, err = set.TopGroups(ctx, "route", top); return },
		func() (err error) { r.Loops, err = set.Loops(ctx); return },
		func() (err error) { r.Findings, err = set.Findings(ctx, o.MaxAttempts); return },
		func() (err error) { r.Linking, err = set.Linking(ctx); return },
		func() (err error) { r.Backoff, err = set.Backoff(ctx, o.PolicyBase, o.PolicyMaxRetries); return },
		func() (err error) { r.Hedging, err = set.Hedging(ctx); return },
		func() (err error) { r.Layers, err = set.Layers(ctx); return },
	}
	switch o.By {
	case "":
	case "route": // every endpoint, judged (top is then 0)
		steps = append(steps, func() error { r.Groups = r.Endpoints; return nil })
	default:
		steps = append(steps, func() (err error) { r.Groups, err = set.Groups(ctx, o.By); return })
	}
	if o.Charts && !r.From.IsZero() {
		r.ChartWidth = ChartWidth(r.From, r.To, o.Width)
		steps = append(steps,
			func() (err error) { r.Chart, err = set.Windows(ctx, r.ChartWidth, offset); return },
			func() (err error) { r.AttemptCounts, err = set.AttemptCounts(ctx); return },
			func() (err error) { r.Gaps, err = set.Gaps(ctx); return })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	minutes, err := set.Windows(ctx, time.Minute, 0)
	if err != nil {
		return nil, err
	}
	// Alerts on the report's windows: minutes, or, when they are shorter, the windows'
	// own and the minutes' where the windows bear them out (judge.AlertsAt).
	if r.Alerts, err = set.Alerts(ctx); err != nil {
		return nil, err
	}
	if o.Width < time.Minute {
		r.Alerts = judge.AlertsAt(r.Windows, o.Width, rules, r.Alerts)
	}
	// Incidents on minutes, or on the report's windows when they are shorter: an incident
	// starts where its evidence starts.
	incidents := judge.Incidents(minutes, rules)
	if o.Width < time.Minute {
		incidents = judge.IncidentsAt(r.Windows, o.Width, rules)
	}
	for i, span := range incidents {
		if i == MaxIncidents {
			break
		}
		in, err := set.Compare(ctx, span)
		if err != nil {
			return nil, err
		}
		r.Incidents = append(r.Incidents, in)
	}
	if o.Charts && o.Width >= time.Minute && len(r.Incidents) > 0 {
		r.Closeup = closeup(r.Incidents[0], r.From, r.To, r.ChartWidth, minutes)
	}
	judge.MarkFuelling(r.Windows, o.Width, r.Alerts, rules)
	if o.Width < time.Minute {
		if err := judgeEndpointsAt(ctx, db, o, offset, r.Endpoints); err != nil {
			return nil, err
		}
	}
	if r.NotJudged, err = set.NotJudged(ctx, o.MaxAttempts, r.Summary); err != nil {
		return nil, err
	}
	if o.Doubled {
		r.Findings, r.NotJudged = query.Doubled(r.Findings, r.NotJudged)
	}
	r.Sustained = judge.RetrySustained(r.Windows, o.Width, rules)
	judge.PeakShed(r.Sustained, o.Width, minutes)
	r.Summary = judge.Judged(r.Summary, judge.Fired(r.Alerts), rules)
	return r, nil
}

// Check is what retrylens check shows: the alerts that fired over the rows selected, and
// how many of them are at or above a severity.
type Check struct {
	FailOn   string
	Failing  int
	Alerts   []judge.Alert
	Findings []query.Finding
	Summary  judge.Metrics // the rows checked: none, or none tagged, is no evidence of health
	// Sustained are the stretches of retry-sustained overload in the checked windows.
	Sustained []judge.Sustained
	// FailedOn is why the check fails, in order: each alert at or above FailOn, then each
	// finding of the kinds asked to fail on that is present (a retry-sustained stretch
	// each). Empty when it passes.
	FailedOn []Failure
}

// Failure is one reason a check fails: an alert (Kind "alert", with its Rule and
// Severity), or a finding (its Kind and Count of logical requests; a retry-sustained
// stretch has Start and End instead).
type Failure struct {
	Kind, Rule, Severity string
	Count                int64
	Start, End           time.Time
}

// Alerts evaluates the alert rules (o.Query.Rules, or the defaults) on the minutes of the
// rows o.Query selects, or on windows of o.Width when it is under a minute (each judged
// on its own counts, as a report at that width judges them), and finds the policy
// findings (o.MaxAttempts: the policy's cap). failOn is the severity that fails a check
// (judge.AtLeast), failKinds the findings that fail it.
func Alerts(ctx context.Context, db *sql.DB, o Options, failOn string, failKinds []string) (Check, error) {
	c := Check{FailOn: failOn}
	qo := o.Query
	rules := qo.Rules
	if rules == nil {
		rules = judge.DefaultRules()
	}
	set, err := query.Open(ctx, db, qo)
	if err != nil {
		return c, err
	}
	defer set.Close()
	if c.Summary, err = set.Summary(ctx); err != nil {
		return c, err
	}
	width := time.Minute
	if o.Width > 0 && o.Width < time.Minute {
		width = o.Width
	}
	windows, err := set.Windows(ctx, width, 0)
	if err != nil {
		return c, err
	}
	if c.Alerts, err = set.Alerts(ctx); err != nil {
		return c, err
	}
	if width < time.Minute {
		c.Alerts = judge.AlertsAt(windows, width, rules, c.Alerts)
	}
	if c.Findings, err = set.Findings(ctx, o.MaxAttempts); err != nil {
		return c, err
	}
	if o.Doubled {
		c.Findings, _ = query.Doubled(c.Findings, nil)
	}
	c.Sustained = judge.RetrySustained(windows, width, rules)
	for _, a := range c.Alerts {
		if judge.AtLeast(a.Severity, failOn) {
			c.Failing++
			c.FailedOn = append(c.FailedOn, Failure{Kind: "alert", Rule: a.Rule, Severity: a.Severity, Start: a.Start, End: a.End})
		}
	}
	for _, f := range c.Findings {
		if slices.Contains(failKinds, f.Kind) && f.Count > 0 {
			c.FailedOn = append(c.FailedOn, Failure{Kind: f.Kind, Count: f.Count})
		}
	}
	if slices.Contains(failKinds, judge.SustainedFinding) {
		for _, s := range c.Sustained {
			c.FailedOn = append(c.FailedOn, Failure{Kind: judge.SustainedFinding, Start: s.Start, End: s.End})
		}
	}
	return c, nil
}

// Budget replays the tagged attempts of the rows qo selects through each model, with
// per-window counts when width is not zero.
func Budget(ctx context.Context, db *sql.DB, qo query.Options, models []budget.Model, width time.Duration) ([]budget.Result, error) {
	attempts, err := Attempts(ctx, db, qo)
	if err != nil {
		return nil, err
	}
	var results []budget.Result
	for _, m := range models {
		results = append(results, budget.Replay(attempts, m, width))
	}
	return results, nil
}

// Attempts are the tagged attempts of the rows qo selects, by start time: what a budget
// replays.
func Attempts(ctx context.Context, db *sql.DB, qo query.Options) ([]query.Attempt, error) {
	set, err := query.Open(ctx, db, qo)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	return set.Attempts(ctx)
}

// judgeEndpointsAt judges each endpoint row of a report of windows under a minute as
// --endpoint judges that endpoint's range: on its own windows at the width and its
// minutes' alerts (judge.AlertsAt), not on its minutes alone, so that the row and
// --endpoint agree at every width. Only rows with the least evidence an alert needs can
// fire one; the others keep their verdict. A cluster's rows (Counted, Answers) keep the
// minutes' judgement: their Set holds no rows to cut by endpoint.
func judgeEndpointsAt(ctx context.Context, db *sql.DB, o Options, offset time.Duration, eps []query.Group) error {
	if o.Query.Counted || o.Query.Answers != nil || o.Query.Route != "" {
		return nil
	}
	rules := o.Query.Rules
	if rules == nil {
		rules = judge.DefaultRules()
	}
	first, retries := judge.LeastEvidence(rules)
	for i := range eps {
		e := &eps[i]
		method, route, ok := strings.Cut(e.Key, " ")
		if !ok || method == "-" || route == "-" || first < 0 || e.FirstAttempts < first || e.Retries < retries {
			continue
		}
		q := o.Query
		q.Method, q.Route = method, route
		set, err := query.Open(ctx, db, q)
		if err != nil {
			return err
		}
		ws, err := set.Windows(ctx, o.Width, offset)
		var minute []judge.Alert
		if err == nil {
			minute, err = set.Alerts(ctx)
		}
		set.Close()
		if err != nil {
			return fmt.Errorf("endpoint %s: %w", e.Key, err)
		}
		e.Metrics = judge.Judged(e.Metrics, judge.Fired(judge.AlertsAt(ws, o.Width, rules, minute)), rules)
	}
	return nil
}

// closeup is the minutes from as long before the incident as it lasts to as long after,
// when the chart (buckets of width over [from, to)) shows it poorly: in buckets longer
// than a minute, or in under a tenth of its width.
func closeup(in query.Incident, from, to time.Time, width time.Duration, minutes []judge.Window) []judge.Window {
	d := in.End.Sub(in.Start)
	if d <= 0 || (width <= time.Minute && 10*d >= to.Sub(from)) {
		return nil
	}
	lo, hi := in.Start.Add(-d), in.End.Add(d)
	var out []judge.Window
	for _, m := range minutes {
		if !m.Start.Before(lo) && m.Start.Before(hi) {
			out = append(out, m)
		}
	}
	return out
}

// ChartWidth picks the timeline chart's bucket width for a range: the report's window
// when it is under a minute (a chaos test's minute at --window 10s is six points), else
// the smallest of 1m, 2m, 5m, 10m, 15m, 30m, 1h, 3h, 6h, 12h, 1d that gives at most 120
// points (1d beyond).
func ChartWidth(from, to time.Time, window time.Duration) time.Duration {
	if window > 0 && window < time.Minute {
		return window // a short run at sub-minute windows: one point per window
	}
	span := to.Sub(from)
	for _, w := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour} {
		if span/w < 120 {
			return w
		}
	}
	return 24 * time.Hour
}
