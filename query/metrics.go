package query

import (
	"database/sql"
	"fmt"

	"github.com/retrylens/retrylens/judge"
)

// counts are the raw figures behind a group's Metrics (metrics.sql and logical.sql).
// They add up: the counts of a window are the sums of its minutes'.
type counts struct {
	requests, untagged, inferred int64
	tagged, first, retries       int64
	second                       int64 // attempts numbered 1: the first attempts retried
	retriesOK, taggedOK          int64 // answered 2xx
	s5xx, s429, s499             judge.Split
	abandoned, cancelled         judge.Split
	proxied, tries               int64 // lines that record the proxy's tries, and those tries
	gatewayRecovered             int64 // first attempts answered 2xx after the gateway's own retries
	// failed below their client's stated cap: strong first attempts over all rows, the
	// requests of _attempts that ended so, and the strong first attempts of those requests
	strongFirstsDenied, denied, multiFirstsDenied, uncoded int64
	strongFirsts, strongFirstsOK                           int64 // strong-keyed first attempts over all rows
	recovered, exhausted                                   int64
	logical, finalOK                                       int64 // requests in _attempts, and those ending 2xx
	multiFirsts, multiFirstsOK                             int64 // strong-keyed first attempts of requests in _attempts
}

// countColumn is a count's column and its place in counts.
type countColumn struct {
	col   string
	place func(*counts) *int64
}

// countPlaces are where each count of judge.CountNames (the columns metrics.sql and
// logical.sql return) sits in counts. Rows are scanned by column name (countScan) and
// added field by field (add). A new count is its SQL line, its judge.CountNames entry, its
// field and its line here; a figure over it is one line of judge.Figures.
var countPlaces = map[string]func(*counts) *int64{
	"requests":             func(c *counts) *int64 { return &c.requests },
	"untagged":             func(c *counts) *int64 { return &c.untagged },
	"inferred":             func(c *counts) *int64 { return &c.inferred },
	"tagged":               func(c *counts) *int64 { return &c.tagged },
	"first_attempts":       func(c *counts) *int64 { return &c.first },
	"retries":              func(c *counts) *int64 { return &c.retries },
	"second_attempts":      func(c *counts) *int64 { return &c.second },
	"retries_ok":           func(c *counts) *int64 { return &c.retriesOK },
	"tagged_ok":            func(c *counts) *int64 { return &c.taggedOK },
	"status_5xx_first":     func(c *counts) *int64 { return &c.s5xx.First },
	"status_5xx_retry":     func(c *counts) *int64 { return &c.s5xx.Retry },
	"status_429_first":     func(c *counts) *int64 { return &c.s429.First },
	"status_429_retry":     func(c *counts) *int64 { return &c.s429.Retry },
	"status_499_first":     func(c *counts) *int64 { return &c.s499.First },
	"status_499_retry":     func(c *counts) *int64 { return &c.s499.Retry },
	"abandoned_first":      func(c *counts) *int64 { return &c.abandoned.First },
	"abandoned_retry":      func(c *counts) *int64 { return &c.abandoned.Retry },
	"cancelled_first":      func(c *counts) *int64 { return &c.cancelled.First },
	"cancelled_retry":      func(c *counts) *int64 { return &c.cancelled.Retry },
	"proxied":              func(c *counts) *int64 { return &c.proxied },
	"upstream_tries":       func(c *counts) *int64 { return &c.tries },
	"gateway_recovered":    func(c *counts) *int64 { return &c.gatewayRecovered },
	"strong_firsts_denied": func(c *counts) *int64 { return &c.strongFirstsDenied },
	"denied":               func(c *counts) *int64 { return &c.denied },
	"multi_firsts_denied":  func(c *counts) *int64 { return &c.multiFirstsDenied },
	"uncoded":              func(c *counts) *int64 { return &c.uncoded },
	"strong_firsts":        func(c *counts) *int64 { return &c.strongFirsts },
	"strong_firsts_ok":     func(c *counts) *int64 { return &c.strongFirstsOK },
	"recovered":            func(c *counts) *int64 { return &c.recovered },
	"exhausted":            func(c *counts) *int64 { return &c.exhausted },
	"logical":              func(c *counts) *int64 { return &c.logical },
	"final_ok":             func(c *counts) *int64 { return &c.finalOK },
	"multi_firsts":         func(c *counts) *int64 { return &c.multiFirsts },
	"multi_firsts_ok":      func(c *counts) *int64 { return &c.multiFirstsOK },
}

