package query

import (
	"database/sql"
	"fmt"
)

// Metrics are the metrics of docs/metrics.md for a set of rows. Ratios are nil when their
// denominator is zero.
type Metrics struct {
	Requests         int64
	Untagged         int64
	Inferred         int64 // rows whose attempt number was inferred (--infer-attempts)
	FirstAttempts    int64
	Retries          int64
	Amplification    *float64
	RetryRate        *float64
	RetrySuccessRate *float64
	ExtraLoad        *float64
	ActualSuccess    *float64
	Recovered        int64    // logical requests whose first attempt failed and a retry succeeded
	Exhausted        int64    // logical requests that retried and never got 2xx
	EffectiveSuccess *float64 // 2xx share of logical requests' final attempts
	Status5xx        Split
	Status429        Split
	Status499        Split
	Abandoned        Split // answers the client did not wait for: 499, or 0 (Caddy, Envoy)
	Cancelled        Split // of those, attempts abandoned because another attempt of the request won
	// ProxyAmplification is upstream tries per line, over lines that record them (nginx's
	// $upstream_status list): the gateway's own retries, kept apart from the client's.
	ProxyAmplification *float64
	// UpstreamLoad is the tries the upstream saw per logical request across both layers:
	// the client's attempts per first attempt times the gateway's tries per line, when the
	// lines record the gateway's tries (nil otherwise).
	UpstreamLoad *float64
	Verdict      string   // see Verdict
	Fired        []string // the alert rules that fired in the slice's own minutes: why it is fuelling
	// Counts are the counts every figure is computed from (countColumns), for the
	// surfaces that serve counts rather than figures (watch) or need one as it is.
	Counts Counts
}

// Counts are a slice's counts in countColumns' order; Get reads one by its column.
type Counts [numCounts]int64

// numCounts is len(countColumns) (checked when the package starts).
const numCounts = 29

// Get returns the count of column col (countColumns); it panics on a column the
// catalogue lacks, a programming error.
func (c Counts) Get(col string) int64 {
	i, ok := countIndex[col]
	if !ok {
		panic("query: no count " + col)
	}
	return c[i]
}

// CountNames are the columns of Counts, in order.
func CountNames() []string {
	names := make([]string, len(countColumns))
	for i, c := range countColumns {
		names[i] = c.col
	}
	return names
}

// Split is a count split between first attempts and retries.
type Split struct {
	First, Retry int64
}

// Total is First + Retry.
func (s Split) Total() int64 { return s.First + s.Retry }

// counts are the raw figures behind a group's Metrics (metrics.sql and logical.sql).
// They add up: the counts of a window are the sums of its minutes'.
type counts struct {
	requests, untagged, inferred int64
	tagged, first, retries       int64
	second                       int64 // attempts numbered 1: the first attempts retried
	retriesOK, taggedOK          int64 // answered 2xx
	s5xx, s429, s499             Split
	abandoned, cancelled         Split
	proxied, tries               int64 // lines that record the proxy's tries, and those tries
	strongFirsts, strongFirstsOK int64 // strong-keyed first attempts over all rows
	recovered, exhausted         int64
	logical, finalOK             int64 // requests in _attempts, and those ending 2xx
	multiFirsts, multiFirstsOK   int64 // strong-keyed first attempts of requests in _attempts
}

// countColumn is a count's column and its place in counts.
type countColumn struct {
	col   string
	place func(*counts) *int64
}

