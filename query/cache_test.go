package query_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/judge"
	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// Answerable are the figures a whole report, its HTML charts and check ask with the
// default options: what stored answers hold (query/answers.go).
type Answerable struct {
	Span          [2]time.Time
	Summary       judge.Metrics
	Hours, Mins   []judge.Window
	Alerts        []judge.Alert
	Top           []query.Group // the default --top routes
	More          int
	Loops         query.Loops429
	Hedging       query.Hedging
	Findings      []query.Finding
	Linking       query.Linking
	Backoff       []query.Backoff
	Gaps          []query.GapHistogram
	AttemptCounts []query.AttemptCount
}

// everything is every figure a report reads from a Set.
type everything struct {
	Answerable
	Odd    []judge.Window // 90 s windows: computed from the rows either way
	Groups map[string][]query.Group
}

// readFatal fails the test at the first error of what.
func readFatal(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func readAnswerable(t *testing.T, set *query.Set) Answerable {
	t.Helper()
	ctx := context.Background()
	var e Answerable
	var err error
	e.Span[0], e.Span[1], err = set.Span(ctx)
	readFatal(t, "span", err)
	e.Summary, err = set.Summary(ctx)
	readFatal(t, "summary", err)
	e.Hours, err = set.Windows(ctx, time.Hour, 0)
	readFatal(t, "hours", err)
	e.Mins, err = set.Windows(ctx, time.Minute, 30*time.Minute)
	readFatal(t, "minutes", err)
	e.Alerts, err = set.Alerts(ctx)
	readFatal(t, "alerts", err)
	e.Top, e.More, err = set.TopGroups(ctx, "route", query.DefaultTop)
	readFatal(t, "top routes", err)
	e.Loops, err = set.Loops(ctx)
	readFatal(t, "loops", err)
	e.Hedging, err = set.Hedging(ctx)
	readFatal(t, "hedging", err)
	e.Findings, err = set.Findings(ctx, query.DefaultMaxAttempts)
	readFatal(t, "findings", err)
	e.Linking, err = set.Linking(ctx)
	readFatal(t, "linking", err)
	e.Backoff, err = set.Backoff(ctx, 0, 0)
	readFatal(t, "backoff", err)
	e.Gaps, err = set.Gaps(ctx)
	readFatal(t, "gaps", err)
	e.AttemptCounts, err = set.AttemptCounts(ctx)
	readFatal(t, "attempt counts", err)
	return e
}

func readAll(t *testing.T, set *query.Set) everything {
	t.Helper()
	ctx := context.Background()
	e := everything{Answerable: readAnswerable(t, set), Groups: map[string][]query.Group{}}
	var err error
	e.Odd, err = set.Windows(ctx, 90*time.Second, 0)
	readFatal(t, "90s", err)
	for _, by := range []string{"route", "attempt", "host,status"} {
		e.Groups[by], err = set.Groups(ctx, by)
		readFatal(t, by, err)
	}
	// A table's top groups are the first of them with retries, judged alike.
	top, more, err := set.TopGroups(ctx, "route", 3)
	readFatal(t, "top routes", err)
	var retried []query.Group
	for _, g := range e.Groups["route"] {
		if g.Retries > 0 {
			retried = append(retried, g)
		}
	}
	if want := retried[:min(3, len(retried))]; !cmp.Equal(top, want) || more != len(retried)-len(want) {
		t.Fatalf("top 3 routes %+v and %d more; want %+v and %d more", top, more, want, len(retried)-len(want))
	}
	return e
}

// The cache (query.Refresh) must change nothing but speed: its tables equal the count
// tables built from every row, and a whole-database report reads the same figures from it
// as from linking the rows again, over the sample logs and a
// generated one loaded as separate files; a load after it makes it stale, and a stale
// cache is not read.
func TestCacheSameFigures(t *testing.T) {
	testmain.EndToEndOnly(t) // builds and updates the cache six times; TestContract and TestRangeTablesEqualStored stay
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	retry, _ := parse.Preset("retry")
	var buf bytes.Buffer
	if _, err := lab.Generate(&buf, retry, 10000, 3); err != nil {
		t.Fatal(err)
	}
	// Half the requests lose their keys, for the heuristic to link; the log is cut in two
	// files, so that some requests have attempts on both sides of a load.
	lines := strings.SplitAfter(buf.String(), "\n")
	keyless := regexp.MustCompile(`rid="[0-9a-f]*[0-7]" ik="[^"]*"`)
	for i, l := range lines {
		lines[i] = keyless.ReplaceAllString(l, `rid="-" ik="-"`)
	}
	half := len(lines) / 2
	gen1, gen2 := filepath.Join(dir, "generated.log.1"), filepath.Join(dir, "generated.log")
	for path, part := range map[string][]string{gen1: lines[:half], gen2: lines[half:]} {
		if err := os.WriteFile(path, []byte(strings.Join(part, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	split := 0 // requests with attempts in both files: by key, or by client and URI
	ids := regexp.MustCompile(`^(\S+) .*"\S+ (\S+) [^"]*".* rid="([^"]*)"`)
	firstHalf := map[string]bool{}
	for _, l := range lines[:half] {
		if m := ids.FindStringSubmatch(l); m != nil {
			firstHalf[m[3]], firstHalf[m[1]+m[2]] = true, true
		}
	}
	for _, l := range lines[half:] {
		if m := ids.FindStringSubmatch(l); m != nil && m[3] != "-" && firstHalf[m[3]] || m != nil && m[3] == "-" && firstHalf[m[1]+m[2]] {
			split++
		}
	}
	if split == 0 {
		t.Fatal("no request has attempts in both files: the cut tests nothing")
	}
	t.Logf("%d lines of the second file belong to requests begun in the first", split)

	db := memDB(t)
	load := func(paths ...string) {
		t.Helper()
		if _, err := ingest.Load(ctx, db, paths, ingest.Options{Format: retry}); err != nil {
			t.Fatal(err)
		}
	}
	refresh := func(want string) {
		t.Helper()
		if how, err := query.Refresh(ctx, db); err != nil || how != want {
			t.Fatalf("refresh: %q, %v; want %q", how, err, want)
		}
	}
	load("../testdata/incident-hour/access.log", gen1)

	compare := func(wantCached bool, o query.Options) {
		t.Helper()
		cached := openSet(t, db, o)
		if cached.Cached() != wantCached {
			t.Fatalf("Set reads the cache: %v, want %v", cached.Cached(), wantCached)
		}
		o.NoCache = true
		again := openSet(t, db, o)
		if again.Cached() {
			t.Fatal("NoCache Set reads the cache")
		}
		got, want := readAll(t, cached), readAll(t, again)
		if want.Summary.Requests == 0 || want.Summary.Retries == 0 || want.Loops.Loops == 0 || len(want.Findings) == 0 {
			t.Fatalf("the sample has too little in it to compare: %+v", want.Summary)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("cache changed figures (-linked again +cache):\n%s", diff)
		}
	}
	// The stored tables themselves equal the ones built from every row.
	checkStored := func() {
		t.Helper()
		if state, problems, err := query.CheckCache(ctx, db); err != nil || state != query.CacheMatches {
			t.Errorf("stored tables: %s %v %v", state, problems, err)
		}
	}
	refresh(query.CacheRebuilt)
	compare(true, query.Options{})
	// A range around every row selects them all: the cache still answers.
	around := query.Options{Since: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), MaxGap: query.DefaultMaxGap}
	compare(true, around)
	// A range of whole minutes is cut from the cache: the same figures as linking it with
	// its context (from the generated log's second minute, which cuts its requests, to
	// the incident's end).
	compare(true, query.Options{Since: time.Date(2026, 11, 29, 0, 1, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC), MaxGap: query.DefaultMaxGap})
	refresh(query.CacheFresh)
	// The second half: requests begun in the first file are linked again, old and new rows.
	load(gen2)
	compare(false, query.Options{}) // stale: not read
	refresh(query.CacheUpdated)
	compare(true, query.Options{})
	checkStored() // after an update that linked requests of both files again
	load("../testdata/quiet-hour/access.log")
	refresh(query.CacheUpdated)
	compare(true, query.Options{})
	// A load that adds no row (blank lines) changes the registry, not the cache.
	var files0, files1 int
	db.QueryRowContext(ctx, "SELECT count(*) FROM files").Scan(&files0)
	blank := filepath.Join(dir, "blank.log")
	if err := os.WriteFile(blank, []byte("\n\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load(blank)
	db.QueryRowContext(ctx, "SELECT count(*) FROM files").Scan(&files1)
	if files1 != files0+1 {
		t.Fatalf("files registered: %d, then %d: the blank file tests nothing", files0, files1)
	}
	refresh(query.CacheFresh)
	compare(true, query.Options{})
	// A cache that does not know its rows any more (here: its state dropped) is rebuilt.
	if _, err := db.ExecContext(ctx, "DROP TABLE cache_state"); err != nil {
		t.Fatal(err)
	}
	refresh(query.CacheRebuilt)
	compare(true, query.Options{})
	checkStored()
	// So is one whose state an older retrylens wrote, without today's columns.
	if _, err := db.ExecContext(ctx, "DROP TABLE cache_state; CREATE TABLE cache_state (version VARCHAR)"); err != nil {
		t.Fatal(err)
	}
	refresh(query.CacheRebuilt)
	compare(true, query.Options{})
	// Options that select rows or link differently, or cut a minute, never read it.
	for _, o := range []query.Options{{Route: "/api/orders"}, {InferAttempts: true}, {MaxGap: time.Second},
		{Since: time.Date(2026, 11, 29, 14, 0, 30, 0, time.UTC)}} {
		if o.MaxGap == 0 {
			o.MaxGap = query.DefaultMaxGap
		}
		if openSet(t, db, o).Cached() {
			t.Errorf("%+v: reads the cache", o)
		}
	}
}

// A report over every row reads the answers Refresh stored (query/answers.go), and only it:
// an answer altered in the database is what it gets, while a range cut from the cache,
// other rules or other arguments compute theirs; verify names the altered answer and a
// rebuild puts back the rows' own.
func TestStoredAnswers(t *testing.T) {
	testmain.Long(t, "every stored answer against the one computed")
	t.Parallel()
	ctx := context.Background()
	db := incidentDB(t)
	if how, err := query.Refresh(ctx, db); err != nil || how != query.CacheRebuilt {
		t.Fatalf("refresh: %q, %v", how, err)
	}
	var names []string
	rows, err := db.QueryContext(ctx, "SELECT split_part(name, ' rules=', 1) FROM cache_answers ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	want := []string{"Alerts", "AttemptCounts", "Backoff 0 0", "Buckets 60", "Findings 3", "Gaps", "Hedging", "Linking", "Loops", "Span", `TopGroups "route" 10`}
	if !cmp.Equal(names, want) {
		t.Fatalf("stored answers %q, want %q", names, want)
	}
	linked := readAll(t, openSet(t, db, query.Options{NoCache: true}))
	if diff := cmp.Diff(linked, readAll(t, openSet(t, db, query.Options{}))); diff != "" {
		t.Fatalf("stored answers differ from the rows' own (-linked +stored):\n%s", diff)
	}
	if linked.Loops.Loops == 0 || len(linked.Findings) == 0 || len(linked.Top) == 0 {
		t.Fatalf("the sample has too little in it to compare: %+v", linked.Loops)
	}

	const altered = 424242
	if _, err := db.ExecContext(ctx, "UPDATE cache_answers SET answer = '{\"Requests\": 424242}' WHERE starts_with(name, 'Hedging ')"); err != nil {
		t.Fatal(err)
	}
	hedging := func(o query.Options) int64 {
		t.Helper()
		h, err := openSet(t, db, o).Hedging(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.Requests
	}
	if got := hedging(query.Options{}); got != altered {
		t.Errorf("every row: hedged requests %d, want the stored %d", got, altered)
	}
	rules := judge.DefaultRules()
	rules[0].Threshold += 0.01
	for _, o := range []query.Options{
		{Since: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 14, 30, 0, 0, time.UTC)},
		{Rules: rules},
		{Throttle: []int{429, 503}},
	} {
		if got := hedging(o); got == altered {
			t.Errorf("%+v reads the answer stored for the defaults", o)
		}
	}
	state, problems, err := query.CheckCache(ctx, db)
	if err != nil || state != query.CacheDiffers || len(problems) != 1 || !strings.Contains(problems[0], "Hedging") {
		t.Errorf("verify: %s %q %v; want the Hedging answer to differ", state, problems, err)
	}
	if err := query.Rebuild(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := hedging(query.Options{}); got != linked.Hedging.Requests {
		t.Errorf("after a rebuild: hedged requests %d, want %d", got, linked.Hedging.Requests)
	}
	if state, problems, err := query.CheckCache(ctx, db); err != nil || state != query.CacheMatches {
		t.Errorf("verify after a rebuild: %s %q %v", state, problems, err)
	}

	// A refresh without answers (retrylens watch's batches) stores none for the new rows:
	// the next whole report computes them, and the next ingest stores them.
	current := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM cache_answers WHERE version = (SELECT version FROM cache_state)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	retry, _ := parse.Preset("retry")
	if _, err := ingest.Load(ctx, db, []string{"../testdata/quiet-hour/access.log"}, ingest.Options{Format: retry}); err != nil {
		t.Fatal(err)
	}
	if how, err := query.RefreshAfterLoad(ctx, db, false); err != nil || how != query.CacheUpdated || current() != 0 {
		t.Fatalf("refresh without answers: %q, %v, %d answers for the new rows", how, err, current())
	}
	linked = readAll(t, openSet(t, db, query.Options{NoCache: true}))
	if diff := cmp.Diff(linked, readAll(t, openSet(t, db, query.Options{}))); diff != "" {
		t.Fatalf("a cache without answers differs from the rows (-linked +cached):\n%s", diff)
	}
	if how, err := query.Refresh(ctx, db); err != nil || how != query.CacheFresh || current() != len(want) {
		t.Fatalf("refresh: %q, %v, %d answers, want %d", how, err, current(), len(want))
	}
}

// A Set opened with Options.Answers answers from the stored answers alone, as a cluster's
// whole report does, and reads the rows (Fill) only at its first question they do not
// hold, then answers it and the rest as a Set of the rows does.
func TestAnswersThenFill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := incidentDB(t)
	// No cache: the Set's tables are built from the rows.
	answers, err := query.Answer(ctx, db, query.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := openSet(t, db, query.Options{NoCache: true})
	fills := 0
	o := query.Options{
		Answers: func(_ context.Context, name string) ([]byte, bool, error) { b, ok := answers[name]; return b, ok, nil },
		Fill:    func(context.Context) error { fills++; return nil },
	}
	set := openSet(t, db, o)
	// What a whole report, its HTML charts and check ask with the default options, every
	// endpoint (JSON) and an incident's comparison.
	type figures struct {
		Answerable
		Every                 []query.Group
		IncidentBefore, After judge.Metrics
	}
	ask := func(s *query.Set) figures {
		t.Helper()
		f := figures{Answerable: readAnswerable(t, s)}
		var err error
		f.Every, _, err = s.TopGroups(ctx, "route", 0)
		readFatal(t, "every endpoint", err)
		in, err := s.Compare(ctx, judge.Span{Start: time.Date(2026, 11, 29, 14, 10, 0, 0, time.UTC), End: time.Date(2026, 11, 29, 14, 20, 0, 0, time.UTC)})
		readFatal(t, "incident", err)
		f.IncidentBefore, f.After = in.Before, in.After
		return f
	}
	want := ask(rows)
	if want.Summary.Retries == 0 || len(want.Alerts) == 0 || want.Loops.Loops == 0 || len(want.Every) < 2 {
		t.Fatalf("the sample has too little in it to compare: %+v", want.Summary)
	}
	if diff := cmp.Diff(want, ask(set)); diff != "" || fills != 0 {
		t.Fatalf("answers: %d fills, want none; (-rows +answers):\n%s", fills, diff)
	}
	// Questions the answers do not hold: 90 s windows (a 30 s grain), another grouping,
	// another cap. The first fills the Set, once.
	for i, q := range []func(*query.Set) (any, error){
		func(s *query.Set) (any, error) { return s.Windows(ctx, 90*time.Second, 0) },
		func(s *query.Set) (any, error) { return s.Groups(ctx, "status") },
		func(s *query.Set) (any, error) { return s.Findings(ctx, 2) },
	} {
		w, werr := q(rows)
		g, gerr := q(set)
		if werr != nil || gerr != nil || !cmp.Equal(w, g) {
			t.Errorf("question %d: %v, %v; (-rows +answers):\n%s", i, werr, gerr, cmp.Diff(w, g))
		}
		if fills != 1 {
			t.Errorf("question %d: %d fills, want 1", i, fills)
		}
	}
	if _, err := query.Open(ctx, db, query.Options{Answers: o.Answers, Fill: o.Fill, Since: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("Answers with a range: no error")
	}
}

// TestCutThenFill checks a Set cut from a stored cache (Options.Cut) as a cluster reads
// one: the cache's tables cut to a range of whole minutes, no rows. Every figure equals
// the range's own rows' without Fill; the first question that reads rows fills it, once.
func TestCutThenFill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := incidentDB(t)
	if _, err := query.Refresh(ctx, db); err != nil {
		t.Fatal(err)
	}
	// An alert's last minute to past the incident: the context holds what sustains it.
	since, until := time.Date(2026, 11, 29, 14, 12, 0, 0, time.UTC), time.Date(2026, 11, 29, 14, 40, 0, 0, time.UTC)
	ranged := query.Options{Since: since, Until: until}
	want := readAnswerable(t, openSet(t, db, query.Options{Since: since, Until: until, NoCache: true}))
	wantOdd, err := openSet(t, db, query.Options{Since: since, Until: until, NoCache: true}).Windows(ctx, 90*time.Second, 0)
	readFatal(t, "90 s windows", err)
	if want.Summary.Retries == 0 || len(want.Alerts) == 0 || want.Loops.Loops == 0 {
		t.Fatalf("the range has too little in it to compare: %+v", want.Summary)
	}

	// The cut: the stored tables' rows of the range (and of its context where the cut
	// takes it), and the rows put aside until Fill.
	before, after := ranged.Context()
	lit := func(t time.Time) string { return "TIMESTAMP '" + t.Format("2006-01-02 15:04:05") + "'" }
	qs := []string{"CREATE TABLE aside AS SELECT * FROM requests", "DELETE FROM requests", query.CountedSpan,
		"INSERT INTO counted_span SELECT min(ts), max(ts) FROM aside WHERE ts >= " + lit(since) + " AND ts < " + lit(until)}
	for _, c := range query.CutTables() {
		from, to := since, until
		if c.Context {
			from, to = before, after
		}
		qs = append(qs, fmt.Sprintf("CREATE TABLE cut_%[1]s AS SELECT * FROM cache_%[1]s WHERE %[2]s >= %[3]s AND %[2]s < %[4]s", c.Name, c.By, lit(from), lit(to)),
			"DROP TABLE cache_"+c.Name, fmt.Sprintf("ALTER TABLE cut_%[1]s RENAME TO cache_%[1]s", c.Name))
	}
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	fills := 0
	o := query.Options{Since: since, Until: until, Counted: true, Cut: true, Fill: func(ctx context.Context) error {
		fills++
		for _, q := range []string{"INSERT INTO requests SELECT * FROM aside", query.CountedTime, query.CountedGroups} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}}
	set, err := query.Open(ctx, db, o)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if diff := cmp.Diff(want, readAnswerable(t, set)); diff != "" || fills != 0 {
		t.Fatalf("the cut: %d fills, want none; (-rows +cut):\n%s", fills, diff)
	}
	odd, err := set.Windows(ctx, 90*time.Second, 0)
	if err != nil || !cmp.Equal(wantOdd, odd) || fills != 1 {
		t.Fatalf("90 s windows: %v, %d fills, want 1; (-rows +cut):\n%s", err, fills, cmp.Diff(wantOdd, odd))
	}
	if diff := cmp.Diff(want, readAnswerable(t, set)); diff != "" || fills != 1 {
		t.Fatalf("after the fill: %d fills, want 1; (-rows +filled):\n%s", fills, diff)
	}
	for _, bad := range []query.Options{
		{Since: since.Add(time.Second), Until: until, Counted: true, Cut: true, Fill: o.Fill},
		{Counted: true, Cut: true, Fill: o.Fill},
		{Since: since, Until: until, Cut: true, Fill: o.Fill},
		{Since: since, Until: until, Counted: true, Cut: true, InferAttempts: true, Fill: o.Fill},
	} {
		if s, err := query.Open(ctx, db, bad); err == nil {
			s.Close()
			t.Errorf("Cut with %+v: no error", bad)
		}
	}
}

// incidentDB is an in-memory database with the incident sample loaded, no cache built.
func incidentDB(t *testing.T) *sql.DB {
	t.Helper()
	db := memDB(t)
	retry, _ := parse.Preset("retry")
	if _, err := ingest.Load(context.Background(), db, []string{"../testdata/incident-hour/access.log"}, ingest.Options{Format: retry}); err != nil {
		t.Fatal(err)
	}
	return db
}
