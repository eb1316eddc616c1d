// Package judge holds what retrylens concludes from counts: the figures (ratios over
// named counts), the alert rules and their evidence bounds, the alerts, the one verdict of
// every slice, incidents and the retry-sustained overload. Pure functions over windows of
// counts: no SQL; package query computes the counts.
package judge

import "time"

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
	// Counts are the counts every figure is computed from (CountNames), for the
	// surfaces that serve counts rather than figures (watch) or need one as it is.
	Counts Counts
}

// Counts are a slice's counts in countColumns' order; Get reads one by its column.
type Counts [numCounts]int64

// numCounts is len(countColumns) (checked when the package starts).
const numCounts = 34

// CountNames are the columns of Counts, in order: those of the count tables (query's
// metrics.sql and logical.sql; query checks that its catalogue follows this order).
var CountNames = []string{
	"requests", "untagged", "inferred", "tagged", "first_attempts", "retries", "second_attempts", "retries_ok", "tagged_ok",
	"status_5xx_first", "status_5xx_retry", "status_429_first", "status_429_retry", "status_499_first", "status_499_retry",
	"abandoned_first", "abandoned_retry", "cancelled_first", "cancelled_retry", "proxied", "upstream_tries",
	"strong_firsts", "strong_firsts_ok", "recovered", "exhausted", "logical", "final_ok", "multi_firsts", "multi_firsts_ok",
	"gateway_recovered", "strong_firsts_denied", "denied", "multi_firsts_denied", "uncoded",
}

// countIndex is each column's index in Counts.
var countIndex = func() map[string]int {
	if len(CountNames) != numCounts {
		panic("judge: numCounts is not len(CountNames)")
	}
	m := map[string]int{}
	for i, n := range CountNames {
		m[n] = i
	}
	return m
}()

// Get returns the count of column col (CountNames); it panics on a column the catalogue
// lacks, a programming error.
func (c Counts) Get(col string) int64 {
	i, ok := countIndex[col]
	if !ok {
		panic("judge: no count " + col)
	}
	return c[i]
}

// Split is a count split between first attempts and retries.
type Split struct {
	First, Retry int64
}

// Total is First + Retry.
func (s Split) Total() int64 { return s.First + s.Retry }

// Window is the metrics of one time bucket.
type Window struct {
	Start time.Time
	Metrics
}

// Fates are a slice's logical requests by what became of them at each retry layer
// (docs/metrics.md, "Layers"); they add up to the logical requests effective_success
// counts: answered 2xx at the client's first attempt, the gateway trying the upstream
// once (FirstTry) or more (Gateway); answered 2xx at a retry of the client's (Client, the
// recovered); never answered 2xx, the last attempt a failure the client retries below
// the cap it stated (BudgetDenied: its retry budget or quota, or its deadline, said no),
// else after retrying (Exhausted) or without retrying (NotRetried).
type Fates struct {
	Logical, FirstTry, Gateway, Client, Exhausted, BudgetDenied, NotRetried int64
}

// Fates returns the slice's fates, from its counts.
func (m Metrics) Fates() Fates {
	c := m.Counts
	logical := c.Get("strong_firsts") - c.Get("multi_firsts") + c.Get("logical")
	ok := c.Get("strong_firsts_ok") - c.Get("multi_firsts_ok") + c.Get("final_ok")
	f := Fates{Logical: logical, Client: c.Get("recovered")}
	f.Gateway = min(c.Get("gateway_recovered"), max(ok-f.Client, 0))
	f.FirstTry = max(ok-f.Client-f.Gateway, 0)
	// Denied after retrying (of the exhausted: retried, never 2xx), or at the first
	// attempt (strong-keyed requests of one attempt: the SDKs that state a cap send a key).
	failed := max(logical-ok, 0)
	exhausted := min(c.Get("exhausted"), failed)
	deniedRetried := min(c.Get("denied"), exhausted)
	deniedFirst := min(max(c.Get("strong_firsts_denied")-c.Get("multi_firsts_denied"), 0), failed-exhausted)
	f.BudgetDenied = deniedRetried + deniedFirst
	f.Exhausted = exhausted - deniedRetried
	f.NotRetried = failed - exhausted - deniedFirst
	return f
}

// Each calls yield with each fate's name, as the JSON report and watch's
// retrylens_request_fates_total name it, and its count, in order.
func (f Fates) Each(yield func(name string, n int64)) {
	yield("first_try", f.FirstTry)
	yield("recovered_by_gateway", f.Gateway)
	yield("recovered_by_client", f.Client)
	yield("exhausted", f.Exhausted)
	yield("budget_denied", f.BudgetDenied)
	yield("failed_without_retry", f.NotRetried)
}
