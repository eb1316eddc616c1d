package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// A log loaded in one go, in 2 parts and in 10 (an ingest each, as a user appending the
// lines written since), and with a tenth of it loaded last (late lines: a second
// gateway's log, a late flush), by ingest and as watch loads it (the partials left until
// the last load, which builds them), gives the same database: every stored table, row for row
// (the count tables, the route totals and the partial answers per minute), and the same
// reports: JSON at a minute and at 10 s, the table, and a range of whole minutes, which
// merges the stored partials of its minutes. The log is the incident hour (alerts, an
// incident, synchronised retries) and a sparse generated log of twelve minutes (hedges,
// 429 loops, writes retried without a key); half the generated requests lose their
// keys, so that the heuristic links them; every cut falls inside a request, the first
// ones inside a hedged request and inside a 429 loop, so each later ingest links old and
// new rows again (the cache's update). RETRYLENS_PARTS=N adds N parts.
func TestLoadedInParts(t *testing.T) {
	testmain.Long(t, "26 ingests of a generated log")
	t.Parallel()
	lines, inside, special := partsLog(t)
	contiguous := func(parts int) [][]int {
		c := []int{0}
		for p := 1; p < parts; p++ {
			i := max(p*len(lines)/parts, c[len(c)-1]+1)
			if p <= len(special) && special[p-1] > c[len(c)-1] {
				i = special[p-1] // inside a hedge, inside a 429 loop
			}
			for i < len(lines) && !inside[i] {
				i++
			}
			if i == len(lines) {
				t.Fatalf("no retry to cut at after line %d", p*len(lines)/parts)
			}
			c = append(c, i)
		}
		c = append(c, len(lines))
		layout := make([][]int, parts)
		for p := range parts {
			for i := c[p]; i < c[p+1]; i++ {
				layout[p] = append(layout[p], i)
			}
		}
		return layout
	}
	// late: the lines from 40 % to 50 % of the log (cut inside requests), loaded after the rest
	late := func() [][]int {
		c := contiguous(10)
		return [][]int{slices.Concat(c[:4]...), slices.Concat(c[5:]...), c[4]}
	}
	whole := loadParts(t, lines, contiguous(1), false)
	if n := strings.Count(whole.tables["attempts"], "\n"); n < 100 || !strings.Contains(whole.tables["attempts"], "heuristic") {
		t.Fatalf("cache_attempts has %d lines, none linked by the heuristic or too few to compare", n)
	}
	var report struct {
		Hedging   struct{ Hedges int }
		Loops     struct{ Loops int } `json:"loops_429"`
		Alerts    []any
		Incidents []any
		Findings  []struct{ Kind string }
	}
	if err := json.Unmarshal([]byte(whole.reports["json"]), &report); err != nil {
		t.Fatal(err)
	}
	if report.Hedging.Hedges == 0 || report.Loops.Loops == 0 || len(report.Alerts) == 0 || len(report.Incidents) == 0 || len(report.Findings) == 0 ||
		!strings.Contains(whole.reports["incident"], `"kind": "synchronised"`) {
		t.Fatalf("the log has too little in it for the cuts to test: %+v", report)
	}
	// "as watch": loaded through the library, each load's cache brought up to date without
	// the answers and partials, as watch's batches do, the last one with them
	layouts := map[string][][]int{"2 parts": contiguous(2), "10 parts": contiguous(10), "late lines": late(), "late lines, as watch": late()}
	if os.Getenv("RETRYLENS_PARTS") != "" {
		// By hand (RETRYLENS_PARTS=100): 100 loads took 95 s alone, and pushed the
		// end-to-end tier past go test's ten minutes beside the lab; a thousand took over
		// ten minutes on their own (a load's fixed cost, which answers that merge have yet
		// to bring down).
		n, err := strconv.Atoi(os.Getenv("RETRYLENS_PARTS"))
		if err != nil || n < 2 {
			t.Fatalf("RETRYLENS_PARTS=%q: a number of parts, 2 or more", os.Getenv("RETRYLENS_PARTS"))
		}
		layouts[fmt.Sprint(n, " parts")] = contiguous(n)
	}
	for name, layout := range layouts {
		got := loadParts(t, lines, layout, len(layout) > 10 || strings.HasSuffix(name, "as watch"))
		for table, rows := range whole.tables {
			if got.tables[table] != rows {
				t.Errorf("%s: cache_%s differs from the log loaded in one go:\n%s", name, table, firstDiff(rows, got.tables[table], "one go", name))
			}
		}
		for report, out := range whole.reports {
			if got.reports[report] != out {
				t.Errorf("%s: the %s report differs from the log loaded in one go:\n%s", name, report, firstDiff(out, got.reports[report], "one go", name))
			}
		}
	}
}

