package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/olekukonko/tablewriter/tw"
	"github.com/retrylens/retrylens/judge"
)

// column is one metric column of every table the report writes, the one place a metric
// is named for output: the table, Markdown and HTML show the columns with a header, JSON
// carries every column by its key, CSV and TSV those marked csv. Adding a metric to the
// output is one line here.
type column struct {
	key    string                     // JSON key, CSV and TSV header (docs/json.md)
	header string                     // the header people read; "" for the machine formats only
	csv    bool                       // a column of CSV and TSV
	drop   int                        // the order in which the terminal table leaves it out to fit (1 first); 0 never
	value  func(judge.Metrics) any    // int64, *float64 (nil: no denominator) or string
	show   func(judge.Metrics) string // the cell people read; nil: value as it is
}

var columns = withFigures([]column{
	{key: "requests", header: "requests", csv: true, drop: 9, value: func(m judge.Metrics) any { return m.Requests }},
	{key: "untagged", header: "untagged", csv: true, drop: 1, value: func(m judge.Metrics) any { return m.Untagged }},
	{key: "inferred", csv: true, value: func(m judge.Metrics) any { return m.Inferred }},
	{key: "first_attempts", header: "first", csv: true, drop: 8, value: func(m judge.Metrics) any { return m.FirstAttempts }},
	{key: "retries", header: "retries", csv: true, drop: 7, value: func(m judge.Metrics) any { return m.Retries }},
	{key: "amplification", header: "amplification", csv: true, value: func(m judge.Metrics) any { return m.Amplification },
		show: func(m judge.Metrics) string { return ratio(m.Amplification) }},
	{key: "retry_rate", header: "retry rate", csv: true, value: func(m judge.Metrics) any { return m.RetryRate },
		show: func(m judge.Metrics) string { return pct(m.RetryRate) }},
	{key: "retry_success_rate", header: "retry success", csv: true, value: func(m judge.Metrics) any { return m.RetrySuccessRate },
		show: func(m judge.Metrics) string { return pct(m.RetrySuccessRate) }},
	{key: "recovered", header: "recovered", csv: true, drop: 6, value: func(m judge.Metrics) any { return m.Recovered }},
	{key: "exhausted", header: "exhausted", csv: true, drop: 5, value: func(m judge.Metrics) any { return m.Exhausted }},
	{key: "extra_load", csv: true, value: func(m judge.Metrics) any { return m.ExtraLoad }},
	{key: "effective_success", csv: true, value: func(m judge.Metrics) any { return m.EffectiveSuccess }},
	{key: "actual_success", csv: true, value: func(m judge.Metrics) any { return m.ActualSuccess }},
	{key: "status_5xx", header: "5xx (first+retry)", drop: 4, value: func(m judge.Metrics) any { return m.Status5xx.Total() },
		show: func(m judge.Metrics) string { return split(m.Status5xx) }},
	{key: "status_5xx_first", csv: true, value: func(m judge.Metrics) any { return m.Status5xx.First }},
	{key: "status_5xx_retry", csv: true, value: func(m judge.Metrics) any { return m.Status5xx.Retry }},
	{key: "status_429", header: "429 (first+retry)", drop: 3, value: func(m judge.Metrics) any { return m.Status429.Total() },
		show: func(m judge.Metrics) string { return split(m.Status429) }},
	{key: "status_429_first", csv: true, value: func(m judge.Metrics) any { return m.Status429.First }},
	{key: "status_429_retry", csv: true, value: func(m judge.Metrics) any { return m.Status429.Retry }},
	{key: "abandoned", header: "abandoned", drop: 2, value: func(m judge.Metrics) any { return m.Abandoned.Total() },
		show: func(m judge.Metrics) string { return split(m.Abandoned) }},
	{key: "abandoned_first", csv: true, value: func(m judge.Metrics) any { return m.Abandoned.First }},
	{key: "abandoned_retry", csv: true, value: func(m judge.Metrics) any { return m.Abandoned.Retry }},
	{key: "cancelled", value: func(m judge.Metrics) any { return m.Cancelled.Total() }},
	{key: "cancelled_first", csv: true, value: func(m judge.Metrics) any { return m.Cancelled.First }},
	{key: "cancelled_retry", csv: true, value: func(m judge.Metrics) any { return m.Cancelled.Retry }},
	{key: "status_499", value: func(m judge.Metrics) any { return m.Status499.Total() }},
	{key: "status_499_first", csv: true, value: func(m judge.Metrics) any { return m.Status499.First }},
	{key: "status_499_retry", csv: true, value: func(m judge.Metrics) any { return m.Status499.Retry }},
	{key: "proxy_amplification", value: func(m judge.Metrics) any { return m.ProxyAmplification }},
	{key: "upstream_load", value: func(m judge.Metrics) any { return m.UpstreamLoad }},
	{key: verdictKey, header: "verdict", csv: true, value: func(m judge.Metrics) any { return m.Verdict }},
	// why a row is fuelling: the alert rules that fired in its own minutes
	{key: "alerts", value: func(m judge.Metrics) any { return orEmptyList(m.Fired) }},
})

