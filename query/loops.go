package query

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrylens/retrylens/judge"
)

// Loops429 sums up 429 feedback loops (docs/metrics.md).
type Loops429 struct {
	Loops            int64 // logical requests with two or more consecutive 429s
	MaxLength        int64 // longest run of consecutive 429s in a loop
	PrematureRetries int64 // retries started before the previous answer's Retry-After had passed
	BlindRetries     int64 // retries after a 429 that carried no Retry-After
	// UnparsableRetryAfter is retries after an answer whose Retry-After was neither seconds
	// nor an HTTP-date: they cannot be called premature or not.
	UnparsableRetryAfter int64
	Retry429Share        *float64
	Worst                []LoopOffender // the longest loops, longest first
}

// LoopOffender is one 429 loop: the logical request (its key as logged), its route, when
// the loop started and its length.
type LoopOffender struct {
	Request string
	Route   string
	Start   time.Time
	Length  int64
}

// Loops returns the 429 loop figures of the Set.
func (s *Set) Loops(ctx context.Context) (Loops429, error) {
	return answered(ctx, s, "Loops", func() (Loops429, error) { return s.loops(ctx) })
}

func (s *Set) loops(ctx context.Context) (Loops429, error) {
	var l Loops429
	var share sql.NullFloat64
	var worst []any
	err := s.merged(ctx, "loops", []any{worstLoops}, func(rows *sql.Rows) error {
		return rows.Scan(&l.Loops, &l.MaxLength, &l.PrematureRetries, &l.BlindRetries, &l.UnparsableRetryAfter, &share, &worst)
	}, need{"loops", []any{worstLoops}})
	if err != nil {
		return l, err
	}
	l.Retry429Share = ptr(share)
	for _, w := range worst {
		m, _ := w.(map[string]any)
		var o LoopOffender
		var ok [4]bool
		o.Request, ok[0] = m["request"].(string)
		o.Route, ok[1] = m["route"].(string)
		o.Start, ok[2] = m["start"].(time.Time)
		o.Length, ok[3] = m["length"].(int64)
		if ok != [4]bool{true, true, true, true} {
			return l, fmt.Errorf("loops.sql: a loop read as %v", w)
		}
		o.Start = o.Start.UTC()
		l.Worst = append(l.Worst, o)
	}
	return l, nil
}

// worstLoops is how many of the longest loops Loops names.
const worstLoops = 3

// FindingKinds are the kinds of Finding, as findings.sql names them.
var FindingKinds = []string{"duplicate_write_risk", "retried_idempotent_write", "possible_duplicate_write", "false_success",
	"non_retryable_retry", "over_cap", "synchronised", "reused_key", "attempt_number_mismatch"}

// AddsUp reports whether the counts of a finding kind over adjacent ranges add up to its
// count over their union. synchronised does not: it tests each range's own distribution of
// gaps (docs/metrics.md, "Ranges"), so watch, which adds ranges, does not serve it.
func AddsUp(kind string) bool { return kind != "synchronised" }

// Finding is one kind of thing a good client never does (docs/metrics.md).
type Finding struct {
	Kind     string   // one of FindingKinds
	Count    int64    // logical requests affected
	Attempts int64    // retry attempts involved
	Examples []string // up to three logical requests, by key as logged, else method, URI and time
}

// DefaultMaxAttempts is the policy cap docs/metrics.md assumes: three attempts in all.
const DefaultMaxAttempts = 3

// Findings returns the policy findings of the Set; maxAttempts is the cap on attempts per
// logical request (attempt numbers from maxAttempts on are over it).
func (s *Set) Findings(ctx context.Context, maxAttempts int) ([]Finding, error) {
	all, err := s.allFindings(ctx, maxAttempts)
	return slices.DeleteFunc(slices.Clone(all), func(f Finding) bool { return strings.HasPrefix(f.Kind, unjudgedPrefix) }), err
}

// allFindings are the findings and, their kinds marked unjudged:, those the log lacks a
// field to judge (findings.sql), as one answer.
func (s *Set) allFindings(ctx context.Context, maxAttempts int) ([]Finding, error) {
	return answered(ctx, s, fmt.Sprintf("Findings %d", maxAttempts), func() ([]Finding, error) { return s.findings(ctx, maxAttempts) })
}

// NotJudged is a finding the log lacks a field to judge on some requests (docs/metrics.md,
// "What the log cannot tell"): they are in none of its counts, and the field that would
// tell is named.
type NotJudged struct {
	Kind  string // the finding (FindingKinds), or budget_denied (a fate)
	Count int64
	Unit  string // what Count counts: "requests", or "attempts"
	Log   string // what to log (or do) so that it is judged
	Why   string // what the log lacks, for a person
}

