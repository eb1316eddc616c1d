package query

// counts are the raw figures behind a group's Metrics (metrics.sql and logical.sql).
// They add up: the counts of a window are the sums of its minutes'.
type counts struct {
	requests, untagged, inferred int64
	tagged, first, retries       int64
	second                       int64 // attempts numbered 1: the first attempts retried
	retriesOK, taggedOK          int64 // answered 2xx
	s5xx, s429, s499             Split
	proxied, tries               int64 // lines that record the proxy's tries, and those tries
	strongFirsts, strongFirstsOK int64 // strong-keyed first attempts over all rows
	recovered, exhausted         int64
	logical, finalOK             int64 // requests in _multi, and those ending 2xx
	multiFirsts, multiFirstsOK   int64 // strong-keyed first attempts of requests in _multi
}

func (c *counts) add(d counts) {
	c.requests += d.requests
	c.untagged += d.untagged
	c.inferred += d.inferred
	c.tagged += d.tagged
	c.first += d.first
	c.retries += d.retries
	c.second += d.second
	c.retriesOK += d.retriesOK
	c.taggedOK += d.taggedOK
	c.s5xx.First += d.s5xx.First
	c.s5xx.Retry += d.s5xx.Retry
	c.s429.First += d.s429.First
	c.s429.Retry += d.s429.Retry
	c.s499.First += d.s499.First
	c.s499.Retry += d.s499.Retry
	c.proxied += d.proxied
	c.tries += d.tries
	c.strongFirsts += d.strongFirsts
	c.strongFirstsOK += d.strongFirstsOK
	c.recovered += d.recovered
	c.exhausted += d.exhausted
	c.logical += d.logical
	c.finalOK += d.finalOK
	c.multiFirsts += d.multiFirsts
	c.multiFirstsOK += d.multiFirstsOK
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
		RetrySuccessRate:   ratio(c.retriesOK, c.retries),
		ExtraLoad:          ratio(c.retries, c.tagged),
		ActualSuccess:      ratio(c.taggedOK, c.tagged),
		Recovered:          c.recovered,
		Exhausted:          c.exhausted,
		EffectiveSuccess:   c.effective(),
		Status5xx:          c.s5xx,
		Status429:          c.s429,
		Status499:          c.s499,
		ProxyAmplification: ratio(c.tries, c.proxied),
	}
	m.Verdict = Verdict(m, rules)
	return m
}

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
