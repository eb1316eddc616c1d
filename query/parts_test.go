package query

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/parse"
)

// Linking in parts builds the tables and answers of linking every row at once, however
// many parts: the samples (reused keys, keys sent from the second attempt on, stuck
// headers, hedges, untagged first attempts, a client's cap) and a generated log with
// keyless lines for the heuristic, each cut into 2 and 10 parts and into a part a row
// (the generated log into 50: each part costs some 40 statements). -short keeps three
// parts of the two hours and of the keys built to cross parts.
func TestLinkedInParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	generated := 4000 // keyless lines for the heuristic; the crossing keys have some too
	logs := []string{"keys-that-lie/access.log", "overlapping-attempts/access.log", "overlapping-attempts/one-millisecond.log",
		"stopped-below-cap/access.log", "untagged-firsts/access.log"}
	if testing.Short() {
		generated, logs = 0, nil // the two hours and the keys built to cross parts
	}
	dbs := map[string]*sql.DB{"incident and quiet hours, generated": loadSamples(t, generated)}
	for _, log := range logs {
		db, err := ingest.Open(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := ingest.Load(ctx, db, []string{filepath.Join("../testdata", log)}, ingest.Options{}); err != nil {
			t.Fatal(err)
		}
		dbs[log] = db
	}
	dbs["keys across parts"] = crossingKeys(t)
	for name, db := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			linkedAlike(t, db)
		})
	}
}

// crossingKeys is a database of lines whose linking crosses link keys, many times over
// (so that some land in different parts whatever the hash): a key reused by two requests,
// whose lines link by client, method and URI with keyless retries; an X-Request-Id carried
// beside two retried Idempotency-Keys (which therefore takes neither), with a line of
// its own; and one carried beside a single key, whose own line joins that request.
func crossingKeys(t *testing.T) *sql.DB {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	line := func(sec int, client string, status, attempt int, rid, ik string) {
		ra := "-"
		if attempt >= 0 {
			ra = strconv.Itoa(attempt)
		}
		fmt.Fprintf(&b, `%s - - [29/Nov/2026:10:%02d:%02d +0000] "GET /api/x/%s HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%s" rr="-" rid="%s" ik="%s" retry_after="-" msec=%d.500`+"\n",
			client, sec/60, sec%60, client, status, status, ra, rid, ik, 1795946400+sec)
	}
	for i := range 20 {
		c, at := fmt.Sprintf("10.8.0.%d", i), i*150
		line(at, c, 503, 0, "undefined", "-")    // reused key
		line(at+1, c, 200, 1, "-", "-")          // keyless retry: joins it by client and URI
		line(at+30, c, 502, 0, "undefined", "-") // the key's second request
		line(at+31, c, 200, 1, "-", "-")
		r := fmt.Sprintf("r%d", i) // beside two retried keys
		line(at+60, c, 503, 0, r, fmt.Sprintf("a%d", i))
		line(at+61, c, 200, 1, r, fmt.Sprintf("a%d", i))
		line(at+62, c, 503, 0, r, fmt.Sprintf("b%d", i))
		line(at+63, c, 200, 1, r, fmt.Sprintf("b%d", i))
		line(at+64, c, 200, 2, r, "-")
		s := fmt.Sprintf("s%d", i) // beside one: sent from the second attempt on
		line(at+90, c, 503, 0, s, fmt.Sprintf("k%d", i))
		line(at+91, c, 503, -1, s, "-")
		line(at+92, c, 200, 1, s, fmt.Sprintf("k%d", i))
	}
	path := filepath.Join(t.TempDir(), "crossing.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := ingest.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f, _ := parse.Preset("retry")
	if _, err := ingest.Load(ctx, db, []string{path}, ingest.Options{Format: f}); err != nil {
		t.Fatal(err)
	}
	return db
}

// linkedAlike checks db's rows linked in parts against linking them at once.
func linkedAlike(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	{
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM requests").Scan(&n); err != nil {
			t.Fatal(err)
		}
		want := linkedIn(t, db, 0)
		if want.parts != 0 {
			t.Fatalf("linked in %d parts without PartRows", want.parts)
		}
		most := 50
		if n < most {
			most = n // a part a row
		}
		ks := []int{2, 10, most}
		if testing.Short() {
			ks = []int{3}
		}
		for _, k := range ks {
			got := linkedIn(t, db, (n+k-1)/k)
			if got.parts < min(k, n)/2 {
				t.Errorf("%d rows a part: linked in %d parts, want about %d", (n+k-1)/k, got.parts, min(k, n))
			}
			if diff := cmp.Diff(want.tables, got.tables); diff != "" {
				t.Errorf("in %d parts: tables differ (-at once +in parts):\n%s", k, diff)
			}
			if diff := cmp.Diff(want.answers, got.answers); diff != "" {
				t.Errorf("in %d parts: answers differ (-at once +in parts):\n%s", k, diff)
			}
		}
	}
}

// linked is what linkedIn read of a Set.
type linked struct {
	parts   int
	tables  map[string][]string // every count table's rows and the chains, sorted
	answers map[string]string   // the default questions' answers, as JSON
}

// linkedIn opens a Set of every row of db linked in parts of partRows (0: at once) and
// reads its tables and the answers a cluster stores.
func linkedIn(t *testing.T, db *sql.DB, partRows int) linked {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, db, Options{NoCache: true, PartRows: partRows})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := linked{parts: s.parts, tables: map[string][]string{}, answers: map[string]string{}}
	for _, name := range cachedTables() {
		_, rows, err := run(s.conn.QueryContext(ctx, "SELECT * FROM "+s.table+"_"+name+" ORDER BY ALL"))
		if err != nil {
			t.Fatal(err)
		}
		for _, vals := range rows {
			l.tables[name] = append(l.tables[name], fmt.Sprint(vals...))
		}
	}
	answers, err := s.answerDefaults(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range answers {
		l.answers[k] = string(v)
	}
	return l
}