// withFigures adds, before the verdict, a JSON column for every figure of judge.Figures
// that cs does not show: a new figure reaches the JSON with its one catalogue line.
func withFigures(cs []column) []column {
	i := slices.IndexFunc(cs, func(c column) bool { return c.key == verdictKey })
	var add []column
	for _, f := range judge.Figures {
		if !slices.ContainsFunc(cs, func(c column) bool { return c.key == f.Key }) {
			key := f.Key
			add = append(add, column{key: key, value: func(m judge.Metrics) any { return m.Figure(key) }})
		}
	}
	return slices.Insert(cs, i, add...)
}

const verdictKey = "verdict"

// shown are the columns with a header, in order.
var shown = func() []column {
	var cs []column
	for _, c := range columns {
		if c.header != "" {
			cs = append(cs, c)
		}
	}
	return cs
}()

// header is the tables' header after their label column.
func header(label string) []string {
	h := []string{label}
	for _, c := range shown {
		h = append(h, c.header)
	}
	return h
}

// cells are a row of the tables people read: the label, then each shown column.
func cells(label string, m judge.Metrics) []string {
	row := []string{label}
	for _, c := range shown {
		if c.show != nil {
			row = append(row, c.show(m))
		} else {
			row = append(row, plain(c.value(m)))
		}
	}
	return row
}

// columnAlign puts the label and the verdict left, numbers right.
var columnAlign = func() []tw.Align {
	align := []tw.Align{tw.AlignLeft}
	for _, c := range shown {
		if c.key == verdictKey {
			align = append(align, tw.AlignLeft)
		} else {
			align = append(align, tw.AlignRight)
		}
	}
	return align
}()

// dropOrder is the order in which the terminal table leaves columns out to fit the
// terminal (--wide keeps them all), as indexes into header: first the counts that other
// columns sum up or that matter least during an incident, last the raw counts; the label,
// amplification, retry rate, retry success and the verdict always stay.
var dropOrder = func() []int {
	var order []int
	for i, c := range shown {
		if c.drop > 0 {
			order = append(order, i+1)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return shown[a-1].drop - shown[b-1].drop })
	return order
}()

// machineHeader is CSV's and TSV's header of the metric columns.
var machineHeader = func() []string {
	var h []string
	for _, c := range columns {
		if c.csv {
			h = append(h, c.key)
		}
	}
	return h
}()

// machineCells are the metric cells of a CSV or TSV row: counts, fractions as they are
// (empty without a denominator), the verdict.
func machineCells(m judge.Metrics) []string {
	var row []string
	for _, c := range columns {
		if c.csv {
			row = append(row, plain(c.value(m)))
		}
	}
	return row
}

func orEmptyList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// plain is a column's value as text: a fraction in full, "" for nil.
func plain(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case *float64:
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	case string:
		return v
	}
	panic("column value of an unknown type")
}

// object is a JSON object that keeps its members in order.
type object []member

type member struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// metricsJSON is m as the JSON report writes it, after the members given first: every
// column by its key.
func metricsJSON(m judge.Metrics, first ...member) object {
	o := append(object{}, first...)
	for _, c := range columns {
		o = append(o, member{c.key, c.value(m)})
	}
	return o
}
