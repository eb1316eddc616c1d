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
	// Counts are the plain counts (see plainCount), by column name.
	Counts map[string]int64
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
	logical, finalOK             int64           // requests in _attempts, and those ending 2xx
	multiFirsts, multiFirstsOK   int64           // strong-keyed first attempts of requests in _attempts
	plain                        [maxPlain]int64 // the plain counts (plainCount), in their order
}

// countColumn is a count's column and its place in counts.
type countColumn struct {
	col   string
	place func(*counts) *int64
}

// maxPlain is how many plain counts counts has room for.
const maxPlain = 8

// plainNames are the plain counts' columns, in the order of counts.plain.
var plainNames []string

// plainCount is a count no figure is derived from: it reaches the output as it is, by its
// column's name (Metrics.Counts), so that adding one is its SQL line, its plainCount line
// in countColumns and its report column.
func plainCount(col string) countColumn {
	i := len(plainNames)
	if i == maxPlain {
		panic("query: more plain counts than maxPlain")
	}
	plainNames = append(plainNames, col)
	return countColumn{col, func(c *counts) *int64 { return &c.plain[i] }}
}

// countColumns are the catalogue of counts: each column metrics.sql or logical.sql
// returns, and its place in counts. Rows are scanned by column name (countScan) and
// added field by field (add). A new count is its SQL line and its line here: a
// plainCount, which the report shows with one more line (its column, report/columns.go),
// or a field that figures are derived from (then its Metrics field too).
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

// countPlaces finds a column's place in counts.
var countPlaces = func() map[string]func(*counts) *int64 {
	m := map[string]func(*counts) *int64{}
	for _, c := range countColumns {
		m[c.col] = c.place
	}
	return m
}()

func (c *counts) add(d counts) {
	for _, f := range countColumns {
		*f.place(c) += *f.place(&d)
	}
}

// ratio is n/d, nil when d is 0 (JSON's null).
func ratio(n, d int64) *float64 {
	if d == 0 {
		return nil
	}
	x := float64(n) / float64(d)
	return &x
}

// metrics computes the metrics of docs/metrics.md from the counts.
func (c counts) metrics(rules []Rule) Metrics {
	m := Metrics{
		Requests:           c.requests,
		Untagged:           c.untagged,
		Inferred:           c.inferred,
		FirstAttempts:      c.first,
		Retries:            c.retries,
		Amplification:      ratio(c.tagged, c.first),
		RetryRate:          ratio(c.second, c.first),
		RetrySuccessRate:   ratio(c.retriesOK, c.decided()),
		ExtraLoad:          ratio(c.retries, c.tagged),
		ActualSuccess:      ratio(c.taggedOK, c.tagged),
		Recovered:          c.recovered,
		Exhausted:          c.exhausted,
		EffectiveSuccess:   c.effective(),
		Status5xx:          c.s5xx,
		Status429:          c.s429,
		Status499:          c.s499,
		Abandoned:          c.abandoned,
		Cancelled:          c.cancelled,
		ProxyAmplification: ratio(c.tries, c.proxied),
	}
	if m.Amplification != nil && m.ProxyAmplification != nil {
		load := *m.Amplification * *m.ProxyAmplification
		m.UpstreamLoad = &load
	}
	if len(plainNames) > 0 {
		m.Counts = map[string]int64{}
		for i, name := range plainNames {
			m.Counts[name] = c.plain[i]
		}
	}
	m.Verdict = Verdict(m, rules)
	return m
}

// decided is the retries that got an answer of their own: all but those the client
// cancelled because another attempt won (a hedge that lost is no failed retry).
func (c counts) decided() int64 { return c.retries - c.cancelled.Retry }

// effective is the 2xx share of final attempts: single-attempt strong requests (their
// first attempt is their final one) plus the requests with retries.
func (c counts) effective() *float64 {
	n := c.strongFirsts - c.multiFirsts + c.logical
	if n <= 0 {
		return nil
	}
	x := float64(c.strongFirstsOK-c.multiFirstsOK+c.finalOK) / float64(n)
	return &x
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
