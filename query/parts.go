package query

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Linking in parts: stage one run on one part of the rows at a time, the parts chosen
// from each row's link key alone (prepare.sql, prepare_parts), each part's count tables
// added up and its attempts and chains appended. A request's rows are all in one part,
// so the tables are those of linking every row at once, and stage one's memory is that
// of a part's rows, whatever the whole (a cluster's loader links the rows of every shard:
// docs/scale.md). TestLinkedInParts holds the two equal.

// inParts reports whether s builds its tables in parts, and how many (besides part 0,
// the rows that could link across keys): only for every row with the default linking
// (inference links untagged rows by client, method and URI, whatever their key) and no
// traces (a trace's spans join gateway lines by span), and only when the rows outnumber
// one part.
func (s *Set) inParts(ctx context.Context) (int, error) {
	if s.partRows <= 0 || s.lit.Since != openSince || s.lit.Until != openUntil || s.lit.Infer != "false" {
		return 0, nil
	}
	if layered, err := Layered(ctx, s.conn); err != nil || layered {
		return 0, err
	}
	var n int64
	if err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM requests").Scan(&n); err != nil {
		return 0, err
	}
	parts := int((n + int64(s.partRows) - 1) / int64(s.partRows))
	if parts <= 1 {
		return 0, nil
	}
	return parts, nil
}

// buildInParts is build's stage one in parts (parts besides part 0): every part's
// tables are made under <table>_p<N>, their rows appended to the Set's attempts and
// chain tables and to <table>_all_<name> for the count tables, which are then their sums. The
// Set keeps <table>_lines (its span) and <table>_coarse (findings read it), of every row.
func (s *Set) buildInParts(ctx context.Context, route, method any, parts int, steps []string) error {
	lit := s.lit
	lit.Parts = parts
	if err := prepare(ctx, s.conn, s.table, "TEMP TABLE", lit, []any{route, method},
		[]string{"prepare_params", "prepare_lines", "prepare_keys", "prepare_parts"}); err != nil {
		return err
	}
	part := lit
	part.Coarse = s.table + "_coarse"
	tables := append(slices.Clone(CountTables), CountTable{Name: "chain"})
	for p := 0; p <= parts; p++ {
		name := fmt.Sprintf("%s_p%d", s.table, p)
		part.Whole, part.Part, part.From = s.table, p, ""
		err := prepare(ctx, s.conn, name, "TEMP TABLE", part, nil, []string{"prepare_part"})
		if err == nil {
			part.From = name + "_src"
			err = prepare(ctx, s.conn, name, "TEMP TABLE", part, []any{route, method}, steps)
		}
		if err != nil {
			return fmt.Errorf("part %d of %d: %w", p, parts, err)
		}
		var qs []string
		for _, t := range tables {
			all, from := s.table+"_"+t.Name, name+"_"+t.Name
			if len(t.Keys) > 0 {
				all = s.table + "_all_" + t.Name // summed below
			}
			if p == 0 {
				qs = append(qs, "CREATE TEMP TABLE "+all+" AS SELECT * FROM "+from)
			} else {
				qs = append(qs, "INSERT INTO "+all+" SELECT * FROM "+from)
			}
		}
		if err := execAll(ctx, s.conn, qs...); err != nil {
			return err
		}
		if err := dropTemp(ctx, s.conn, name); err != nil {
			return err
		}
	}
	qs := []string{"DROP TABLE " + s.table + "_part"}
	for _, t := range tables {
		if len(t.Keys) == 0 {
			continue
		}
		sums := make([]string, len(t.Sums))
		for i, c := range t.Sums {
			sums[i] = "sum(" + c + ")::BIGINT AS " + c
		}
		all := s.table + "_all_" + t.Name
		qs = append(qs, "CREATE TEMP TABLE "+s.table+"_"+t.Name+" AS SELECT "+strings.Join(t.Keys, ", ")+", "+strings.Join(sums, ", ")+
			" FROM "+all+" GROUP BY ALL", "DROP TABLE "+all)
	}
	qs = append(qs, s.cancelledFromAttempts())
	return execAll(ctx, s.conn, qs...)
}
