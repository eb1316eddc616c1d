package judge

import "strings"

// Figure is one ratio of docs/metrics.md over named counts (CountNames): the one place
// it is defined. The report computes it from a slice's counts (Metrics), watch serves the
// counts and its Prometheus rules compute it from them with the same formula
// (promrules.Write), and the docs' tables of figures are checked against this list.
// Adding a figure over existing counts is one line of Figures; the JSON carries it by its
// key, and a column in report/columns.go shows it in the table.
type Figure struct {
	Key string // the JSON key and the recording rule's name
	// Num and Den are sums of counts (CountNames); a name starting with "-" is
	// subtracted. The ratio is nil (JSON null, PromQL NaN) when Den is 0 or less.
	Num, Den []string
	Help     string
	// AboveOne says whether the ratio can exceed 1: amplification always can, and a
	// window's retry rate when first attempts of its retried requests fell before it.
	AboveOne bool
	num, den terms // Num and Den as indices into Counts, found when the package starts
}

// Figures are the ratios every surface shows (docs/metrics.md), each defined here alone:
// the report's JSON carries every one by its key (Metrics.Figure), watch serves its
// numerator and denominator, the Prometheus rules and the docs' table are written from it.
var Figures = []Figure{
	{Key: "amplification", Num: []string{"first_attempts", "retries"}, Den: []string{"first_attempts"}, AboveOne: true,
		Help: "Attempts per first attempt, over lines with an attempt number: 1.0 is healthy, above 1.5 a storm."},
	{Key: "retry_rate", Num: []string{"second_attempts"}, Den: []string{"first_attempts"}, AboveOne: true,
		Help: "The share of requests retried at least once: attempts numbered 1 per attempt numbered 0."},
	{Key: "retry_success_rate", Num: []string{"retries_ok"}, Den: []string{"retries", "-cancelled_retry"},
		Help: "Retries answered 2xx, of retries not cancelled because another attempt of the request won."},
	{Key: "extra_load", Num: []string{"retries"}, Den: []string{"first_attempts", "retries"},
		Help: "The share of attempts that were retries."},
	{Key: "actual_success", Num: []string{"tagged_ok"}, Den: []string{"first_attempts", "retries"},
		Help: "The share of attempts answered 2xx."},
	{Key: "effective_success", Num: []string{"strong_firsts_ok", "-multi_firsts_ok", "final_ok"}, Den: []string{"strong_firsts", "-multi_firsts", "logical"},
		Help: "The share of logical requests whose outcome was 2xx."},
	{Key: "proxy_amplification", Num: []string{"upstream_tries"}, Den: []string{"proxied"}, AboveOne: true,
		Help: "The gateway's own tries upstream per line, over lines that record them."},
}

// term is one count of a sum: its index in Counts and its sign.
type term struct {
	i    int
	sign int64
}

// terms are a sum of counts.
type terms []term

func (ts terms) of(c *Counts) int64 {
	var n int64
	for _, t := range ts {
		n += t.sign * c[t.i]
	}
	return n
}

// The figures' counts are found once, by index: a report computes the figures of every
// group of 100K routes.
func init() {
	for i := range Figures {
		f := &Figures[i]
		f.num, f.den = resolve(f.Key, f.Num), resolve(f.Key, f.Den)
	}
}

func resolve(key string, names []string) terms {
	var ts terms
	for _, n := range names {
		sign := int64(1)
		if rest, ok := strings.CutPrefix(n, "-"); ok {
			n, sign = rest, -1
		}
		i, ok := countIndex[n]
		if !ok {
			panic("judge: figure " + key + " over a count the catalogue lacks: " + n)
		}
		ts = append(ts, term{i, sign})
	}
	return ts
}

// FigureOf returns the figure of key; it panics on a key that is no figure, a
// programming error.
func FigureOf(key string) Figure {
	for _, f := range Figures {
		if f.Key == key {
			return f
		}
	}
	panic("judge: no figure " + key)
}

// Of is the figure over c: nil when its denominator is 0 or less (JSON null).
func (f Figure) Of(c *Counts) *float64 {
	d := f.den.of(c)
	if d <= 0 {
		return nil
	}
	x := float64(f.num.of(c)) / float64(d)
	return &x
}

// Figure returns the figure of key (Figures) over m's counts: nil without a denominator,
// or when key is no figure.
func (m Metrics) Figure(key string) *float64 {
	for _, f := range Figures {
		if f.Key == key {
			return f.Of(&m.Counts)
		}
	}
	return nil
}

// Sums returns the figure's numerator and denominator over c: the figure is num/den when
// den > 0. Surfaces that serve counts (watch) serve these, so that a ratio computed from
// them elsewhere (PromQL) is the report's.
func (f Figure) Sums(c Counts) (num, den int64) { return f.num.of(&c), f.den.of(&c) }

// FiguresMarkdown is the table of Figures that docs/metrics.md carries (checked by
// TestFiguresDoc): each figure's key, formula over the count columns, and meaning.
func FiguresMarkdown() string {
	var b strings.Builder
	b.WriteString("| figure | formula over counts | can pass 1 | what |\n| --- | --- | --- | --- |\n")
	sum := func(names []string) string {
		var parts []string
		for i, n := range names {
			switch {
			case strings.HasPrefix(n, "-"):
				parts = append(parts, "− `"+n[1:]+"`")
			case i > 0:
				parts = append(parts, "+ `"+n+"`")
			default:
				parts = append(parts, "`"+n+"`")
			}
		}
		if len(parts) > 1 {
			return "(" + strings.Join(parts, " ") + ")"
		}
		return parts[0]
	}
	for _, f := range Figures {
		above := "no"
		if f.AboveOne {
			above = "yes"
		}
		b.WriteString("| `" + f.Key + "` | " + sum(f.Num) + " / " + sum(f.Den) + " | " + above + " | " + f.Help + " |\n")
	}
	return b.String()
}
