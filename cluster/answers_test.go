package cluster

import (
	"bytes"
	"context"
	"testing"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/internal/duckerr"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// The loader's answers are asked within a memory limit; when they do not fit, what the
// first attempt stored is undone and they are asked again without the limit, and come
// out as the rows give them.
func TestAnswerWithinOutOfMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := ingest.Open(ctx, t.TempDir()+"/work.duckdb")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	f, _ := parse.Preset("retry")
	r, _ := ingest.NewRouter(nil)
	if _, err := ingest.Load(ctx, db, []string{"../testdata/incident-hour/access.log"}, ingest.Options{Format: f, Router: r}); err != nil {
		t.Fatal(err)
	}
	o := query.Options{MaxGap: query.DefaultMaxGap, NoCache: true}
	want, err := query.Answer(ctx, db, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "SET memory_limit = '4MB'"); err != nil {
		t.Fatal(err)
	}
	if _, err := query.Answer(ctx, db, o, nil); !duckerr.OutOfMemory(err) {
		t.Fatalf("answers in 4MB: %v, want DuckDB out of memory (the test needs answers that do not fit)", err)
	}
	again, cut := 0, 0
	got, err := answerWithin(ctx, db, o, func() error { again++; cut = 0; return nil }, func(query.CutTable, query.CutRows) error { cut++; return nil })
	if err != nil {
		t.Fatalf("answerWithin: %v", err)
	}
	if again != 1 || cut != len(query.CutTables()) {
		t.Errorf("undone %d times, then %d tables cut; want once, then %d", again, cut, len(query.CutTables()))
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s: the answer after the retry differs", name)
		}
	}
}