// notJudgedWhy says, per finding, what the log lacks and what to log; the fields are the
// catalogue's (sdk.Families).
func notJudgedWhy(kind string) (log, why string) {
	switch kind {
	case "non_retryable_retry":
		return aws.ErrorHeader, "an AWS SDK retried a 4xx whose error code the log lacks: it retries one only for a throttling or transient code (a throttle, most likely)"
	case "budget_denied":
		return aws.ErrorHeader, "answered a 4xx below their AWS SDK's cap, the error code not in the log: a request that ended on one is counted as failed without a retry, though its SDK may have been denied one (the code decides, and for a 429 without one the SDK and its version)"
	case "reused_key", "attempt_number_mismatch":
		return "each log once (ingest --dedupe)", "rows repeat rows of another load: a key seen on two requests may be one request logged twice"
	}
	return aws.Operation, "an AWS SDK's POST names its operation in " + aws.Operation + " only (DynamoDB's reads are POSTs): whether it wrote, the log cannot tell"
}

// NotJudged returns the findings the log lacks a field to judge, with budget_denied's
// attempts from m (the range's metrics).
func (s *Set) NotJudged(ctx context.Context, maxAttempts int, m judge.Metrics) ([]NotJudged, error) {
	all, err := s.allFindings(ctx, maxAttempts)
	var out []NotJudged
	for _, f := range all {
		if kind, ok := strings.CutPrefix(f.Kind, unjudgedPrefix); ok {
			out = append(out, newNotJudged(kind, f.Count, "requests"))
		}
	}
	if n := m.Counts.Get("uncoded"); n > 0 {
		out = append(out, newNotJudged("budget_denied", n, "attempts"))
	}
	return out, err
}

func newNotJudged(kind string, n int64, unit string) NotJudged {
	log, why := notJudgedWhy(kind)
	return NotJudged{Kind: kind, Count: n, Unit: unit, Log: log, Why: why}
}

// Doubled moves the findings a doubled load can make up (a key seen on two requests, or
// numbers that repeat, where the same traffic was loaded twice: backend.Health.Repeats)
// from fs to the findings not judged.
func Doubled(fs []Finding, nj []NotJudged) ([]Finding, []NotJudged) {
	fs = slices.DeleteFunc(fs, func(f Finding) bool {
		if f.Kind != "reused_key" && f.Kind != "attempt_number_mismatch" {
			return false
		}
		nj = append(nj, newNotJudged(f.Kind, f.Count, "requests"))
		return true
	})
	return fs, nj
}

func (s *Set) findings(ctx context.Context, maxAttempts int) ([]Finding, error) {
	var fs []Finding
	err := s.merged(ctx, "findings", nil, func(rows *sql.Rows) error {
		var f Finding
		var ex []any
		if err := rows.Scan(&f.Kind, &f.Count, &f.Attempts, &ex); err != nil {
			return err
		}
		for _, e := range ex {
			if s, ok := e.(string); ok {
				f.Examples = append(f.Examples, s)
			}
		}
		fs = append(fs, f)
		return nil
	}, need{"findings", []any{maxAttempts}}, need{name: "gaps"})
	return fs, err
}

func sortGroups(gs []groupCounts) {
	slices.SortFunc(gs, func(a, b groupCounts) int {
		// The extra load retries caused first, then plain traffic; keys are distinct.
		return cmp.Or(cmp.Compare(b.c.retries, a.c.retries), cmp.Compare(b.c.requests, a.c.requests), strings.Compare(a.key, b.key))
	})
}

// Backoff is the gap profile of one attempt number (docs/metrics.md; issue's
// backoff profile): gaps from the previous attempt's end to this one's start.
type Backoff struct {
	Attempt       int
	Count         int64
	P10, P50, P90 float64 // ms
	NearMedian    int64   // gaps within 3 ms of the median: lockstep when most are
	// Within counts gaps inside the declared policy's window, when a base was given.
	Within      *int64
	Min, Max    float64 // that window, ms
	BeyondRetry bool    // the attempt number is past the declared policy's retries
}

// Backoff returns the gap profile per attempt number. base and maxRetries describe the
// declared policy (base·2^(n−1) plus up to base of jitter before retry n); zero for none.
func (s *Set) Backoff(ctx context.Context, base time.Duration, maxRetries int) ([]Backoff, error) {
	return answered(ctx, s, fmt.Sprintf("Backoff %d %d", base, maxRetries), func() ([]Backoff, error) { return s.backoff(ctx, base, maxRetries) })
}

func (s *Set) backoff(ctx context.Context, base time.Duration, maxRetries int) ([]Backoff, error) {
	baseMS := float64(base) / float64(time.Millisecond)
	var out []Backoff
	err := s.merged(ctx, "backoff", []any{baseMS}, func(rows *sql.Rows) error {
		var b Backoff
		var within int64
		if err := rows.Scan(&b.Attempt, &b.Count, &b.P10, &b.P50, &b.P90, &b.NearMedian, &within); err != nil {
			return err
		}
		if base > 0 {
			b.Within = &within
			b.Min = baseMS * float64(int64(1)<<(b.Attempt-1))
			b.Max = b.Min + baseMS
		}
		b.BeyondRetry = maxRetries > 0 && b.Attempt > maxRetries
		out = append(out, b)
		return nil
	}, need{name: "gaps"})
	return out, err
}

