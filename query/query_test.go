package query_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/query"
)

func fp(x float64) *float64 { return &x }

// memDB is a fresh in-memory database with retrylens's schema, and a table lines where
// tests write rows as they were logged, keys as text: openSet stores them in requests as
// ingest does (keys as ingest.KeyHash, key_text as ingest.KeyText).
func memDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := ingest.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE lines AS SELECT * EXCLUDE (request_id_hash, idempotency_key_hash, invocation_id_hash, key_text),
		NULL::VARCHAR AS request_id, NULL::VARCHAR AS idempotency_key, NULL::VARCHAR AS invocation_id FROM requests LIMIT 0`); err != nil {
		t.Fatal(err)
	}
	return db
}

// storeLines moves the rows of lines into requests.
func storeLines(t *testing.T, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO requests BY NAME
		SELECT * EXCLUDE (request_id, idempotency_key, invocation_id),
			retrylens_key(request_id) AS request_id_hash, retrylens_key(idempotency_key) AS idempotency_key_hash,
			retrylens_key(invocation_id) AS invocation_id_hash,
			-- the key as text on every line but first attempts (docs/metrics.md), written here
			-- independently of ingest.KeyText
			CASE WHEN attempt IS DISTINCT FROM 0 THEN coalesce(idempotency_key, invocation_id, request_id) END AS key_text
		FROM lines;
		DELETE FROM lines`); err != nil {
		t.Fatal(err)
	}
}

