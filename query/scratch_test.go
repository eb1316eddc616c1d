package query_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestScratch(t *testing.T) {
	sqlText := os.Getenv("SCRATCH_SQL")
	if sqlText == "" {
		t.Skip()
	}
	db := bench10M(&testing.B{})
	defer db.Close()
	ctx := context.Background()
	conn, _ := db.Conn(ctx)
	for _, q := range strings.Split(sqlText, ";;") {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		t0 := time.Now()
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			out = append(out, fmt.Sprint(vals...))
		}
		rows.Close()
		first := q
		if len(first) > 70 {
			first = first[:70]
		}
		fmt.Printf("%6d ms  %s\n", time.Since(t0).Milliseconds(), strings.ReplaceAll(first, "\n", " "))
		for i, o := range out {
			if i > 40 {
				break
			}
			fmt.Println("   ", o)
		}
	}
}
