package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
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

// openLoop is what every piece of advice says of itself (docs/budgets.md).
const openLoop = "The replay is open loop: the recorded answers stay as they were, though fewer retries would also have meant fewer failures. " +
	"A setting's amplification is an upper bound of what it lets through, its lost recoveries a count the lighter load could have made up."

// Advice writes the settings that meet a target (budget --target-amplification): a table
// of each family's setting, then the configuration to paste; TSV with plain numbers, one
// row per setting tried (the curve), the chosen ones marked; or JSON (recommendations).
func Advice(w io.Writer, format Format, as []budget.Advice, target budget.Target) error {
	if len(as) == 0 {
		return nil
	}
	settings := func(p *budget.Point) string {
		var kv []string
		for _, k := range p.Setting.Knobs {
			kv = append(kv, k.Name+" "+k.Value)
		}
		return strings.Join(kv, ", ")
	}
	switch format {
	case FormatHTML:
		return adviceHTML(w, as, target, settings)
	case FormatJSON:
		type point struct {
			Settings      map[string]string `json:"settings"`
			Amplification float64           `json:"amplification"`
			Lost          int               `json:"recovered_lost"`
			Denied        int               `json:"retries_denied"`
		}
		toPoint := func(p budget.Point) point {
			kv := map[string]string{}
			for _, k := range p.Setting.Knobs {
				kv[k.Name] = k.Value
			}
			return point{kv, p.Amplification, p.Lost, p.Denied}
		}
		type rec struct {
			Model     string  `json:"model"`
			System    string  `json:"system"`
			Met       bool    `json:"meets_target"`
			Instances int     `json:"instances"`
			Unnamed   int     `json:"unnamed_requests"`
			Uncoded   int     `json:"uncoded_retries"`
			Floor     *string `json:"fleet_floor"`
			Config    string  `json:"config"`
			point
			Curve []point `json:"curve"`
		}
		out := struct {
			Target struct {
				Amplification *float64 `json:"amplification"`
				MaxLost       *int     `json:"max_lost"`
			} `json:"target"`
			Recorded struct {
				Amplification float64 `json:"amplification"`
				Recovered     int     `json:"recovered"`
			} `json:"recorded"`
			OpenLoop        string `json:"open_loop"`
			Recommendations []rec  `json:"recommendations"`
		}{OpenLoop: openLoop}
		if target.Amplification > 0 {
			out.Target.Amplification = &target.Amplification
		}
		if target.MaxLost >= 0 {
			out.Target.MaxLost = &target.MaxLost
		}
		out.Recorded.Amplification, out.Recorded.Recovered = as[0].Amplification, as[0].Recovered
		for _, a := range as {
			r := rec{Model: a.Family.Name, System: a.Family.System, Met: a.Met, Instances: a.Instances, Unnamed: a.Unnamed, Uncoded: a.Uncoded, Config: a.Family.Config(a.Best.Setting), point: toPoint(*a.Best)}
			if a.Floor != "" {
				r.Floor = &a.Floor
			}
			for _, p := range a.Curve {
				r.Curve = append(r.Curve, toPoint(p))
			}
			out.Recommendations = append(out.Recommendations, r)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case FormatTSV:
		var b strings.Builder
		b.WriteString("model\tchosen\tsettings\tamplification\trecovered lost\tretries denied\tinstances\n")
		for _, a := range as {
			for i := range a.Curve {
				p := &a.Curve[i]
				chosen := settings(p) == settings(a.Best)
				fmt.Fprintf(&b, "%s\t%v\t%s\t%s\t%d\t%d\t%d\n", a.Family.Name, chosen, settings(p),
					strconv.FormatFloat(p.Amplification, 'f', -1, 64), p.Lost, p.Denied, a.Instances)
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(w, "target: %s; recorded: amplification %.2fx, %d requests recovered by a retry.\n%s\n",
		targetText(target), as[0].Amplification, as[0].Recovered, openLoop)
	if note := unnamedNote(as); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
	header := []string{"budget", "setting", "amplification", "recovered lost", "retries denied", "instances"}
	var rows [][]string
	for _, a := range as {
		s := settings(a.Best)
		if !a.Met {
			s = "none meets it; the lowest: " + s
		}
		rows = append(rows, []string{a.Family.Name, s, ratio(&a.Best.Amplification), strconv.Itoa(a.Best.Lost),
			strconv.Itoa(a.Best.Denied), strconv.Itoa(a.Instances)})
	}
	if err := NumberRows(w, header, rows, 2); err != nil {
		return err
	}
	for _, a := range as {
		fmt.Fprintf(w, "\n%s:\n", a.Family.System)
		for _, l := range strings.Split(a.Family.Config(a.Best.Setting), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if a.Floor != "" {
			fmt.Fprintf(w, "  (%s)\n", a.Floor)
		}
		if note := uncodedIf(a); note != "" {
			fmt.Fprintf(w, "  (%s)\n", note)
		}
	}
	return nil
}

//go:embed advice.tmpl
var adviceSrc string

var adviceTmpl = template.Must(template.New("advice").Parse(adviceSrc))

// adviceHTML writes the advice as one self-contained page: the table, then per family the
// curve (recovered requests lost against amplification, a point per setting, the chosen
// one marked, the target a line) beside the configuration to paste.
func adviceHTML(w io.Writer, as []budget.Advice, target budget.Target, settings func(*budget.Point) string) error {
	type tick struct {
		X, Y  float64
		Label string
	}
	type point struct {
		X, Y   float64
		Chosen bool
		Title  string
	}
	type family struct {
		Name, System, Setting, Config, Floor, Uncoded string
		Met                                           bool
		Amplification                                 float64
		Lost, Denied, Instances                       int
		XTicks, YTicks                                []tick
		TargetX                                       float64
		Points                                        []point
	}
	view := struct {
		Target, OpenLoop, Unnamed string
		Recorded                  float64
		Recovered                 int
		Families                  []family
	}{Target: targetText(target), OpenLoop: openLoop, Unnamed: unnamedNote(as), Recorded: as[0].Amplification, Recovered: as[0].Recovered}
	// every family on the same axes: 1x to the recorded amplification, 0 to every recovery
	xMax, yMax := max(as[0].Amplification, target.Amplification, 1.05), max(float64(as[0].Recovered), 1)
	x := func(a float64) float64 { return 50 + 340*(a-1)/(xMax-1) }
	y := func(n float64) float64 { return 220 - 210*n/yMax }
	for _, a := range as {
		f := family{Name: a.Family.Name, System: a.Family.System, Setting: settings(a.Best), Config: a.Family.Config(a.Best.Setting),
			Floor: a.Floor, Met: a.Met, Uncoded: uncodedIf(a), Amplification: a.Best.Amplification, Lost: a.Best.Lost, Denied: a.Best.Denied, Instances: a.Instances}
		for i := 0; i <= 4; i++ {
			av := 1 + (xMax-1)*float64(i)/4
			f.XTicks = append(f.XTicks, tick{X: x(av), Label: fmt.Sprintf("%.2fx", av)})
			nv := yMax * float64(i) / 4
			f.YTicks = append(f.YTicks, tick{Y: y(nv), Label: strconv.FormatFloat(math.Round(nv), 'f', -1, 64)})
		}
		if target.Amplification > 0 {
			f.TargetX = x(target.Amplification)
		}
		for i := range a.Curve {
			p := &a.Curve[i]
			f.Points = append(f.Points, point{X: x(p.Amplification), Y: y(float64(p.Lost)), Chosen: settings(p) == settings(a.Best),
				Title: fmt.Sprintf("%s: %.3fx, %d lost, %d denied", settings(p), p.Amplification, p.Lost, p.Denied)})
		}
		view.Families = append(view.Families, f)
	}
	return adviceTmpl.Execute(w, view)
}

// targetText is the target as the outputs say it.
func targetText(target budget.Target) string {
	var want []string
	if target.Amplification > 0 {
		want = append(want, fmt.Sprintf("amplification at most %.2fx", target.Amplification))
	}
	if target.MaxLost >= 0 {
		want = append(want, fmt.Sprintf("at most %d recovered requests lost", target.MaxLost))
	}
	return strings.Join(want, ", ")
}

// unnamedNote says, where some requests name no client, that they were replayed as one
// instance; "" when every request names one.
func unnamedNote(as []budget.Advice) string {
	for _, a := range as {
		if a.Unnamed > 0 {
			return fmt.Sprintf("%d logical requests name no client (the log has no client address): replayed as one instance, as many as sent them the log cannot tell; --instances N sets the fleet.", a.Unnamed)
		}
	}
	return ""
}

// uncodedNote says how many retries a family costed without the code that sets their cost.
func uncodedNote(a budget.Advice) string {
	return fmt.Sprintf("not judged: %d retries follow a 4xx whose error code the log lacks, costed as transient; a throttle costs less, so the quota may let more through; log x-amzn-ErrorType", a.Uncoded)
}

func uncodedIf(a budget.Advice) string {
	if a.Uncoded == 0 {
		return ""
	}
	return uncodedNote(a)
}
