// Package promrules writes the Prometheus rules file for the series 'retrylens watch'
// serves, and names the two series the rules read by figure. It needs no database, so
// its tests run without linking DuckDB.
package promrules

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retrylens/retrylens/judge"
)

// FigureNumerator and FigureDenominator carry every figure's sums by a "figure" label, the
// report's formula (judge.Figure.Sums) as counters: the rules divide their increases.
const (
	FigureNumerator   = "retrylens_figure_numerator_total"
	FigureDenominator = "retrylens_figure_denominator_total"
)

// Write writes a Prometheus rules file for the counters watch serves: for every
// figure of judge.Figures, a recording rule over 5 minutes, in all and per endpoint, that
// divides the increase of its numerator by that of its denominator (the report's
// formula, served as counters); and an alert for each of rules' alert rules on the figure
// it watches, with its threshold, its evidence (per minute, over the 5 minutes) and its
// sustain as "for". The built-in judgement also asks for 95 % confidence and judges each
// closed minute; the gauge retrylens_window_alert_firing carries that one, and the
// RetrylensAlertFiring alert forwards it. Thresholds come from one place: the rules a
// report uses.
func Write(w io.Writer, rules []judge.Rule) error {
	var b strings.Builder
	b.WriteString(`# Prometheus rules for retrylens watch, written by 'retrylens watch --prometheus-rules'
# from the figures and alert rules of docs/metrics.md: edit the --rules file and write them again.
groups:
  - name: retrylens-recording
    rules:
`)
	for _, level := range []struct{ name, by string }{{"retrylens", ""}, {"endpoint", " by (method, route)"}} {
		rec := func(metric, expr string) {
			fmt.Fprintf(&b, "      - record: %s:%s\n        expr: %s\n", level.name, metric, expr)
		}
		inc := func(series string) string { return fmt.Sprintf("sum%s (increase(%s[5m]))", level.by, series) }
		rec("first_attempts:increase5m", inc(`retrylens_attempts_total{attempt="first"}`))
		rec("retries:increase5m", inc(`retrylens_attempts_total{attempt="retry"}`))
		for _, f := range judge.Figures {
			rec(f.Key+":ratio5m", fmt.Sprintf("%s / %s", inc(fmt.Sprintf("%s{figure=%q}", FigureNumerator, f.Key)),
				inc(fmt.Sprintf("%s{figure=%q}", FigureDenominator, f.Key))))
		}
	}
	b.WriteString(`  - name: retrylens-alerts
    rules:
`)
	for _, r := range rules {
		key, below := r.Figure()
		if r.Severity == "" || key == "" {
			continue
		}
		op := ">"
		if below {
			op = "<"
		}
		cond := fmt.Sprintf("retrylens:%s:ratio5m %s %g", key, op, r.Threshold)
		if r.MinRetryRate > 0 {
			cond += fmt.Sprintf(" and retrylens:retry_rate:ratio5m > %g", r.MinRetryRate)
		}
		// The evidence, per minute in the rules file, over the 5 minutes here: first
		// attempts, and the retries the rule's ratio counts.
		retries := "retrylens:retries:increase5m"
		if r.CountsDecided() {
			retries = fmt.Sprintf("sum(increase(%s{figure=%q}[5m]))", FigureDenominator, key)
		}
		cond += fmt.Sprintf(" and retrylens:first_attempts:increase5m >= %d and %s >= %d", 5*r.MinFirstAttempts, retries, 5*r.MinRetries)
		fmt.Fprintf(&b, `      - alert: Retrylens%s
        expr: %s
        for: %s
        labels:
          severity: %s
          rule: %s
        annotations:
          summary: "%s over the last 5 minutes (retrylens rule %s)"
`, camel(r.Name), cond, promDuration(r.Sustain), r.Severity, r.Name, describe(r), r.Name)
	}
	b.WriteString(`      - alert: RetrylensAlertFiring
        expr: retrylens_window_alert_firing == 1
        labels:
          source: retrylens
        annotations:
          summary: "retrylens rule {{ $labels.rule }} ({{ $labels.severity }}) fired in the last closed window, as 'retrylens report' judges it"
      - alert: RetrylensWatchStalled
        expr: time() - retrylens_last_batch_timestamp_seconds > 120 or increase(retrylens_batch_failures_total[5m]) > 2
        for: 2m
        labels:
          severity: P2
        annotations:
          summary: "retrylens watch has not loaded a batch for 2 minutes, or its batches fail: its figures are stale"
`)
	_, err := io.WriteString(w, b.String())
	return err
}

func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func promDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func describe(r judge.Rule) string {
	switch r.Name {
	case "retry_rate_high":
		return fmt.Sprintf("retry rate above %g", r.Threshold)
	case "retries_not_helping":
		return fmt.Sprintf("retry success under %g while the retry rate is above %g", r.Threshold, r.MinRetryRate)
	case "retry_storm":
		return fmt.Sprintf("amplification above %g", r.Threshold)
	}
	return r.Name
}
