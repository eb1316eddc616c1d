package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Result writes the rows of any query (retrylens query): a table of text cells, TSV, CSV
// or a JSON array of objects. Every text is made safe to show (Clean), CSV's cells to
// open in a spreadsheet (SafeCell); JSON carries the values as they are.
func Result(w io.Writer, format Format, cols []string, rows [][]any) error {
	if format == FormatJSON {
		objs := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			obj := map[string]any{}
			for i, v := range r {
				obj[cols[i]] = v
			}
			objs = append(objs, obj)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(objs)
	}
	safe := Clean
	if format == FormatCSV {
		safe = SafeCell
	}
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = make([]string, len(r))
		for j, v := range r {
			out[i][j] = safe(resultCell(v))
		}
	}
	switch format {
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write(cols)
		cw.WriteAll(out)
		return cw.Error()
	case FormatTSV:
		var b strings.Builder
		b.WriteString(strings.Join(cols, "\t") + "\n")
		for _, r := range out {
			b.WriteString(strings.Join(r, "\t") + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	return Rows(w, cols, out)
}

// resultCell prints a value the way a person reads it.
func resultCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}
