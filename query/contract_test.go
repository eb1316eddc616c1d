package query

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrylens/retrylens/internal/duckerr"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/parse"
)

// sqlKind is the kind of value a column of DuckDB's type holds, as the contract names
// them; goKind is the same for a field of a contract type.
func sqlKind(typ string) string {
	switch typ {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UBIGINT":
		return "integer"
	case "DOUBLE", "FLOAT":
		return "float"
	case "VARCHAR":
		return "text"
	case "BOOLEAN":
		return "boolean"
	case "TIMESTAMP":
		return "timestamp"
	}
	return typ
}

func goKind(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "timestamp"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	case t.Kind() == reflect.Float64:
		return "float"
	case t.Kind() == reflect.String:
		return "text"
	case t.Kind() == reflect.Bool:
		return "boolean"
	}
	return t.String()
}

// loadSamples loads the incident and quiet hours and a generated log of generated lines
// (none for 0), with the heuristic's share: a key on every other line only.
func loadSamples(t *testing.T, generated int) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := ingest.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f, _ := parse.Preset("retry")
	r, _ := ingest.NewRouter(nil)
	files := []string{"../testdata/incident-hour/access.log", "../testdata/quiet-hour/access.log"}
	if generated > 0 {
		var buf bytes.Buffer
		if _, err := lab.Generate(&buf, f, generated, 7); err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(buf.String(), "\n")
		for i := 0; i < len(lines); i += 2 {
			lines[i] = keyless.ReplaceAllString(lines[i], `rid="-" ik="-"`)
		}
		// and a request whose retry crosses a minute's bound, with and without a key
		for _, id := range []string{"cross-1", "-"} {
			for a, at := range []struct {
				sec    string
				status int
			}{{"00:00:59", 502}, {"00:01:00", 200}} {
				lines = append(lines, fmt.Sprintf(`10.9.9.9 - - [29/Nov/2026:%s +0000] "GET /api/cross HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="%s" ik="-" retry_after="-" msec=%d.500`+"\n",
					at.sec, at.status, at.status, a, id, 1795910400+59+int64(a)))
			}
		}
		path := filepath.Join(t.TempDir(), "generated.log")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	if _, err := ingest.Load(ctx, db, files, ingest.Options{Format: f, Router: r}); err != nil {
		t.Fatal(err)
	}
	return db
}

var keyless = regexp.MustCompile(`rid="[^"]*" ik="[^"]*"`)

// What stage one builds, for a range and as the stored cache, has exactly the columns of
// the contract's Go types, in order, of the same kinds.
func TestContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := loadSamples(t, 0)
	if _, err := Refresh(ctx, db); err != nil {
		t.Fatal(err)
	}
	set, err := Open(ctx, db, Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for _, prefix := range []string{set.table, cacheName} {
		for _, ct := range CountTables {
			name := prefix + "_" + ct.Name
			rows, err := set.conn.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+name+")")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var col, typ string
				if err := rows.Scan(&col, &typ); err != nil {
					t.Fatal(err)
				}
				got = append(got, col+" "+sqlKind(typ))
			}
			rows.Close()
			var want []string
			for i, col := range ct.Cols {
				want = append(want, col+" "+goKind(ct.goTypes[i]))
			}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Errorf("%s:\n built: %s\n contract: %s", name, strings.Join(got, ", "), strings.Join(want, ", "))
			}
			if prefix != cacheName {
				continue
			}
			// The stored tables are kept in the order ranges cut them by (rowid is their
			// place in storage), so that a range skips the row groups outside it.
			var n, disorder int64
			by := cacheOrder(ct.Name)
			err = set.conn.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (o < p) FROM (SELECT "+by+" AS o, lag("+by+") OVER (ORDER BY rowid) AS p FROM "+name+")").Scan(&n, &disorder)
			if err != nil || disorder > 0 || n == 0 && ct.Name != "edges" {
				t.Errorf("%s: %d of %d rows before the one stored ahead of them by %s (%v)", name, disorder, n, by, err)
			}
		}
	}
}

