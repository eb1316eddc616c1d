package query

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// The row counts, written once for both engines. The row count tables (time, edges,
// groups) keep, per key, these counts of their rows; a DuckDB stage one (prepare.sql's
// rowCounts) and a cluster's shards (package cluster, for the rows no linking changes)
// render them in their own SQL from here, so that a new count is one line here and one
// field of the contract's types (TestRowCounts holds the two to each other).
type rowCount struct {
	name  string
	of    string // the column counted (its non-NULL values) or summed; "" counts rows
	sum   bool
	where string // or the rows this condition holds for (SQL both engines read alike)
}

var rowCounts = []rowCount{
	{name: "n"},                                      // rows
	{name: "proxied", of: "upstream_tries"},          // rows the gateway proxied: it logged its tries
	{name: "tries", of: "upstream_tries", sum: true}, // the upstream tries of those
	// rows the gateway tried more than once: its own retries (greatest ignores NULL in
	// DuckDB, and a NULL tries stays NULL in ClickHouse; either way not counted)
	{name: "gw_retried", of: "nullIf(greatest(upstream_tries, 1), 1)"},
	// rows that failed as a client retries, below the cap their client stated
	{name: "below_cap", where: belowCapSQL("")},
	// rows that stopped below it on an answer the log lacks the code to judge
	{name: "uncoded", where: uncodedSQL("")},
}

// Engine is an SQL dialect stage one is written in.
type Engine int

const (
	DuckDB     Engine = iota
	ClickHouse        // 18.16's, which current releases also run
)

// RowCounts is the select list of the row counts in e's SQL, each a BIGINT (Int64) named
// as the contract's column.
func RowCounts(e Engine) string {
	var sel []string
	for _, c := range rowCounts {
		var x string
		switch {
		case e == DuckDB && c.where != "":
			x = "count(*) FILTER (WHERE " + c.where + ")"
		case c.where != "": // a NULL condition makes 18.16's countIf NULL, not 0
			x = "toInt64(countIf(ifNull(" + c.where + ", 0)))"
		case e == DuckDB && c.of == "":
			x = "count(*)"
		case e == DuckDB && c.sum:
			x = "sum(" + c.of + ")::BIGINT"
		case e == DuckDB:
			x = "count(" + c.of + ")"
		case c.of == "":
			x = "toInt64(count())"
		case c.sum: // NULL, as DuckDB's, over no value
			x = "sum(toNullable(toInt64(" + c.of + ")))"
		default:
			x = "toInt64(count(" + c.of + "))"
		}
		sel = append(sel, x+" AS "+c.name)
	}
	return strings.Join(sel, ", ")
}

// rowSums is the select list that sums a row count table's counts over its other keys.
func rowSums() string {
	var sel []string
	for _, c := range rowCounts {
		sel = append(sel, "sum("+c.name+")::BIGINT AS "+c.name)
	}
	return strings.Join(sel, ", ")
}

// CountTableNamed is the contract's table of that name.
func CountTableNamed(name string) CountTable {
	i := slices.IndexFunc(CountTables, func(t CountTable) bool { return t.Name == name })
	if i < 0 {
		panic("no count table " + name)
	}
	return CountTables[i]
}

// The tables Options.Counted names, as the Set's database must hold them: the time
// table's columns with whether the row is in the range (the rest is its context), the
// groups table's, and the range's span.
var (
	CountedTime   = countedTable("counted_time", CountTableNamed("time"), "in_range")
	CountedGroups = countedTable("counted_groups", CountTableNamed("groups"), "")
	CountedSpan   = `CREATE TABLE counted_span (first TIMESTAMP, last TIMESTAMP)`
)

// countedTable is the DDL of a table of t's columns, with a BOOLEAN flag after its first.
func countedTable(name string, t CountTable, flag string) string {
	var cols []string
	for i, c := range t.Cols {
		cols = append(cols, c+" "+sqlType(t.goTypes[i]))
		if i == 0 && flag != "" {
			cols = append(cols, flag+" BOOLEAN")
		}
	}
	return "CREATE TABLE " + name + " (" + strings.Join(cols, ", ") + ")"
}

// sqlType is DuckDB's type for a contract field's Go type.
func sqlType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[time.Time]():
		return "TIMESTAMP"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "BOOLEAN"
	case reflect.Int16:
		return "SMALLINT"
	case reflect.Int32:
		return "INTEGER"
	case reflect.Int64:
		return "BIGINT"
	case reflect.Float64:
		return "DOUBLE"
	case reflect.String:
		return "VARCHAR"
	}
	panic(fmt.Sprintf("no SQL type for %v", t))
}