// partsLog is TestLoadedInParts's log, its lines; for each, whether it is a retry whose
// request began on an earlier line (a cut before it falls inside the request); and the
// first such line of a hedged request and of a 429 loop.
func partsLog(t *testing.T) (lines []string, inside []bool, special []int) {
	t.Helper()
	incident, err := os.ReadFile("../../testdata/incident-hour/access.log")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parse.Preset("retry")
	if err != nil {
		t.Fatal(err)
	}
	var gen strings.Builder
	if _, err := lab.GenerateEvery(&gen, pf, 3000, 5, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keyless := regexp.MustCompile(`rid="[0-9a-f]*[0-7]" ik="[^"]*"`)
	lines = strings.SplitAfter(string(incident)+keyless.ReplaceAllString(gen.String(), `rid="-" ik="-"`), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	req := regexp.MustCompile(`^(\S+) .*"\S+ (\S+) [^"]*" (\d+) .* rt=([0-9.]+) .* ra="([-0-9]+)" rr="[^"]*" rid="([^"]*)".* msec=([0-9.]+)`)
	seen, inside := map[string]float64{}, make([]bool, len(lines))
	hedge, loop := -1, -1
	prevStatus := map[string]string{}
	for i, l := range lines {
		m := req.FindStringSubmatch(l)
		if m == nil {
			continue // the incident hour's malformed line
		}
		id := m[6]
		if id == "-" {
			id = m[1] + " " + m[2]
		}
		rt, _ := strconv.ParseFloat(m[4], 64)
		end, _ := strconv.ParseFloat(m[7], 64)
		prevEnd, began := seen[id]
		inside[i] = began && m[5] != "0" && m[5] != "-"
		if inside[i] && loop < 0 && m[3] == "429" && prevStatus[id] == "429" {
			loop = i
		}
		if inside[i] && hedge < 0 && end-rt < prevEnd {
			hedge = i // started before the attempt before it ended
		}
		seen[id], prevStatus[id] = end, m[3]
	}
	if loop < 0 || hedge < 0 {
		t.Fatalf("no 429 loop (%d) or hedge (%d) to cut inside", loop, hedge)
	}
	return lines, inside, slices.Sorted(slices.Values([]int{hedge, loop}))
}

type loadedParts struct {
	tables  map[string]string // every stored table, rows sorted, places made the whole log's
	reports map[string]string
}

// loadParts loads lines in parts, layout[p] the lines of part p (indexes into lines), one
// ingest each, and reads back the stored tables and the reports. inProcess loads them
// through the library (a hundred processes take too long) as watch does, the last load
// storing the answers as ingest does.
func loadParts(t *testing.T, lines []string, layout [][]int, inProcess bool) loadedParts {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "parts.duckdb")
	paths := make([]string, len(layout))
	for p, part := range layout {
		paths[p] = filepath.Join(dir, fmt.Sprintf("access.log.%d", p))
		var b strings.Builder
		for _, i := range part {
			b.WriteString(lines[i])
		}
		if err := os.WriteFile(paths[p], []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if inProcess {
		ctx := context.Background()
		conn, err := ingest.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		pf, _ := parse.Preset("retry")
		for p, path := range paths {
			if _, err := ingest.Load(ctx, conn, []string{path}, ingest.Options{Format: pf}); err != nil {
				t.Fatal(err)
			}
			how, err := query.RefreshAfterLoad(ctx, conn, p == len(paths)-1)
			if want := map[bool]string{true: query.CacheRebuilt, false: query.CacheUpdated}[p == 0]; err != nil || how != want {
				t.Fatalf("part %d: cache %q, %v; want %q", p, how, err, want)
			}
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		for p, path := range paths {
			_, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--log-format", "retry", path)
			want := "Report cache rebuilt"
			if p > 0 {
				want = "Report cache updated" // the incremental path, not a rebuild
			}
			if code != 0 || !strings.Contains(stderr, want) {
				t.Fatalf("%d parts, ingest of part %d: exit %d, want %q:\n%s", len(layout), p, code, want, stderr)
			}
		}
	}
	got := loadedParts{tables: map[string]string{}, reports: map[string]string{}}
	conn := openDB(t, db)
	place := func(file, line string) string {
		f, ferr := strconv.Atoi(file)
		l, lerr := strconv.Atoi(line)
		if ferr != nil || lerr != nil || f < 1 || f > len(layout) || l < 1 || l > len(layout[f-1]) {
			t.Fatalf("file %q line %q: not a place in the parts", file, line)
		}
		return strconv.Itoa(layout[f-1][l-1])
	}
	for _, name := range query.StoredTables() {
		// Tables that name rows by their place in the logs (file_id, line, and a
		// heuristic chain's lkey, h:HASH:FILE:LINE of its first row): made the line's
		// place in the whole log, the same in every split.
		var positioned, keyed bool
		err := conn.QueryRow(`SELECT count(*) FILTER (column_name = 'line') > 0, count(*) FILTER (column_name = 'lkey') > 0
			FROM duckdb_columns() WHERE table_name = 'cache_' || $1`, name).Scan(&positioned, &keyed)
		if err != nil {
			t.Fatal(err)
		}
		q := "SELECT * FROM cache_" + name
		switch {
		case keyed:
			q = "SELECT file_id, line, lkey, * EXCLUDE (file_id, line, lkey) FROM cache_" + name
		case positioned:
			q = "SELECT file_id, line, * EXCLUDE (file_id, line) FROM cache_" + name
		}
		rows, err := conn.Query(q)
		if err != nil {
			t.Fatalf("cache_%s: %v", name, err)
		}
		cols, _ := rows.Columns()
		var text []string
		for rows.Next() {
			v := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range v {
				ptrs[i] = &v[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			c := make([]string, len(v))
			for i, x := range v {
				c[i] = fmt.Sprint(x)
			}
			if positioned {
				c[0], c[1] = "", place(c[0], c[1])
				if h := strings.Split(c[2], ":"); keyed && len(h) == 4 && h[0] == "h" {
					c[2] = "h:" + h[1] + ":" + place(h[2], h[3])
				}
			}
			text = append(text, strings.Join(c, "\t"))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(text)
		got.tables[name] = strings.Join(cols, "\t") + "\n" + strings.Join(text, "\n")
	}
	conn.Close()
	generatedAt := regexp.MustCompile(`"generated_at": "[^"]*"`)
	for name, args := range map[string][]string{
		"json":     {"--format", "json"},
		"json 10s": {"--format", "json", "--window", "10s"},
		"table":    nil,
		"range":    {"--format", "json", "--since", "2026-11-29 00:03", "--until", "2026-11-29 00:09"},
		"incident": {"--format", "json", "--since", "2026-11-29 14:00", "--until", "2026-11-29 14:25"},
	} {
		out, stderr, code := retrylens(t, nil, append([]string{"report", "--db", db}, args...)...)
		if code != 0 {
			t.Fatalf("report %s: exit %d: %s", name, code, stderr)
		}
		got.reports[name] = generatedAt.ReplaceAllString(out, `"generated_at": ""`)
	}
	return got
}