// openSet prepares the rows o selects, closed when the test ends.
func openSet(t *testing.T, db *sql.DB, o query.Options) *query.Set {
	t.Helper()
	storeLines(t, db)
	set, err := query.Open(context.Background(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

// summaryAndLinking is the set's summary and linking counts.
func summaryAndLinking(t *testing.T, set *query.Set) (judge.Metrics, query.Linking) {
	t.Helper()
	m, err := set.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l, err := set.Linking(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// Rows inserted by hand; the expected metrics are counted from this list by hand.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	rows := []struct {
		ts      string
		attempt any
		status  any
		id      any
	}{
		{"2026-11-29 10:00:01", 0, 502, "a"}, // window 10:00; a recovers on its third attempt
		{"2026-11-29 10:00:02", 1, 502, "a"},
		{"2026-11-29 10:00:04", 2, 200, "a"},
		{"2026-11-29 10:00:30", 0, 429, "b"}, // b recovers on its second
		{"2026-11-29 10:00:31", 1, 200, "b"},
		{"2026-11-29 10:00:40", nil, 200, nil}, // untagged
		{"2026-11-29 10:01:00", 3, 499, "c"},   // window 10:01: c's earlier attempts are outside: exhausted
		{"2026-11-29 10:01:10", nil, nil, nil}, // untagged, no status
		{"2026-11-29 10:02:00", 0, 200, "d"},   // outside --until
	}
	for i, r := range rows {
		if _, err := db.Exec("INSERT INTO lines (file_id, line, ts, attempt, status, request_id) VALUES (1, ?, ?::TIMESTAMP, ?, ?, ?)", i+1, r.ts, r.attempt, r.status, r.id); err != nil {
			t.Fatal(err)
		}
	}
	set := openSet(t, db, query.Options{Since: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 10, 2, 0, 0, time.UTC)})
	got, err := set.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := judge.Metrics{
		Requests: 8, Untagged: 2, FirstAttempts: 2, Retries: 4,
		Amplification: fp(6.0 / 2), RetryRate: fp(2.0 / 2), RetrySuccessRate: fp(2.0 / 4),
		ExtraLoad: fp(4.0 / 6), ActualSuccess: fp(2.0 / 6),
		Recovered: 2, Exhausted: 1, EffectiveSuccess: fp(2.0 / 3), // finals: a 200, b 200, c 499
		Status5xx: judge.Split{First: 1, Retry: 1}, Status429: judge.Split{First: 1}, Status499: judge.Split{Retry: 1}, Abandoned: judge.Split{Retry: 1},
		Verdict: judge.Insufficient, // 2 first attempts: fewer than the rules look at
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(judge.Metrics{}, "Counts")); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	// the counts behind them, by name: a's and b's attempts numbered 1, the retries and
	// tagged lines answered 200 (a's third, b's second), 6 tagged lines
	for col, n := range map[string]int64{"second_attempts": 2, "retries_ok": 2, "tagged_ok": 2, "tagged": 6, "cancelled_retry": 0} {
		if got.Counts.Get(col) != n {
			t.Errorf("count %s: %d, want %d", col, got.Counts.Get(col), n)
		}
	}
	ws, err := set.Windows(ctx, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || !ws[1].Start.Equal(time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("windows: %+v", ws)
	}
	// Window 10:01 has a retry and no first attempt: the ratios over first attempts are
	// undefined, not infinite or zero.
	w := ws[1].Metrics
	if w.Requests != 2 || w.Retries != 1 || w.Amplification != nil || w.RetryRate != nil || *w.RetrySuccessRate != 0 {
		t.Errorf("window 10:01: %+v", w)
	}
	from, to, err := set.Span(ctx)
	if err != nil || from.Format(time.RFC3339) != "2026-11-29T10:00:01Z" || to.Format(time.RFC3339) != "2026-11-29T10:01:10Z" {
		t.Errorf("Span = %v, %v, %v", from, to, err)
	}
}

// Hand-made logical requests for the 429 loop and policy-finding figures; the expected
// counts are worked out in the comments.
func TestLoopsAndFindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	rows := []struct {
		ts         string
		rt         float64
		id, method string
		attempt    int
		status     int
		retryAfter any
		idem       any
	}{
		// p: a POST abandoned (499), retried without a key, succeeded: false success and
		// duplicate-write risk, one logical request and one retry attempt each.
		{"2026-11-29 10:00:00", 0.1, "p", "POST", 0, 499, nil, nil},
		{"2026-11-29 10:00:01", 0.1, "p", "POST", 1, 201, nil, nil},
		// k: the same with an idempotency key: neither finding.
		{"2026-11-29 10:00:00", 0.1, "k", "POST", 0, 499, nil, "key-1"},
		{"2026-11-29 10:00:01", 0.1, "k", "POST", 1, 201, nil, "key-1"},
		// q: 429 (Retry-After 2) → retry started 0.5 s later: premature; 429 without
		// Retry-After → 429: blind; → 200 after a 429 without Retry-After: blind again.
		// Three consecutive 429s: one loop of length 3. Attempt 3 is over the cap of 3.
		{"2026-11-29 10:00:00", 0.01, "q", "GET", 0, 429, "2", nil},
		{"2026-11-29 10:00:00.6", 0.1, "q", "GET", 1, 429, nil, nil},
		{"2026-11-29 10:00:01", 0.1, "q", "GET", 2, 429, nil, nil},
		{"2026-11-29 10:00:05", 0.1, "q", "GET", 3, 200, nil, nil},
		// r: a 404 retried: non-retryable retry.
		{"2026-11-29 10:00:00", 0.1, "r", "GET", 0, 404, nil, nil},
		{"2026-11-29 10:00:01", 0.1, "r", "GET", 1, 404, nil, nil},
		// s: 503 with an HTTP-date Retry-After 10 s ahead, retried 20 s later: not premature.
		{"2026-11-29 10:10:00", 0.1, "s", "GET", 0, 503, "Sun, 29 Nov 2026 10:10:10 GMT", nil},
		{"2026-11-29 10:10:20", 0.1, "s", "GET", 1, 200, nil, nil},
		// u: the same HTTP-date, retried 5 s later: premature.
		{"2026-11-29 10:10:00", 0.1, "u", "GET", 0, 503, "Sun, 29 Nov 2026 10:10:10 GMT", nil},
		{"2026-11-29 10:10:05", 0.1, "u", "GET", 1, 200, nil, nil},
		// w: a POST abandoned four times (every attempt may have written, none answered):
		// possible duplicate write and duplicate-write risk on its 3 retries; attempt 3 is
		// over the cap. x: 502, then an abandoned retry, then 201: the abandoned attempt was
		// a retry (possible duplicate on attempt 2; no false success, the first got 502).
		{"2026-11-29 10:20:00", 0.1, "w", "POST", 0, 499, nil, nil},
		{"2026-11-29 10:20:01", 0.1, "w", "POST", 1, 499, nil, nil},
		{"2026-11-29 10:20:02", 0.1, "w", "POST", 2, 499, nil, nil},
		{"2026-11-29 10:20:03", 0.1, "w", "POST", 3, 499, nil, nil},
		{"2026-11-29 10:30:00", 0.1, "x", "POST", 0, 502, nil, nil},
		{"2026-11-29 10:30:01", 0.1, "x", "POST", 1, 499, nil, nil},
		{"2026-11-29 10:30:02", 0.1, "x", "POST", 2, 201, nil, nil},
		// y: a PUT retried without a key: retried idempotent write. z: a DELETE with one.
		{"2026-11-29 10:40:00", 0.1, "y", "PUT", 0, 500, nil, nil},
		{"2026-11-29 10:40:01", 0.1, "y", "PUT", 1, 200, nil, nil},
		{"2026-11-29 10:40:00", 0.1, "z", "DELETE", 0, 500, nil, "key-z"},
		{"2026-11-29 10:40:01", 0.1, "z", "DELETE", 1, 200, nil, "key-z"},
	}
	for i, r := range rows {
		_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, request_id, method, attempt, status, retry_after, idempotency_key)
			VALUES (1, ?, ?::TIMESTAMP, ?, ?, ?, ?, ?, ?, ?)`, i+1, r.ts, r.rt, r.id, r.method, r.attempt, r.status, r.retryAfter, r.idem)
		if err != nil {
			t.Fatal(err)
		}
	}
	set := openSet(t, db, query.Options{})
	loops, err := set.Loops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 429 answers: q0, q1, q2; to retries: q1, q2.
	// q's loop: three 429s from 10:00:00 (no route was given to these rows).
	wantLoops := query.Loops429{Loops: 1, MaxLength: 3, PrematureRetries: 2, BlindRetries: 2, Retry429Share: fp(2.0 / 3),
		Worst: []query.LoopOffender{{Request: "q", Start: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Length: 3}}}
	if diff := cmp.Diff(wantLoops, loops); diff != "" {
		t.Errorf("Loops (-want +got):\n%s", diff)
	}
	findings, err := set.Findings(ctx, query.DefaultMaxAttempts)
	if err != nil {
		t.Fatal(err)
	}
	want := []query.Finding{
		// Examples name the request, its method and route (none given here: "-") and the
		// time of the retry involved.
		{Kind: "duplicate_write_risk", Count: 3, Attempts: 6, Examples: []string{"p (POST - at 2026-11-29T10:00:01Z)",
			"w (POST - at 2026-11-29T10:20:01Z)", "x (POST - at 2026-11-29T10:30:01Z)"}},
		{Kind: "false_success", Count: 1, Attempts: 1, Examples: []string{"p (POST - at 2026-11-29T10:00:01Z)"}},
		{Kind: "non_retryable_retry", Count: 1, Attempts: 1, Examples: []string{"r (GET - at 2026-11-29T10:00:01Z)"}},
		{Kind: "over_cap", Count: 2, Attempts: 2, Examples: []string{"q (GET - at 2026-11-29T10:00:05Z)", "w (POST - at 2026-11-29T10:20:03Z)"}},
		{Kind: "possible_duplicate_write", Count: 3, Attempts: 5, Examples: []string{"p (POST - at 2026-11-29T10:00:01Z)",
			"w (POST - at 2026-11-29T10:20:01Z)", "x (POST - at 2026-11-29T10:30:02Z)"}},
		{Kind: "retried_idempotent_write", Count: 1, Attempts: 1, Examples: []string{"y (PUT - at 2026-11-29T10:40:01Z)"}},
	}
	if diff := cmp.Diff(want, findings); diff != "" {
		t.Errorf("Findings (-want +got):\n%s", diff)
	}
}

// insert adds hand-made rows: ts, client, method, uri, attempt (nil: untagged), status.
func insert(t *testing.T, db *sql.DB, rows [][]any) {
	t.Helper()
	for i, r := range rows {
		_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, remote_addr, user_agent, method, uri, attempt, status, request_id)
			VALUES (1, ?, ?::TIMESTAMP, ?, 'ua', ?, ?, ?, ?, ?)`, append([]any{i + 1}, r...)...)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Rows without a strong key link by client, user agent, method and URI: attempt numbers
// increase and attempts are at most --max-gap apart.
func TestHeuristicLinking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	insert(t, db, [][]any{
		{"2026-11-29 10:00:00", "10.0.0.1", "GET", "/a", 0, 502, nil}, // A1: 502 then 200: recovered
		{"2026-11-29 10:00:01", "10.0.0.1", "GET", "/a", 1, 200, nil},
		{"2026-11-29 10:05:00", "10.0.0.1", "GET", "/a", 0, 200, nil}, // A2: attempt 0 starts anew
		{"2026-11-29 10:00:00", "10.0.0.2", "GET", "/a", 0, 502, nil}, // B1: not retried within 60 s
		{"2026-11-29 10:03:00", "10.0.0.2", "GET", "/a", 1, 200, nil}, // B2: a retry 3 min later stands alone
		{"2026-11-29 10:00:00", "10.0.0.3", "GET", "/b", 0, 503, "r"}, // R: linked by its request id
		{"2026-11-29 10:00:09", "10.0.0.9", "GET", "/b", 1, 503, "r"}, //    even from another address
	})
	set := openSet(t, db, query.Options{MaxGap: time.Minute})
	m, err := set.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Logical requests: A1, A2, B1, B2, R. Recovered: A1. Exhausted: R (retried, no 2xx);
	// B2 retried-looking but got 200. Final statuses 2xx: A1, A2, B2 of 5.
	if m.Recovered != 1 || m.Exhausted != 1 || m.EffectiveSuccess == nil || *m.EffectiveSuccess != 3.0/5 {
		t.Errorf("recovered %d, exhausted %d, effective %v; want 1, 1, 0.6", m.Recovered, m.Exhausted, m.EffectiveSuccess)
	}
	l, err := set.Linking(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Retries: A1's, B2's and R's; the heuristic linked A1's and B2's; B2 is an orphan (no
	// earlier attempt to link to).
	if diff := cmp.Diff(query.Linking{RequestID: 1, Heuristic: 4, Retries: 3, HeuristicRetries: 2, Orphans: 1}, l); diff != "" {
		t.Errorf("Linking (-want +got):\n%s", diff)
	}
}

// --infer-attempts numbers the repeats of an untagged request after retryable failures.
func TestInferAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	insert(t, db, [][]any{
		{"2026-11-29 10:00:00", "10.0.0.1", "GET", "/x", nil, 503, nil}, // C: 0
		{"2026-11-29 10:00:02", "10.0.0.1", "GET", "/x", nil, 503, nil}, //    1
		{"2026-11-29 10:00:05", "10.0.0.1", "GET", "/x", nil, 200, nil}, //    2: recovered
		{"2026-11-29 10:10:00", "10.0.0.1", "GET", "/x", nil, 200, nil}, //    0 again: 10 min later
		{"2026-11-29 10:00:00", "10.0.0.2", "GET", "/y", nil, 200, nil}, // D: 0
		{"2026-11-29 10:00:01", "10.0.0.2", "GET", "/y", nil, 200, nil}, //    0: the previous one succeeded
	})
	set := openSet(t, db, query.Options{InferAttempts: true})
	var got []int64
	err := set.EachAttempt(ctx, func(_, line int64, a sql.NullInt64, inferred bool) {
		if !inferred || !a.Valid {
			t.Errorf("line %d: attempt %v, inferred %v", line, a, inferred)
		}
		for int64(len(got)) < line {
			got = append(got, -1)
		}
		got[line-1] = a.Int64
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{0, 1, 2, 0, 0, 0}, got); diff != "" {
		t.Errorf("inferred attempts by line (-want +got):\n%s", diff)
	}
	m, err := set.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Inferred != 6 || m.Untagged != 0 || m.FirstAttempts != 4 || m.Retries != 2 || m.Recovered != 1 {
		t.Errorf("summary: %+v", m)
	}
}

// Proxy tries (nginx's upstream lists) make their own amplification, apart from attempts.
func TestProxyAmplification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	// "502, 200" is two tries; "200" one; a line without the column counts for neither.
	for i, tries := range []any{2, 1, nil} {
		if _, err := db.Exec("INSERT INTO lines (file_id, line, ts, attempt, status, upstream_tries) VALUES (1, ?, TIMESTAMP '2026-11-29 10:00:00', 0, 200, ?)", i+1, tries); err != nil {
			t.Fatal(err)
		}
	}
	set := openSet(t, db, query.Options{})
	m, err := set.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.ProxyAmplification == nil || *m.ProxyAmplification != 1.5 || *m.Amplification != 1 {
		t.Errorf("proxy amplification %v, client amplification %v; want 1.5 (3 tries / 2 lines) and 1", m.ProxyAmplification, *m.Amplification)
	}
}

// Retries in lockstep are "synchronised"; the backoff profile shows the gaps per attempt.
func TestBackoffAndSynchronised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	add := func(id string, attempt int, at time.Time, status int) {
		// request_time 0: each attempt starts when it ends, so gaps are exact.
		_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, request_id, method, attempt, status)
			VALUES (1, ?, ?, 0, ?, 'GET', ?, ?)`, at.UnixNano(), at, id, attempt, status)
		if err != nil {
			t.Fatal(err)
		}
	}
	for k := range 12 {
		base := t0.Add(time.Duration(k) * time.Second)
		// s-k: a retry exactly 20 ms after its first attempt.
		add(fmt.Sprintf("s-%d", k), 0, base, 502)
		add(fmt.Sprintf("s-%d", k), 1, base.Add(20*time.Millisecond), 200)
		// j-k: the same first retry, then a second one 20 + 3k ms later (jittered).
		jb := base.Add(500 * time.Millisecond)
		add(fmt.Sprintf("j-%d", k), 0, jb, 502)
		add(fmt.Sprintf("j-%d", k), 1, jb.Add(20*time.Millisecond), 502)
		add(fmt.Sprintf("j-%d", k), 2, jb.Add(20*time.Millisecond+time.Duration(20+3*k)*time.Millisecond), 200)
	}
	// One single-attempt request with a request id, one linked by the heuristic.
	add("single", 0, t0.Add(time.Minute), 200)
	if _, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, remote_addr, method, uri, attempt, status)
		VALUES (1, 0, ?, 0, '10.0.0.9', 'GET', '/x', 0, 200)`, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	set := openSet(t, db, query.Options{})
	// 12 s-k requests with 2 attempts, 12 j-k with 3, and the two singles.
	counts, err := set.AttemptCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]query.AttemptCount{{1, 2}, {2, 12}, {3, 12}}, counts); diff != "" {
		t.Errorf("AttemptCounts (-want +got):\n%s", diff)
	}
	// Gaps before attempt 1: 24 of 20 ms, in [10, 50), 480 ms in all. Before attempt 2:
	// 20 + 3k ms for k = 0..11: 20..47 ms (10) in [10, 50), 50 and 53 ms in [50, 100),
	// 12×20 + 3×66 = 438 ms in all.
	gaps, err := set.Gaps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := func(n int, b1, b2 int64, sum float64) query.GapHistogram {
		c := make([]int64, len(query.GapEdges)+1)
		c[1], c[2] = b1, b2
		return query.GapHistogram{Attempt: n, Counts: c, SumMs: sum}
	}
	if diff := cmp.Diff([]query.GapHistogram{h(1, 24, 0, 480), h(2, 10, 2, 438)}, gaps); diff != "" {
		t.Errorf("Gaps (-want +got):\n%s", diff)
	}
	profile, err := set.Backoff(ctx, 20*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 1: 24 gaps of 20 ms, all in the policy's [20, 40] ms. Attempt 2: 20..53 ms
	// in steps of 3: p10 23.3, median 36.5 (35 and 38 within 3 ms of it), p90 49.7; in
	// [40, 60] ms: 41, 44, 47, 50, 53.
	w1, w2 := int64(24), int64(5)
	want := []query.Backoff{
		{Attempt: 1, Count: 24, P10: 20, P50: 20, P90: 20, NearMedian: 24, Within: &w1, Min: 20, Max: 40},
		{Attempt: 2, Count: 12, P10: 23.3, P50: 36.5, P90: 49.7, NearMedian: 2, Within: &w2, Min: 40, Max: 60, BeyondRetry: true},
	}
	if diff := cmp.Diff(want, profile, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Backoff (-want +got):\n%s", diff)
	}
	findings, err := set.Findings(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []query.Finding
	for _, f := range findings {
		if f.Kind == "synchronised" {
			f.Examples = nil
			got = append(got, f)
		}
	}
	if diff := cmp.Diff([]query.Finding{{Kind: "synchronised", Count: 24, Attempts: 24}}, got); diff != "" {
		t.Errorf("synchronised (-want +got):\n%s", diff)
	}
}

// A client that only hedges, whose hedges the gateway read only after the first answer:
// 12 requests answered 200 whose second attempt (cancelled: 499) starts 2, 3 or 4 ms after
// the first ended, beyond the millisecond log's 1 ms slack. Those are no backoff to
// synchronise: no synchronised finding (docs/metrics.md).
func TestHedgesAreNotSynchronised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for k := range 12 {
		at := t0.Add(time.Duration(k) * time.Second)
		for attempt, ts := range []time.Time{at, at.Add(time.Duration(2+k%3) * time.Millisecond)} {
			if _, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, request_id, method, attempt, status)
				VALUES (1, ?, ?, 0, ?, 'GET', ?, ?)`, 2*k+attempt, ts, fmt.Sprintf("h-%d", k), attempt, 200+299*attempt); err != nil {
				t.Fatal(err)
			}
		}
	}
	findings, err := openSet(t, db, query.Options{}).Findings(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if f.Kind == "synchronised" {
			t.Errorf("hedges read after the first answer: %+v", f)
		}
	}
}

// Retry-After in each form HTTP allows, and --throttle-status. Each request: a 503 with
// Retry-After at 10:00:00 (ended there; request_time 0.1), its retry starting 5 s later.
// Seconds "10" and the three HTTP-date forms of 10:00:10 say wait 10 s: premature (4);
// "3" and the dates of 10:00:03: not (4); "soon": unparsable, counted apart (1). Then two
// requests answered 503 twice in a row without Retry-After, retried: with 429 alone as the
// throttling status nothing is a loop or blind; with 503 too, 2 loops and 4 blind
// retries (both retries of each).
func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	line := 0
	add := func(id string, attempt int, ts string, status int, retryAfter any) {
		line++
		_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, request_id, method, attempt, status, retry_after)
			VALUES (1, ?, ?::TIMESTAMP, 0.1, ?, 'GET', ?, ?, ?)`, line, ts, id, attempt, status, retryAfter)
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, ra := range []string{"10", "Sun, 29 Nov 2026 10:00:10 GMT", "Sunday, 29-Nov-26 10:00:10 GMT", "Sun Nov 29 10:00:10 2026",
		"3", "Sun, 29 Nov 2026 10:00:03 GMT", "Sunday, 29-Nov-26 10:00:03 GMT", "Sun Nov 29 10:00:03 2026", "soon"} {
		id := fmt.Sprintf("r%d", i)
		add(id, 0, "2026-11-29 10:00:00", 503, ra)
		add(id, 1, "2026-11-29 10:00:05.1", 200, nil) // started at 10:00:05
	}
	for _, id := range []string{"a", "b"} {
		add(id, 0, "2026-11-29 10:01:00", 503, nil)
		add(id, 1, "2026-11-29 10:01:01", 503, nil)
		add(id, 2, "2026-11-29 10:01:02", 200, nil)
	}
	for _, tc := range []struct {
		throttle                     []int
		loops, premature, blind, odd int64
	}{{nil, 0, 4, 0, 1}, {[]int{429, 503}, 2, 4, 4, 1}} {
		l, err := openSet(t, db, query.Options{Throttle: tc.throttle}).Loops(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Loops != tc.loops || l.PrematureRetries != tc.premature || l.BlindRetries != tc.blind || l.UnparsableRetryAfter != tc.odd {
			t.Errorf("throttle %v: loops %d, premature %d, blind %d, unparsable %d; want %d, %d, %d, %d", tc.throttle,
				l.Loops, l.PrematureRetries, l.BlindRetries, l.UnparsableRetryAfter, tc.loops, tc.premature, tc.blind, tc.odd)
		}
	}
}

// Two requests from one client to one URI at once, without keys (#15's first case): A's
// first attempt fails, B's succeeds in between, A's retry follows. The retry joins the
// open chain (A's, not answered 2xx), not the line just before it (B's 200): 2 logical
// requests, A recovered, both ending 2xx. A retry after only a 2xx answer joins it (a
// timeout race, after_2xx: TestHeuristicAfter2xx): C's.
func TestHeuristicOpenChain(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	insert(t, db, [][]any{
		{"2026-11-29 10:00:00", "10.0.0.1", "GET", "/a", 0, 502, nil},   // A0
		{"2026-11-29 10:00:00.1", "10.0.0.1", "GET", "/a", 0, 200, nil}, // B0
		{"2026-11-29 10:00:00.5", "10.0.0.1", "GET", "/a", 1, 200, nil}, // A1
		{"2026-11-29 10:01:00", "10.0.0.2", "GET", "/b", 0, 200, nil},   // C0
		{"2026-11-29 10:01:01", "10.0.0.2", "GET", "/b", 1, 200, nil},   // a retry of nothing open: after C0's 2xx
	})
	m, l := summaryAndLinking(t, openSet(t, db, query.Options{}))
	if m.Recovered != 1 || m.Exhausted != 0 || l.Heuristic != 3 || l.Orphans != 0 || l.After2xx != 1 {
		t.Errorf("recovered %d, exhausted %d, %+v; want 1 recovered, 0 exhausted, 3 logical requests (A, B, C), no orphan, 1 after a 2xx", m.Recovered, m.Exhausted, l)
	}
}

// A timeout race without keys (docs/metrics.md): the gateway logged 2xx for A's first
// attempt, which the client had given up on, and its retry follows. With no open chain the
// retry joins A's (after_2xx) rather than start a request of its own; B's retry still takes
// B's open chain, not C's 2xx in between; D's retry, two minutes after D's 2xx (over
// --max-gap), stays an orphan. 5 logical requests (A, B, C, D, the orphan), 1 recovered (B).
func TestHeuristicAfter2xx(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	insert(t, db, [][]any{
		{"2026-11-29 10:00:00.1", "10.0.0.1", "GET", "/a", 0, 200, nil},  // A0
		{"2026-11-29 10:00:00.3", "10.0.0.1", "GET", "/a", 1, 200, nil},  // A1
		{"2026-11-29 10:01:00", "10.0.0.2", "GET", "/b", 0, 502, nil},    // B0
		{"2026-11-29 10:01:00.05", "10.0.0.2", "GET", "/b", 0, 200, nil}, // C0
		{"2026-11-29 10:01:00.5", "10.0.0.2", "GET", "/b", 1, 200, nil},  // B1
		{"2026-11-29 10:02:00", "10.0.0.3", "GET", "/c", 0, 200, nil},    // D0
		{"2026-11-29 10:04:00", "10.0.0.3", "GET", "/c", 1, 200, nil},    // an orphan
	})
	m, l := summaryAndLinking(t, openSet(t, db, query.Options{}))
	if m.Recovered != 1 || l.Heuristic != 5 || l.Orphans != 1 || l.After2xx != 1 {
		t.Errorf("recovered %d, %+v; want 1 recovered, 5 logical requests, 1 orphan, 1 after a 2xx", m.Recovered, l)
	}
}

// Examples of a finding are each request's smallest, three distinct ones, even when one
// request retried more often than the rows examples are first chosen from: "a-storm"
// sends a POST without an Idempotency-Key and retries it 1,500 times within one second
// (every retry the same example, the smallest); "b-one" and "c-one" retry once each.
// duplicate_write_risk: 3 requests, 1,502 retries, and all three named.
func TestFindingExamplesPastAStorm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_time, request_id, method, uri, route, attempt, status)
		SELECT 1, i + 1, TIMESTAMP '2026-11-29 10:00:00' + to_microseconds(i * 100), 0.0001, 'a-storm', 'POST', '/pay', '/pay', i, 503
		FROM range(1501) t(i)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range [][]any{
		{"2026-11-29 10:00:05", "b-one", 0, 503}, {"2026-11-29 10:00:06", "b-one", 1, 200},
		{"2026-11-29 10:00:07", "c-one", 0, 503}, {"2026-11-29 10:00:08", "c-one", 1, 200},
	} {
		_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, request_id, attempt, status, method, uri, route)
			VALUES (1, ?, ?::TIMESTAMP, ?, ?, ?, 'POST', '/pay', '/pay')`, append([]any{2000 + i}, r...)...)
		if err != nil {
			t.Fatal(err)
		}
	}
	set := openSet(t, db, query.Options{})
	findings, err := set.Findings(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	want := query.Finding{Kind: "duplicate_write_risk", Count: 3, Attempts: 1502, Examples: []string{
		"a-storm (POST /pay at 2026-11-29T10:00:00Z)", "b-one (POST /pay at 2026-11-29T10:00:06Z)", "c-one (POST /pay at 2026-11-29T10:00:08Z)"}}
	for _, f := range findings {
		if f.Kind == want.Kind {
			if diff := cmp.Diff(want, f); diff != "" {
				t.Errorf("duplicate_write_risk (-want +got):\n%s", diff)
			}
			return
		}
	}
	t.Errorf("no duplicate_write_risk in %v", findings)
}

// A closed Set takes its temporary tables with its connection, and leaves the database
// usable: the pool opens a fresh connection for what comes next.
func TestCloseDiscardsTheSetsTables(t *testing.T) {
	t.Parallel()
	db := memDB(t)
	db.SetMaxOpenConns(1) // what follows must get a connection after Close
	if _, err := db.Exec(`INSERT INTO lines (file_id, line, ts, method, uri, status, attempt, request_id)
		VALUES (1, 1, TIMESTAMP '2026-11-29 14:00:00', 'GET', '/a', 503, 0, 'r1'),
		       (1, 2, TIMESTAMP '2026-11-29 14:00:01', 'GET', '/a', 200, 1, 'r1')`); err != nil {
		t.Fatal(err)
	}
	storeLines(t, db)
	for range 2 {
		set, err := query.Open(context.Background(), db, query.Options{NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		var n int
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM duckdb_tables() WHERE temporary) +
			(SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d temporary tables and views outlive the Set", n)
		}
	}
}

// A table's endpoints (TopGroups): the first groups with retries, by retries, then
// requests, then key; the groups left out are counted. Counted by hand from the rows.
func TestTopGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t)
	// route: statuses of each request's attempts 0, 1, ...
	requests := []struct {
		route    string
		statuses []int
	}{
		{"/c", []int{502, 502, 503, 200}}, // /c: 3 retries, 4 requests
		{"/b", []int{502, 200}},           // /b: 2 retries, 6 requests
		{"/b", []int{502, 200}},
		{"/b", []int{200}},
		{"/b", []int{200}},
		{"/f", []int{502, 502, 200}}, // /f: 2 retries, 3 requests, after /a by key
		{"/a", []int{502, 502, 200}}, // /a: 2 retries, 3 requests
		{"/d", []int{502, 200}},      // /d: 1 retry, 2 requests
		{"/e", []int{200}},           // /e: no retry
	}
	line := 0
	for i, r := range requests {
		for attempt, status := range r.statuses {
			line++
			_, err := db.Exec(`INSERT INTO lines (file_id, line, ts, method, uri, route, attempt, status, request_id)
				VALUES (1, ?, TIMESTAMP '2026-11-29 10:00:00' + to_seconds(?), 'GET', ?, ?, ?, ?, ?)`,
				line, line, r.route, r.route, attempt, status, fmt.Sprint("r", i))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	set := openSet(t, db, query.Options{})
	for _, tt := range []struct {
		top  int
		want []string // key retries requests
		more int
	}{
		{2, []string{"GET /c 3 4", "GET /b 2 6"}, 3},
		{3, []string{"GET /c 3 4", "GET /b 2 6", "GET /a 2 3"}, 2}, // cut between /a and /f
		{4, []string{"GET /c 3 4", "GET /b 2 6", "GET /a 2 3", "GET /f 2 3"}, 1},
		{9, []string{"GET /c 3 4", "GET /b 2 6", "GET /a 2 3", "GET /f 2 3", "GET /d 1 2"}, 0},
		{0, []string{"GET /c 3 4", "GET /b 2 6", "GET /a 2 3", "GET /f 2 3", "GET /d 1 2", "GET /e 0 1"}, 0},
	} {
		gs, more, err := set.TopGroups(ctx, "route", tt.top)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range gs {
			got = append(got, fmt.Sprint(g.Key, " ", g.Retries, " ", g.Requests))
		}
		if !slices.Equal(got, tt.want) || more != tt.more {
			t.Errorf("top %d: %q and %d more; want %q and %d more", tt.top, got, more, tt.want, tt.more)
		}
	}
}
