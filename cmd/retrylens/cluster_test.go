package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/cluster"
	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
)

// One two-shard ClickHouse cluster from Debian's package serves every test of the binary
// (it starts in about half a second; TestMain stops it). Each test takes databases of
// its own.
// sameOnCluster loads files into a DuckDB file and into a database on the cluster and
// requires each command's output (and exit code) to be the same on both: every figure,
// alert and finding of reports computed from a DuckDB file's rows alone.
func sameOnCluster(t *testing.T, files []string, load []string, commands func(duck string) [][]string) {
	t.Helper()
	url := testmain.ClusterURL(t)
	duck := filepath.Join(t.TempDir(), "same.duckdb")
	// The cluster links the rows in parts of 50 and counts the shards' rows in slices of 50,
	// at ingest and in reports that read the shards (in use: a million, four million).
	env := map[string]string{"RETRYLENS_PART_ROWS": "50", "RETRYLENS_COUNT_ROWS": "50"}
	for _, db := range []string{duck, url} {
		if _, stderr, code := retrylensEnv(t, env, nil, append(append([]string{"ingest", "--quiet", "--db", db}, load...), files...)...); code != 0 {
			t.Fatalf("ingest into %s: exit %d: %s", db, code, stderr)
		}
	}
	for _, args := range commands(duck) {
		want, wantErr, wantCode := retrylens(t, nil, append(args, "--db", duck)...)
		got, gotErr, gotCode := retrylensEnv(t, env, nil, append(args, "--db", url)...)
		if wantCode != gotCode || want != got || wantErr != gotErr {
			t.Errorf("%s: DuckDB exit %d, cluster exit %d;\n%s", strings.Join(args, " "), wantCode, gotCode, firstDiff(want+wantErr, got+gotErr, "DuckDB", "cluster"))
		} else if len(want) < 20 {
			t.Errorf("%s: %q: nothing to compare", strings.Join(args, " "), want)
		}
	}
	// A whole report reads the answers ingest stored on the cluster, and no row; one they
	// do not answer (10 s windows) reads the shards, with the same figures (above and
	// TestAnswersThenFill). A range of whole minutes reads the cache stored with them, cut
	// to it, and no row, unless it asks for windows finer than a minute (TestCutThenFill).
	whole := factsOf(t, duck).midMinute().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		read string
		rows bool
	}{
		{[]string{"report", "--format", "json"}, "answers stored at ingest", false},
		{[]string{"report", "--format", "json", "--window", "10s"}, "answers stored at ingest", true},
		{[]string{"report", "--format", "json", "--since", whole}, "cut to the range", false},
		{[]string{"report", "--format", "json", "--since", whole, "--window", "10s"}, "cut to the range", true},
	} {
		_, trace, code := retrylensEnv(t, map[string]string{"RETRYLENS_TRAFFIC": "1"}, nil, append(c.args, "--db", url)...)
		if code != 0 || !strings.Contains(trace, c.read) || strings.Contains(trace, "rows to link") != c.rows {
			t.Errorf("%s: exit %d; want %q, and the rows %v:\n%s", strings.Join(c.args, " "), code, c.read, c.rows, trace)
		}
	}
}