// The tables built from a range's rows equal the stored tables' part in that range: the
// time table its rows; the tables of logical requests the requests whose first attempt
// is in it, with all their attempts, also when a request has attempts on both sides of a
// bound (the range reads the context around it). So adjacent ranges add up to the whole.
func TestRangeTablesEqualStored(t *testing.T) {
	testmain.Long(t, "every cut of 12,000 lines against the stored tables")
	t.Parallel()
	ctx := context.Background()
	db := loadSamples(t, 12000)
	if _, err := Refresh(ctx, db); err != nil {
		t.Fatal(err)
	}
	var conn *sql.Conn // the Set's: its tables are temporary
	count := func(q string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// differ counts the rows of a and b that the other lacks, as multisets.
	differ := func(a, b string) int64 {
		return count("SELECT (SELECT count(*) FROM (" + a + " EXCEPT ALL " + b + ")) + (SELECT count(*) FROM (" + b + " EXCEPT ALL " + a + "))")
	}
	var first, last time.Time
	if err := db.QueryRowContext(ctx, "SELECT min(ts), max(ts) FROM requests").Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	first, last = first.Truncate(time.Minute), last.Truncate(time.Minute).Add(time.Minute)
	uncut, cut := 0, 0
	// the generated log's first minutes (a retry crosses a minute's bound now and then),
	// then the whole span in hours
	for _, r := range []struct {
		step time.Duration
		n    int
	}{{time.Minute, 4}, {time.Hour, 1000}} {
		for from, i := first, 0; from.Before(last) && i < r.n; from, i = from.Add(r.step), i+1 {
			to := from.Add(r.step)
			set, err := Open(ctx, db, Options{Since: from, Until: to, NoCache: true}) // linked, not cut from the cache
			if err != nil {
				t.Fatal(err)
			}
			conn = set.conn.(*sql.Conn)
			in := fmt.Sprintf("ts >= TIMESTAMP '%s' AND ts < TIMESTAMP '%s'", from.Format(time.DateTime), to.Format(time.DateTime))
			where := func(name string) string {
				return "SELECT * FROM " + cacheName + "_" + name + " WHERE " + in
			}
			if n := differ("SELECT * FROM "+set.table+"_time", where("time")); n != 0 {
				t.Errorf("[%s, %s): time table: %d rows differ from the stored one's", from, to, n)
			}
			// A request is cut when its attempts lie on both sides of a bound.
			if count("SELECT count(*) FROM (SELECT lkey FROM "+cacheName+"_attempts GROUP BY lkey HAVING bool_or("+in+") AND NOT bool_and("+in+"))") == 0 {
				uncut++
			} else {
				cut++
			}
			firstIn := "SELECT * FROM " + cacheName + "_attempts WHERE lkey IN (SELECT lkey FROM " + cacheName + "_attempts GROUP BY lkey" +
				" HAVING arg_min(ts, {'a': attempt, 't': ts, 'f': file_id, 'l': line}) >= TIMESTAMP '" + from.Format(time.DateTime) + "'" +
				" AND arg_min(ts, {'a': attempt, 't': ts, 'f': file_id, 'l': line}) < TIMESTAMP '" + to.Format(time.DateTime) + "')"
			for name, stored := range map[string]string{"attempts": firstIn, "logical": where("logical"), "firsts": where("firsts")} {
				if n := differ("SELECT * FROM "+set.table+"_"+name, stored); n != 0 {
					t.Errorf("[%s, %s): %s table: %d rows differ from the stored one's", from, to, name, n)
				}
			}
			set.Close()
		}
	}
	t.Logf("%d ranges cut no request, %d did", uncut, cut)
	if uncut == 0 || cut == 0 {
		t.Fatalf("%d ranges cut no request and %d did: the test needs both kinds", uncut, cut)
	}
}

// Every count metrics.sql and logical.sql return has its place in the catalogue
// (countColumns), and every place in it is filled by one of them: a count added to the
// SQL alone fails every report, one added to the catalogue alone fails here.
func TestCountCatalogue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set, err := Open(ctx, loadSamples(t, 0), Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	unfilled := map[string]bool{}
	for _, c := range countColumns {
		unfilled[c.col] = true
	}
	for _, file := range []string{"metrics.sql", "logical.sql"} {
		var sc countScan
		rows := 0
		err := set.queryOn(ctx, file, "true", "time", minuteGrain, nil, func(r *sql.Rows) error {
			rows++
			cols, err := r.Columns()
			for _, c := range cols {
				delete(unfilled, c)
			}
			if err != nil {
				return err
			}
			var k any
			var c counts
			return sc.scan(r, &k, &c)
		})
		if err != nil || rows == 0 {
			t.Fatalf("%s: %d rows, %v", file, rows, err)
		}
	}
	if len(unfilled) > 0 {
		t.Errorf("in the catalogue but in no SQL: %v", unfilled)
	}
}

// TestRowCounts: the row counts written once for both engines (counts.go) are the row
// count tables' sums, in order; the counted tables a cluster fills have those tables'
// columns.
func TestRowCounts(t *testing.T) {
	var names []string
	for _, c := range rowCounts {
		names = append(names, c.name)
	}
	for _, name := range []string{"time", "edges", "groups"} {
		if got := CountTableNamed(name).Sums; !slices.Equal(got, names) {
			t.Errorf("%s sums %v, the row counts %v", name, got, names)
		}
	}
	for _, c := range []struct{ ddl, want string }{
		{CountedTime, "CREATE TABLE counted_time (ts TIMESTAMP, in_range BOOLEAN, status SMALLINT, attempt INTEGER, inferred BOOLEAN, strong BOOLEAN, linked_by VARCHAR, cancelled BOOLEAN, n BIGINT, proxied BIGINT, tries BIGINT, gw_retried BIGINT, below_cap BIGINT, uncoded BIGINT)"},
		{CountedGroups, "CREATE TABLE counted_groups (ts TIMESTAMP, method VARCHAR, route VARCHAR, host VARCHAR, upstream_addr VARCHAR, status SMALLINT, attempt INTEGER, inferred BOOLEAN, strong BOOLEAN, linked_by VARCHAR, cancelled BOOLEAN, n BIGINT, proxied BIGINT, tries BIGINT, gw_retried BIGINT, below_cap BIGINT, uncoded BIGINT)"},
	} {
		if c.ddl != c.want {
			t.Errorf("got  %s\nwant %s", c.ddl, c.want)
		}
	}
	for e, want := range map[Engine]string{
		DuckDB: "count(*) AS n, count(upstream_tries) AS proxied, sum(upstream_tries)::BIGINT AS tries, " +
			"count(nullIf(greatest(upstream_tries, 1), 1)) AS gw_retried, count(*) FILTER (WHERE " + belowCapSQL("") + ") AS below_cap, count(*) FILTER (WHERE " + uncodedSQL("") + ") AS uncoded",
		ClickHouse: "toInt64(count()) AS n, toInt64(count(upstream_tries)) AS proxied, sum(toNullable(toInt64(upstream_tries))) AS tries, " +
			"toInt64(count(nullIf(greatest(upstream_tries, 1), 1))) AS gw_retried, toInt64(countIf(ifNull(" + belowCapSQL("") + ", 0))) AS below_cap, toInt64(countIf(ifNull(" + uncodedSQL("") + ", 0))) AS uncoded",
	} {
		if got := RowCounts(e); got != want {
			t.Errorf("engine %d: %s, want %s", e, got, want)
		}
	}
}

// TestRefreshOutOfMemory: a cache build that runs out of the cache's memory is run again
// with DuckDB's default limit, and the cache is there.
func TestRefreshOutOfMemory(t *testing.T) {
	ctx := context.Background()
	db := loadSamples(t, 0)
	db.SetMaxOpenConns(1)
	defer func(m string) { cacheMemory = m }(cacheMemory)
	cacheMemory = "8MB"
	if err := SetCacheMemory(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := refresh(ctx, db, true); !duckerr.OutOfMemory(err) {
		t.Fatalf("a build in %s: %v, want DuckDB out of memory (the test needs a build that does not fit)", cacheMemory, err)
	}
	how, err := RefreshAfterLoad(ctx, db, true)
	if err != nil || how != CacheRebuilt {
		t.Fatalf("RefreshAfterLoad: %q, %v; want the cache rebuilt", how, err)
	}
	if fresh, err := cacheFresh(ctx, db); err != nil || !fresh {
		t.Errorf("the cache after the retry: fresh %v, %v", fresh, err)
	}
}
