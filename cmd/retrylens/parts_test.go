package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/query"
)

// A log loaded in one go, in 2 parts and in 10 (an ingest each, as a user appending the
// lines written since) gives the same database: every stored count table, row for row,
// and the same JSON report. Half the requests lose their keys, so that the heuristic links
// them; every cut falls inside a request, so each later ingest links old and new rows
// again (the cache's update).
func TestLoadedInParts(t *testing.T) {
	testmain.Long(t, "13 ingests of a generated log")
	t.Parallel()
	b, err := os.ReadFile(generated(t, 3000, 5))
	if err != nil {
		t.Fatal(err)
	}
	keyless := regexp.MustCompile(`rid="[0-9a-f]*[0-7]" ik="[^"]*"`)
	lines := strings.SplitAfter(keyless.ReplaceAllString(string(b), `rid="-" ik="-"`), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	// Each cut falls just before a retry whose request (by key, or by client and URI)
	// began on an earlier line: the request has attempts in both parts.
	req := regexp.MustCompile(`^(\S+) .*"\S+ (\S+) [^"]*".* ra="([-0-9]+)" rr="[^"]*" rid="([^"]*)"`)
	seen, inside := map[string]bool{}, make([]bool, len(lines))
	for i, l := range lines {
		m := req.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d: %q", i+1, l)
		}
		id := m[4]
		if id == "-" {
			id = m[1] + " " + m[2]
		}
		inside[i] = seen[id] && m[3] != "0" && m[3] != "-"
		seen[id] = true
	}
	cuts := func(parts int) []int {
		c := []int{0}
		for p := 1; p < parts; p++ {
			i := max(p*len(lines)/parts, c[len(c)-1]+1)
			for i < len(lines) && !inside[i] {
				i++
			}
			if i == len(lines) {
				t.Fatalf("no retry to cut at after line %d", p*len(lines)/parts)
			}
			c = append(c, i)
		}
		return append(c, len(lines))
	}

	tables := query.StoredTables()
	type loaded struct {
		tables map[string]string
		json   string
	}
	load := func(parts int) loaded {
		dir := t.TempDir()
		db := filepath.Join(dir, "parts.duckdb")
		at := cuts(parts)
		for p := range parts {
			path := filepath.Join(dir, fmt.Sprintf("access.log.%d", p))
			if err := os.WriteFile(path, []byte(strings.Join(lines[at[p]:at[p+1]], "")), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--log-format", "retry", path)
			want := "Report cache rebuilt"
			if p > 0 {
				want = "Report cache updated" // the incremental path, not a rebuild
			}
			if code != 0 || !strings.Contains(stderr, want) {
				t.Fatalf("%d parts, ingest of part %d: exit %d, want %q:\n%s", parts, p, code, want, stderr)
			}
		}
		got := loaded{tables: map[string]string{}}
		conn := openDB(t, db)
		for _, name := range tables {
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
			var lines []string
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
					c[0], c[1] = "", strconv.Itoa(globalLine(t, at, c[0], c[1]))
					if h := strings.Split(c[2], ":"); keyed && len(h) == 4 && h[0] == "h" {
						c[2] = fmt.Sprintf("h:%s:%d", h[1], globalLine(t, at, h[2], h[3]))
					}
				}
				lines = append(lines, strings.Join(c, "\t"))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			slices.Sort(lines)
			got.tables[name] = strings.Join(cols, "\t") + "\n" + strings.Join(lines, "\n")
		}
		conn.Close()
		out, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		got.json = regexp.MustCompile(`"generated_at": "[^"]*"`).ReplaceAllString(out, "")
		return got
	}
	whole := load(1)
	if n := strings.Count(whole.tables["attempts"], "\n"); n < 100 || !strings.Contains(whole.tables["attempts"], "heuristic") {
		t.Fatalf("cache_attempts has %d lines, none linked by the heuristic or too few to compare", n)
	}
	for _, parts := range []int{2, 10} {
		got := load(parts)
		for _, name := range tables {
			if got.tables[name] != whole.tables[name] {
				t.Errorf("%d parts: cache_%s differs from the log loaded in one go:\n%s", parts, name, firstDiff(whole.tables[name], got.tables[name], "one go", "parts"))
			}
		}
		if got.json != whole.json {
			t.Errorf("%d parts: the JSON report differs from the log loaded in one go:\n%s", parts, firstDiff(whole.json, got.json, "one go", "parts"))
		}
	}
}

// globalLine is the place in the whole log of line of file (the ingests' file ids, one per
// part in order), the parts cut at at.
func globalLine(t *testing.T, at []int, file, line string) int {
	t.Helper()
	f, ferr := strconv.Atoi(file)
	l, lerr := strconv.Atoi(line)
	if ferr != nil || lerr != nil || f < 1 || f > len(at)-1 {
		t.Fatalf("file %q line %q: not a place in the parts", file, line)
	}
	return at[f-1] + l
}