// countColumns are the counts in judge.CountNames's order, the order of Metrics.Counts.
var countColumns = func() []countColumn {
	if len(countPlaces) != len(judge.CountNames) {
		panic("query: countPlaces is not judge.CountNames")
	}
	cs := make([]countColumn, len(judge.CountNames))
	for i, name := range judge.CountNames {
		place, ok := countPlaces[name]
		if !ok {
			panic("query: no place in counts for the count " + name)
		}
		cs[i] = countColumn{name, place}
	}
	return cs
}()

func (c *counts) add(d counts) {
	for _, f := range countColumns {
		*f.place(c) += *f.place(&d)
	}
}

// The figures Metrics has fields for (judge.Figures).
var (
	figAmplification      = judge.FigureOf("amplification")
	figRetryRate          = judge.FigureOf("retry_rate")
	figRetrySuccess       = judge.FigureOf("retry_success_rate")
	figExtraLoad          = judge.FigureOf("extra_load")
	figActualSuccess      = judge.FigureOf("actual_success")
	figEffectiveSuccess   = judge.FigureOf("effective_success")
	figProxyAmplification = judge.FigureOf("proxy_amplification")
)

// metrics computes the metrics of docs/metrics.md from the counts: its figures are
// those of the catalogue (Figures).
func (c counts) metrics(rules []judge.Rule) judge.Metrics {
	m := judge.Metrics{
		Requests:      c.requests,
		Untagged:      c.untagged,
		Inferred:      c.inferred,
		FirstAttempts: c.first,
		Retries:       c.retries,
		Recovered:     c.recovered,
		Exhausted:     c.exhausted,
		Status5xx:     c.s5xx,
		Status429:     c.s429,
		Status499:     c.s499,
		Abandoned:     c.abandoned,
		Cancelled:     c.cancelled,
	}
	for i, f := range countColumns {
		m.Counts[i] = *f.place(&c)
	}
	m.Amplification = figAmplification.Of(&m.Counts)
	m.RetryRate = figRetryRate.Of(&m.Counts)
	m.RetrySuccessRate = figRetrySuccess.Of(&m.Counts)
	m.ExtraLoad = figExtraLoad.Of(&m.Counts)
	m.ActualSuccess = figActualSuccess.Of(&m.Counts)
	m.EffectiveSuccess = figEffectiveSuccess.Of(&m.Counts)
	m.ProxyAmplification = figProxyAmplification.Of(&m.Counts) // upstream tries per line that records them
	if m.Amplification != nil && m.ProxyAmplification != nil {
		load := *m.Amplification * *m.ProxyAmplification
		m.UpstreamLoad = &load
	}
	m.Verdict = judge.Verdict(m, rules)
	return m
}

// countScan reads the rows of metrics.sql or logical.sql by column name: k, the group
// key, and each count into its place in counts (countColumns). One per query: it maps
// the columns on the first row.
type countScan struct {
	places []func(*counts) *int64 // by column; nil for k
}

func (sc *countScan) scan(rows *sql.Rows, key any, c *counts) error {
	if sc.places == nil {
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		for _, col := range cols {
			f, ok := countPlaces[col]
			if !ok && col != "k" {
				return fmt.Errorf("the SQL returns a count the catalogue lacks: %s (query/metrics.go, countColumns)", col)
			}
			sc.places = append(sc.places, f)
		}
	}
	dest := make([]any, len(sc.places))
	for i, f := range sc.places {
		if f == nil {
			dest[i] = key
		} else {
			dest[i] = f(c)
		}
	}
	return rows.Scan(dest...)
}