// GapEdges are the gap histogram's bucket edges in ms: bucket 0 holds gaps under 10 ms
// (and overlaps, below 0), bucket i gaps in [GapEdges[i-1], GapEdges[i]), the last one
// gaps of 30 s and more.
var GapEdges = []float64{10, 50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000}

// GapHistogram counts, for one attempt number, the gaps before it per bucket of GapEdges.
type GapHistogram struct {
	Attempt int
	Counts  []int64 // len(GapEdges)+1
	SumMs   float64 // of every gap counted
}

// Gaps returns the gap histogram per attempt number, lowest first.
func (s *Set) Gaps(ctx context.Context) ([]GapHistogram, error) {
	return answered(ctx, s, "Gaps", func() ([]GapHistogram, error) { return s.gaps(ctx) })
}

func (s *Set) gaps(ctx context.Context) ([]GapHistogram, error) {
	var out []GapHistogram
	err := s.merged(ctx, "gaps", []any{GapEdges}, func(rows *sql.Rows) error {
		var attempt, bucket int
		var n int64
		var sum float64
		if err := rows.Scan(&attempt, &bucket, &n, &sum); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].Attempt != attempt {
			out = append(out, GapHistogram{Attempt: attempt, Counts: make([]int64, len(GapEdges)+1)})
		}
		out[len(out)-1].Counts[bucket] += n
		out[len(out)-1].SumMs += sum
		return nil
	}, need{name: "gaps"})
	return out, err
}

// AttemptCount is how many logical requests made a number of attempts.
type AttemptCount struct {
	Attempts int
	Requests int64
}

// AttemptCounts returns the logical requests per number of attempts, fewest first.
func (s *Set) AttemptCounts(ctx context.Context) ([]AttemptCount, error) {
	return answered(ctx, s, "AttemptCounts", func() ([]AttemptCount, error) { return s.attemptCounts(ctx) })
}

func (s *Set) attemptCounts(ctx context.Context) ([]AttemptCount, error) {
	var out []AttemptCount
	err := s.merged(ctx, "attempt_counts", nil, func(rows *sql.Rows) error {
		var c AttemptCount
		if err := rows.Scan(&c.Attempts, &c.Requests); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	}, need{name: "attempt_counts"})
	return out, err
}

// Hedging sums up the attempts sent while another attempt of the same request was in
// flight (docs/metrics.md, "Overlapping attempts").
type Hedging struct {
	Requests  int64    // logical requests with a hedge
	Hedges    int64    // attempts started before an earlier attempt of their request ended
	Wins      int64    // hedges that were their request's first 2xx
	Cancelled int64    // attempts abandoned because another attempt of their request won
	P10, P50  *float64 // the hedge delay in ms: from the previous attempt's start to the hedge's
	P90       *float64
}

// Hedging returns the hedging figures of the Set's logical requests.
func (s *Set) Hedging(ctx context.Context) (Hedging, error) {
	return answered(ctx, s, "Hedging", func() (Hedging, error) { return s.hedging(ctx) })
}

func (s *Set) hedging(ctx context.Context) (Hedging, error) {
	var h Hedging
	var p10, p50, p90 sql.NullFloat64
	err := s.merged(ctx, "hedging", nil, func(rows *sql.Rows) error {
		return rows.Scan(&h.Requests, &h.Hedges, &h.Wins, &h.Cancelled, &p10, &p50, &p90)
	}, need{name: "hedging"})
	if err != nil {
		return h, err
	}
	h.P10, h.P50, h.P90 = ptr(p10), ptr(p50), ptr(p90)
	return h, nil
}

// Layers is the join of a traced client's attempts with a gateway's lines of the same
// attempts (docs/metrics.md, "Layers"); zero unless the database holds both.
type Layers struct {
	Spans          int64 // attempts read from traces
	Matched        int64 // of them, those a gateway's line logged the span of
	UnmatchedLines int64 // gateway lines that logged a span no trace holds
}

// Layers returns the Set's join of traces and gateway lines.
func (s *Set) Layers(ctx context.Context) (Layers, error) {
	var l Layers
	if layered, err := Layered(ctx, s.conn); err != nil || !layered {
		return l, err
	}
	if err := s.ready(ctx); err != nil {
		return l, err
	}
	q, err := s.statement("layers.sql", "", "time", minuteGrain)
	if err != nil {
		return l, err
	}
	if err := s.conn.QueryRowContext(ctx, q).Scan(&l.Spans, &l.Matched, &l.UnmatchedLines); err != nil {
		return l, fmt.Errorf("layers.sql: %w", err)
	}
	return l, nil
}