// splitGateways writes path's lines alternately to two files, as two gateways behind
// one load balancer log one client's attempts: the attempts of a request are spread
// over both, and their keys over both shards.
func splitGateways(t *testing.T, path string) []string {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dir := t.TempDir()
	var outs []*bufio.Writer
	var names []string
	for i := range 2 {
		name := filepath.Join(dir, fmt.Sprintf("gateway-%d.log", i+1))
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		names = append(names, name)
		w := bufio.NewWriter(f)
		defer w.Flush()
		outs = append(outs, w)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		fmt.Fprintln(outs[i%2], sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// reportCommands are the commands a cluster must answer as a DuckDB file does, for
// logs that start at first and end at last: the whole report, a cut at odd seconds (with
// inference) and one of whole minutes (the cache stored at ingest, cut), cuts in an
// alert's first and last minutes (the edges' minutes sustain it), at 37 s and at the
// minute, and with all 10 s windows with groups, the HTML page (sub-minute chart buckets)
// of every row and of whole minutes, the check, a budget replay and the busiest endpoint.
func reportCommands(s logFacts, all bool) [][]string {
	span := s.last.Sub(s.first)
	odd := s.first.Add(span / 3).Truncate(time.Second).Add(7 * time.Second)
	whole := s.midMinute()
	wholeEnd := whole.Add(span / 3).Truncate(time.Minute)
	if !wholeEnd.After(whole) {
		wholeEnd = whole.Add(time.Minute)
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	cmds := [][]string{
		{"report", "--format", "json"},
		{"report", "--format", "json", "--window", "5m", "--since", ts(odd), "--until", ts(odd.Add(span / 3)), "--infer-attempts"},
		{"report", "--format", "json", "--window", "5m", "--since", ts(whole), "--until", ts(wholeEnd)},
	}
	if !s.alertStart.IsZero() {
		cmds = append(cmds,
			[]string{"report", "--format", "json", "--since", ts(s.alertEnd)},
			[]string{"check", "--format", "json", "--until", ts(s.alertStart)},
			[]string{"report", "--format", "json", "--since", ts(s.alertEnd.Truncate(time.Minute))},
			[]string{"check", "--format", "json", "--until", ts(s.alertStart.Truncate(time.Minute).Add(time.Minute))})
	}
	if !all {
		return cmds
	}
	cmds = append(cmds,
		[]string{"report", "--format", "json", "--window", "10s", "--by", "route,status", "--max-gap", "30s", "--since", ts(whole)},
		[]string{"report", "--format", "html"},
		[]string{"report", "--format", "html", "--since", ts(whole)},
		[]string{"check", "--format", "json"},
		[]string{"budget", "--format", "json"})
	if s.endpoint != "" {
		cmds = append(cmds, []string{"report", "--format", "json", "--endpoint", s.endpoint})
	}
	return cmds
}

// TestClusterSameReports runs the sample logs, each split over two gateways, through a
// DuckDB file and a two-shard ClickHouse cluster: keys whose lines lie (an X-Request-Id
// that takes another line's Idempotency-Key is on the other shard), untagged first
// attempts, an incident hour, a quiet one, hedged and cancelled attempts (the incident
// hour alone outside the end-to-end tier).
func TestClusterSameReports(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ClickHouse cluster")
	}
	t.Parallel()
	names := []string{"incident-hour", "quiet-hour", "keys-that-lie", "untagged-firsts", "overlapping-attempts"}
	if !testmain.EndToEnd {
		names = names[:1] // the default tier's smoke: one log, every report command
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			sameOnCluster(t, splitGateways(t, scenario(name)), nil, func(duck string) [][]string {
				return reportCommands(factsOf(t, duck), name == "incident-hour")
			})
		})
	}
}

// logFacts are what reportCommands cuts a log's reports by.
type logFacts struct {
	first, last time.Time // the first and last line's
	endpoint    string    // the route with most retries
	// 37 s into the first and the last minute of the first alert, if any: a range that
	// ends in its first minute or starts in its last holds too little of it to sustain it
	alertStart, alertEnd time.Time
}

// midMinute is the start of the log's middle minute.
func (s logFacts) midMinute() time.Time {
	return s.first.Add(s.last.Sub(s.first) / 2).Truncate(time.Minute)
}

// factsOf reads the facts of the logs in the DuckDB file db.
func factsOf(t *testing.T, db string) logFacts {
	t.Helper()
	var f logFacts
	out, stderr, code := retrylens(t, nil, "query", "--db", db, "--format", "tsv",
		`SELECT strftime(min(ts), '%Y-%m-%dT%H:%M:%SZ'), strftime(max(ts), '%Y-%m-%dT%H:%M:%SZ'),
		        coalesce((SELECT route FROM requests WHERE attempt >= 1 AND route IS NOT NULL GROUP BY route ORDER BY count(*) DESC, route LIMIT 1), '')
		 FROM requests`)
	if code != 0 {
		t.Fatalf("query: %s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cols := strings.Split(lines[len(lines)-1], "\t")
	var err error
	if f.first, err = time.Parse(time.RFC3339, cols[0]); err != nil {
		t.Fatal(err)
	}
	if f.last, err = time.Parse(time.RFC3339, cols[1]); err != nil {
		t.Fatal(err)
	}
	if len(cols) > 2 {
		f.endpoint = cols[2]
	}
	out, _, _ = retrylens(t, nil, "report", "--db", db, "--format", "json")
	var r struct {
		Alerts []struct{ Start, End time.Time }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Alerts) > 0 {
		a := r.Alerts[0]
		f.alertStart, f.alertEnd = a.Start.Add(37*time.Second), a.End.Add(37*time.Second-time.Minute) // End is exclusive
	}
	return f
}

// TestClusterGenerated: 130,000 generated lines loaded into the cluster with kills at
// each step of a chunk, re-runs and a rotated copy: every line once, and the same reports
// as a DuckDB file.
func TestClusterGenerated(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	dir := t.TempDir()
	size := 130_000 // RETRYLENS_CLUSTER_LINES=1000000 for the million (docs/scale.md)
	if n, err := strconv.Atoi(os.Getenv("RETRYLENS_CLUSTER_LINES")); err == nil && n > 0 {
		size = n
	}
	path, lines := genLog(t, dir, "retry", size, 5)
	url := testmain.ClusterURL(t)
	// Killed at each step of a chunk: before anything is written, with a batch of rows on
	// the shards, with every row there, with the rejects, after the registry entry; then
	// with the next chunk's rows on the shards.
	// 20 MiB chunks: about 75,000 rows, two batches to the shards each.
	damaged := 0
	for _, spec := range []string{"begun:1:pause", "rows:1:pause", "inserted:1:pause", "registered:1:pause", "committed:1:pause", "rows:1:pause"} {
		if !killAtStep(t, url, path, spec, 0, "--chunk-mib", "20") {
			t.Logf("%s: the load ended before it got there", spec)
			continue
		}
		d := checkCluster(t, url)
		if !d.OK() {
			damaged++
		}
		t.Logf("killed at %s: %s", spec, strings.Join(append(d.Problems(), "rows match the registry")[:max(1, len(d.Problems()))], "; "))
	}
	if damaged == 0 {
		t.Error("no kill left rows without their registry entry: the repair went untested")
	}
	// verify names what the last kill left, and exits as for a damaged file.
	if out, _, code := retrylens(t, nil, "verify", "--db", url); code != exitDamaged || !strings.Contains(out, "no registry entry") {
		t.Errorf("verify after the kills: exit %d: %s", code, out)
	}
	_, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", url, "--chunk-mib", "20", path)
	if code != 0 {
		t.Fatalf("final ingest: exit %d: %s", code, stderr)
	}
	// The last kill left the second chunk's first batch on the shards.
	if !strings.Contains(stderr, "retrylens: repaired the database before loading: 1 unregistered load(s) deleted (") {
		t.Errorf("final ingest did not say what it repaired: %s", stderr)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--db", url); code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("verify after the final ingest: exit %d: %s%s", code, out, stderr)
	}
	// Every line once: n rows, n distinct line numbers adding up to n(n+1)/2, and the
	// registry's chunks cover the n lines once (genLog's lines all parse).
	n := int64(lines)
	out, stderr, code := retrylens(t, nil, "query", "--db", url, "--format", "tsv",
		"SELECT count(), uniqExact(line), sum(line), (SELECT sum(lines) FROM files) FROM requests")
	want := fmt.Sprintf("%d\t%d\t%d\t%d", n, n, n*(n+1)/2, n)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), want) {
		t.Fatalf("after the kills: %q (exit %d, %s); want %s", out, code, stderr, want)
	}
	// Again, and a rotated copy (renamed, gzipped): nothing new.
	gz := filepath.Join(dir, "retry.log.1.gz")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(gz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(data)
	zw.Close()
	f.Close()
	for _, p := range []string{path, gz} {
		_, stderr, code := retrylens(t, nil, "ingest", "--db", url, p)
		if code != 0 || !strings.Contains(stderr, "already loaded") {
			t.Errorf("ingest %s again: exit %d: %s", filepath.Base(p), code, stderr)
		}
	}
	out, _, _ = retrylens(t, nil, "query", "--db", url, "--format", "tsv",
		"SELECT count(), uniqExact(line), sum(line), (SELECT sum(lines) FROM files) FROM requests")
	if !strings.HasSuffix(strings.TrimSpace(out), want) {
		t.Errorf("after the re-runs: %q; want %s", out, want)
	}
	// The same figures as a DuckDB file of the same lines.
	duck := filepath.Join(dir, "same.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", duck, path); code != 0 {
		t.Fatalf("ingest: %s", stderr)
	}
	for _, args := range reportCommands(factsOf(t, duck), false) {
		want, _, _ := retrylens(t, nil, append(args, "--db", duck)...)
		got, stderr, _ := retrylens(t, nil, append(args, "--db", url)...)
		if want != got {
			t.Errorf("%s: %s\n%s", strings.Join(args, " "), firstDiff(want, got, "DuckDB", "cluster"), stderr)
		}
	}
}

// checkCluster compares the cluster's rows with its registry, as the next ingest does.
func checkCluster(t *testing.T, url string) ingest.Damage {
	t.Helper()
	cl, err := cluster.OpenCluster(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	d, err := cluster.CheckCluster(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestClusterLoadersAtOnce: two ingests into one cluster at once, the first held with its
// first chunk's rows on the shards and no registry entry yet. The second loads its own
// gateway's log beside it, deletes none of the held rows (their loader is alive: no
// killed load to repair) and waits for the log the first holds, which it was also given
// under another name; once the first finishes, it finds that log loaded. Every line of
// the two logs is there once.
func TestClusterLoadersAtOnce(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	url := testmain.ClusterURL(t)
	shared, sharedLines := genLog(t, t.TempDir(), "retry", 60_000, 21)
	own, ownLines := genLog(t, t.TempDir(), "retry", 20_000, 22)
	renamed := filepath.Join(t.TempDir(), "rotated.log")
	if data, err := os.ReadFile(shared); err != nil || os.WriteFile(renamed, data, 0o644) != nil {
		t.Fatal(err)
	}
	st, err := backend.Open(t.Context(), url, backend.Options{Mode: backend.Create})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// sql is the one row of q as tab-separated text.
	sql := func(q string) string {
		_, rows, err := st.Run(t.Context(), q)
		if err != nil || len(rows) != 1 {
			t.Fatalf("%s: %v", q, err)
		}
		var cols []string
		for _, v := range rows[0] {
			cols = append(cols, fmt.Sprint(v))
		}
		return strings.Join(cols, "\t")
	}

	held := exec.Command(os.Args[0], "ingest", "--quiet", "--db", url, "--log-format", "retry", "--chunk-mib", "4", shared)
	held.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1", "RETRYLENS_TEST_STEP=rows:1:hold")
	release, err := held.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := held.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer held.Process.Kill()
	heldErr := make(chan string, 1)
	reached := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var rest strings.Builder
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "retrylens-test: ") {
				reached <- true
				continue
			}
			rest.WriteString(sc.Text() + "\n")
		}
		reached <- false
		heldErr <- rest.String()
	}()
	if !<-reached {
		t.Fatalf("the held ingest ended before its first rows: %s", <-heldErr)
	}
	inFlight := sql("SELECT count() FROM requests")
	if inFlight == "0" {
		t.Fatal("the held ingest has no rows on the shards")
	}

	type run struct {
		stderr string
		code   int
	}
	second := make(chan run, 1)
	go func() {
		// (a long --wait: the test holds the first while a third ingest runs, on a busy machine too)
		_, stderr, code := retrylens(t, nil, "ingest", "--wait", "5m", "--db", url, "--log-format", "retry", own, renamed)
		second <- run{stderr, code}
	}()
	// The second loads its own log, then waits for the held one.
	for i := 0; sql(fmt.Sprintf("SELECT count() FROM files WHERE path = '%s'", own)) == "0"; i++ {
		if i == 600 {
			t.Fatal("the second ingest did not load its own log within a minute")
		}
		select {
		case r := <-second:
			t.Fatalf("the second ingest ended first: exit %d: %s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(time.Second) // it now waits for the held log
	select {
	case r := <-second:
		t.Fatalf("the second ingest did not wait for the log the first holds: exit %d: %s", r.code, r.stderr)
	default:
	}
	// A third, told to wait a second, gives up on the held log and says why.
	if _, stderr, code := retrylens(t, nil, "ingest", "--wait", "1s", "--db", url, "--log-format", "retry", renamed); code == 0 ||
		!strings.Contains(stderr, fmt.Sprintf("another loader (pid %d on ", held.Process.Pid)) || !strings.Contains(stderr, "holds "+renamed+": gave up after 1s") {
		t.Errorf("an ingest with --wait 1s of the held log: exit %d:\n%s", code, stderr)
	}
	// (the shards run the query: the registry, on this server, is sent to them)
	if got := sql("SELECT count() FROM requests WHERE file_id GLOBAL NOT IN (SELECT file_id FROM files)"); got != inFlight {
		t.Errorf("%s rows of the held load in flight, want %s", got, inFlight)
	}
	if got := sql(fmt.Sprintf("SELECT count() FROM files WHERE path = '%s'", shared)); got != "0" {
		t.Errorf("%s registry entries of the held log, want none yet", got)
	}

	release.Close()
	if err := held.Wait(); err != nil {
		t.Fatalf("the held ingest: %v: %s", err, <-heldErr)
	}
	r := <-second
	if r.code != 0 || !strings.Contains(r.stderr, renamed+": skipped, already loaded") ||
		!strings.Contains(r.stderr, fmt.Sprintf("retrylens: waiting up to 5m0s: another loader (pid %d on ", held.Process.Pid)) {
		t.Errorf("the second ingest: exit %d, want it to say it waits for the held log, then skip %s:\n%s", r.code, renamed, r.stderr)
	}
	n := int64(sharedLines + ownLines)
	want := fmt.Sprintf("%d\t%d", n, n)
	if got := sql("SELECT count(), uniqExact(file_id, line) FROM requests"); got != want {
		t.Errorf("rows, distinct rows: %s, want %s", got, want)
	}
	if got := sql("SELECT sum(lines) FROM files"); got != fmt.Sprint(n) {
		t.Errorf("registered lines: %s, want %d", got, n)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--db", url); code != 0 || !strings.Contains(out, ": ok") {
		t.Errorf("verify: exit %d: %s%s", code, out, stderr)
	}
}

// TestClusterWatchOnce: a watch's batch loads a log into a cluster (no answers stored:
// reports read the shards), and every report of it is a DuckDB file's of the same lines.
func TestClusterWatchOnce(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	url := testmain.ClusterURL(t)
	path := scenario("incident-hour")
	duck := filepath.Join(t.TempDir(), "same.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", duck, path); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "watch", "--once", "--db", url, path); code != 0 {
		t.Fatalf("watch --once: exit %d: %s", code, stderr)
	}
	for _, args := range reportCommands(factsOf(t, duck), false) {
		want, _, _ := retrylens(t, nil, append(args, "--db", duck)...)
		got, stderr, _ := retrylens(t, nil, append(args, "--db", url)...)
		if want != got || len(want) < 20 {
			t.Errorf("%s: %s\n%s", strings.Join(args, " "), firstDiff(want, got, "DuckDB", "cluster"), stderr)
		}
	}
}

// TestClusterQueryWrite: query on a cluster is read-only unless --write, as on a file.
func TestClusterQueryWrite(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	url := testmain.ClusterURL(t)
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", url, scenario("quiet-hour")); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	create := "CREATE TABLE scratch (x UInt8) ENGINE = Memory"
	if _, stderr, code := retrylens(t, nil, "query", "--db", url, create); code == 0 || !strings.Contains(stderr, "readonly") {
		t.Errorf("query without --write: exit %d: %s", code, stderr)
	}
	if _, stderr, code := retrylens(t, nil, "query", "--write", "--db", url, create); code != 0 {
		t.Errorf("query --write: exit %d: %s", code, stderr)
	}
	if out, _, code := retrylens(t, nil, "query", "--db", url, "--format", "tsv", "SELECT count() FROM scratch"); code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("the table --write made: exit %d: %q", code, out)
	}
}

// TestClusterVerifyStored: verify on a cluster computes the answers and the cache that
// ingest stored for reports again from the rows, names a stored table that differs (a
// row added behind retrylens's back), exits as for damage, and --repair stores them again.
func TestClusterVerifyStored(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ClickHouse cluster")
	}
	t.Parallel()
	url := testmain.ClusterURL(t)
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", url, scenario("incident-hour")); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	const ok = "answers and cache for reports: "
	if out, stderr, code := retrylens(t, nil, "verify", "--db", url); code != 0 || !strings.Contains(out, ok) || !strings.Contains(out, "as the rows give them: ok") {
		t.Fatalf("verify: exit %d: %s%s", code, out, stderr)
	}
	cl, err := cluster.OpenCluster(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	err = cl.Conn.Exec(t.Context(), "INSERT INTO "+cl.Table("cache_groups")+" SELECT * FROM "+cl.Table("cache_groups")+" LIMIT 1")
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, code := retrylens(t, nil, "verify", "--db", url)
	if code != exitDamaged || !strings.Contains(out, "cache_groups: ") || strings.Contains(out, "as the rows give them: ok") {
		t.Fatalf("verify after a row was added to cache_groups: exit %d, want %d: %s%s", code, exitDamaged, out, stderr)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--repair", "--db", url); code != 0 || !strings.Contains(out, "repaired: the answers and cache stored again") {
		t.Fatalf("verify --repair: exit %d: %s%s", code, out, stderr)
	}
	if out, stderr, code := retrylens(t, nil, "verify", "--db", url); code != 0 || !strings.Contains(out, "as the rows give them: ok") {
		t.Fatalf("verify after the repair: exit %d: %s%s", code, out, stderr)
	}
}

// A cluster made before error_code and operation: the next ingest adds them to the
// Distributed table and to every shard's table (ClickHouse 18.16 has no ADD COLUMN IF NOT
// EXISTS), keeps the rows, and reports read them.
func TestClusterGainsColumns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ClickHouse cluster")
	}
	t.Parallel()
	url := testmain.ClusterURL(t)
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", url, scenario("quiet-hour")); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	cl, err := cluster.OpenCluster(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var before uint64
	if err := cl.Conn.QueryRow(t.Context(), "SELECT count() FROM "+cl.Table("requests")).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"error_code", "operation"} {
		if err := cl.Conn.Exec(t.Context(), "ALTER TABLE "+cl.Table("requests")+" DROP COLUMN "+col); err != nil {
			t.Fatal(err)
		}
		for _, s := range cl.Shards {
			if err := s.Exec(t.Context(), "ALTER TABLE "+cl.Table("requests_local")+" DROP COLUMN "+col); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--db", url, scenario("incident-hour")); code != 0 {
		t.Fatalf("ingest into the older cluster: exit %d: %s", code, stderr)
	}
	var after, n uint64
	if err := cl.Conn.QueryRow(t.Context(), "SELECT count() FROM "+cl.Table("requests")).Scan(&after); err != nil || after <= before {
		t.Errorf("rows after the second ingest: %d, %v; want more than the %d before", after, err, before)
	}
	has := func(conn driver.Conn, table string) {
		t.Helper()
		if err := conn.QueryRow(t.Context(), "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name IN ('error_code', 'operation')",
			cl.DB, table).Scan(&n); err != nil || n != 2 {
			t.Errorf("%s: %d of the two columns, %v", table, n, err)
		}
	}
	has(cl.Conn, "requests")
	for _, s := range cl.Shards {
		has(s, "requests_local")
	}
	if _, stderr, code := retrylens(t, nil, "report", "--format", "json", "--db", url); code != 0 {
		t.Errorf("report: exit %d: %s", code, stderr)
	}
}