// countColumns are the catalogue of counts: each column metrics.sql or logical.sql
// returns, and its place in counts. Rows are scanned by column name (countScan) and
// added field by field (add). A new count is its SQL line, its field and its line here;
// a figure over it is one line of Figures.
var countColumns = []countColumn{
	{"requests", func(c *counts) *int64 { return &c.requests }},
	{"untagged", func(c *counts) *int64 { return &c.untagged }},
	{"inferred", func(c *counts) *int64 { return &c.inferred }},
	{"tagged", func(c *counts) *int64 { return &c.tagged }},
	{"first_attempts", func(c *counts) *int64 { return &c.first }},
	{"retries", func(c *counts) *int64 { return &c.retries }},
	{"second_attempts", func(c *counts) *int64 { return &c.second }},
	{"retries_ok", func(c *counts) *int64 { return &c.retriesOK }},
	{"tagged_ok", func(c *counts) *int64 { return &c.taggedOK }},
	{"status_5xx_first", func(c *counts) *int64 { return &c.s5xx.First }},
	{"status_5xx_retry", func(c *counts) *int64 { return &c.s5xx.Retry }},
	{"status_429_first", func(c *counts) *int64 { return &c.s429.First }},
	{"status_429_retry", func(c *counts) *int64 { return &c.s429.Retry }},
	{"status_499_first", func(c *counts) *int64 { return &c.s499.First }},
	{"status_499_retry", func(c *counts) *int64 { return &c.s499.Retry }},
	{"abandoned_first", func(c *counts) *int64 { return &c.abandoned.First }},
	{"abandoned_retry", func(c *counts) *int64 { return &c.abandoned.Retry }},
	{"cancelled_first", func(c *counts) *int64 { return &c.cancelled.First }},
	{"cancelled_retry", func(c *counts) *int64 { return &c.cancelled.Retry }},
	{"proxied", func(c *counts) *int64 { return &c.proxied }},
	{"upstream_tries", func(c *counts) *int64 { return &c.tries }},
	{"strong_firsts", func(c *counts) *int64 { return &c.strongFirsts }},
	{"strong_firsts_ok", func(c *counts) *int64 { return &c.strongFirstsOK }},
	{"recovered", func(c *counts) *int64 { return &c.recovered }},
	{"exhausted", func(c *counts) *int64 { return &c.exhausted }},
	{"logical", func(c *counts) *int64 { return &c.logical }},
	{"final_ok", func(c *counts) *int64 { return &c.finalOK }},
	{"multi_firsts", func(c *counts) *int64 { return &c.multiFirsts }},
	{"multi_firsts_ok", func(c *counts) *int64 { return &c.multiFirstsOK }},
}

// countPlaces finds a column's place in counts, countIndex its index in Counts.
var countPlaces, countIndex = func() (map[string]func(*counts) *int64, map[string]int) {
	if len(countColumns) != numCounts {
		panic("query: numCounts is not len(countColumns)")
	}
	m, idx := map[string]func(*counts) *int64{}, map[string]int{}
	for i, c := range countColumns {
		m[c.col], idx[c.col] = c.place, i
	}
	return m, idx
}()

func (c *counts) add(d counts) {
	for _, f := range countColumns {
		*f.place(c) += *f.place(&d)
	}
}

// metrics computes the metrics of docs/metrics.md from the counts: its figures are
// those of the catalogue (Figures).
func (c counts) metrics(rules []Rule) Metrics {
	m := Metrics{
		Requests:         c.requests,
		Untagged:         c.untagged,
		Inferred:         c.inferred,
		FirstAttempts:    c.first,
		Retries:          c.retries,
		Recovered:        c.recovered,
		Exhausted:        c.exhausted,
		Status5xx:        c.s5xx,
		Status429:        c.s429,
		Status499:        c.s499,
		Abandoned:        c.abandoned,
		Cancelled:        c.cancelled,
		Amplification:    figAmplification.of(&c),
		RetryRate:        figRetryRate.of(&c),
		RetrySuccessRate: figRetrySuccess.of(&c),
		ExtraLoad:        figExtraLoad.of(&c),
		ActualSuccess:    figActualSuccess.of(&c),
		EffectiveSuccess: figEffectiveSuccess.of(&c),
		// upstream tries per line, over lines that record them
		ProxyAmplification: figProxyAmplification.of(&c),
	}
	if m.Amplification != nil && m.ProxyAmplification != nil {
		load := *m.Amplification * *m.ProxyAmplification
		m.UpstreamLoad = &load
	}
	for i, f := range countColumns {
		m.Counts[i] = *f.place(&c)
	}
	m.Verdict = Verdict(m, rules)
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
