package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrylens/retrylens/budget"
)

// Budget writes budget replays: a table per model (and per window when they have
// windows), as TSV with plain numbers and RFC 3339 times, or as JSON.
func Budget(w io.Writer, format Format, rs []budget.Result) error {
	if format == FormatJSON {
		type win struct {
			Start         string `json:"start"`
			FirstAttempts int    `json:"first_attempts"`
			Retries       int    `json:"retries"`
			Allowed       int    `json:"allowed"`
			Denied        int    `json:"denied"`
		}
		type row struct {
			Model              string   `json:"model"`
			FirstAttempts      int      `json:"first_attempts"`
			Retries            int      `json:"retries"`
			Allowed            int      `json:"allowed"`
			Denied             int      `json:"denied"`
			Amplification      *float64 `json:"amplification"` // null without first attempts
			AmplificationAfter *float64 `json:"amplification_after"`
			Recovered          int      `json:"recovered"`
			LostRecoveries     int      `json:"lost_recoveries"`
			Windows            []win    `json:"windows,omitempty"`
		}
		out := make([]row, 0, len(rs))
		for _, r := range rs {
			var ws []win
			for _, w := range r.Windows {
				ws = append(ws, win{w.Start.UTC().Format(time.RFC3339), w.FirstAttempts, w.Retries, w.Allowed, w.Denied})
			}
			amp, after := amplifications(r)
			out = append(out, row{r.Model, r.FirstAttempts, r.Retries, r.Allowed, r.Denied, amp, after, r.Recovered, r.LostRecoveries, ws})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	// TSV carries plain numbers and RFC 3339 times, the table what report's shows: 1.52x,
	// "-" where there is no first attempt to divide by.
	tsv := format == FormatTSV
	amp := func(p *float64) string {
		switch {
		case tsv && p == nil:
			return ""
		case tsv:
			return strconv.FormatFloat(*p, 'f', -1, 64)
		}
		return ratio(p)
	}
	header := []string{"model", "first attempts", "retries", "allowed", "denied", "amplification", "with budget", "recovered", "lost recoveries"}
	var rows [][]string
	for _, r := range rs {
		a, after := amplifications(r)
		rows = append(rows, []string{r.Model, strconv.Itoa(r.FirstAttempts), strconv.Itoa(r.Retries), strconv.Itoa(r.Allowed),
			strconv.Itoa(r.Denied), amp(a), amp(after), strconv.Itoa(r.Recovered), strconv.Itoa(r.LostRecoveries)})
	}
	// Per window, model by model, when asked for.
	wheader := []string{"model", "window", "first attempts", "retries", "allowed", "denied"}
	var wrows [][]string
	for _, r := range rs {
		for _, w := range r.Windows {
			start := w.Start.UTC().Format("2006-01-02 15:04:05")
			if tsv {
				start = w.Start.UTC().Format(time.RFC3339)
			}
			wrows = append(wrows, []string{r.Model, start, strconv.Itoa(w.FirstAttempts),
				strconv.Itoa(w.Retries), strconv.Itoa(w.Allowed), strconv.Itoa(w.Denied)})
		}
	}
	if tsv {
		var b strings.Builder
		for _, t := range []struct {
			h    []string
			rows [][]string
		}{{header, rows}, {wheader, wrows}} {
			if len(t.rows) == 0 {
				continue
			}
			b.WriteString(strings.Join(t.h, "\t") + "\n")
			for _, r := range t.rows {
				b.WriteString(strings.Join(r, "\t") + "\n")
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if err := NumberRows(w, header, rows, 1); err != nil || len(wrows) == 0 {
		return err
	}
	fmt.Fprintln(w, "per window (UTC):")
	return NumberRows(w, wheader, wrows, 2)
}

// amplifications are a result's amplification as recorded and with the budget, nil
// without first attempts (as report shows them).
func amplifications(r budget.Result) (recorded, after *float64) {
	if r.FirstAttempts == 0 {
		return nil, nil
	}
	return &r.Amplification, &r.AmplificationAfter
}
