package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// Why the check exists: DuckDB 1.x can bring a killed transaction's rows back. A large
// INSERT writes its row groups to the file before the commit, and a SIGKILL during the
// COMMIT can leave a WAL whose replay restores those rows without the rest of the
// transaction (the registry entry). So the rows are never trusted to match the registry
// after a crash: every ingest checks them first (Check, then Repair), and `retrylens
// verify` does the same on demand. See docs/internals.md.

// Damage is what Check found between the registry and the rows. The zero value is a
// database whose rows are exactly what the registry says was loaded.
type Damage struct {
	// Orphans are load ids that have rows or rejects but no registry entry: the rows of a
	// load that never committed.
	Orphans []Orphan
	// Bad are registered loads whose rows differ from what was registered.
	Bad []BadLoad
	// unsummed are sound loads registered without a line sum (by an older retrylens).
	unsummed []int64
}

// Orphan is a load id with no registry entry.
type Orphan struct {
	ID      int64
	Rows    int64 // in requests
	Rejects int64 // rows in reject_counts and rejects
}

// BadLoad is a registered load whose rows are not the ones it registered.
type BadLoad struct {
	ID                  int64
	Path                string
	FirstLine, LastLine int64 // the lines the registry says it covers
	Registered          int64 // rows it registered
	Rows                int64 // rows present under its id
	Lines               int64 // distinct line numbers among them (counted by a full Check, else taken as Rows)
	Outside             bool  // some row's line is outside [FirstLine, LastLine]
	SumDiffers          bool  // its rows' line numbers do not add up to the sum it registered
	RejectsRegistered   int64
	Rejects             int64 // sum of its reject_counts
	// Later are the loads that continue this one's file after it (the next chunks, or
	// its tail loaded by a later run): they go with it, or the registry would resume
	// after them and never load this one's lines again.
	Later []int64

	legacy bool // registered without a line sum
}

// OK reports whether nothing is wrong.
func (d Damage) OK() bool { return len(d.Orphans) == 0 && len(d.Bad) == 0 }

// Problems describes each thing wrong, a line each, for a person.
func (d Damage) Problems() []string {
	var out []string
	for _, o := range d.Orphans {
		out = append(out, fmt.Sprintf("load %d: %d rows and %d reject records with no registry entry (a load that never committed)", o.ID, o.Rows, o.Rejects))
	}
	for _, b := range d.Bad {
		var why []string
		if b.Rows != b.Registered {
			why = append(why, fmt.Sprintf("%d rows where it registered %d", b.Rows, b.Registered))
		}
		if b.Lines != b.Rows {
			why = append(why, fmt.Sprintf("%d lines stored more than once", b.Rows-b.Lines))
		}
		if b.Outside {
			why = append(why, "rows outside its lines")
		}
		if b.SumDiffers && b.Rows == b.Registered && b.Lines == b.Rows {
			why = append(why, "its line numbers are not the ones it loaded")
		}
		if b.Rejects != b.RejectsRegistered {
			why = append(why, fmt.Sprintf("%d rejected lines counted where it registered %d", b.Rejects, b.RejectsRegistered))
		}
		later := ""
		if len(b.Later) > 0 {
			later = fmt.Sprintf("; %d later load(s) of the same file depend on it", len(b.Later))
		}
		out = append(out, fmt.Sprintf("load %d (%s, lines %d-%d): %s%s", b.ID, b.Path, b.FirstLine, b.LastLine, strings.Join(why, ", "), later))
	}
	return out
}

// Summary is one line saying what a repair of d did.
func (d Damage) Summary() string {
	var parts []string
	if n := len(d.Orphans); n > 0 {
		parts = append(parts, fmt.Sprintf("%d unregistered load(s) deleted", n))
	}
	if n := len(d.Bad); n > 0 {
		later := 0
		for _, b := range d.Bad {
			later += len(b.Later)
		}
		s := fmt.Sprintf("%d load(s) whose rows did not match the registry deleted", n)
		if later > 0 {
			s += fmt.Sprintf(" with %d later load(s) of the same files", later)
		}
		parts = append(parts, s+", to load again")
	}
	return strings.Join(parts, "; ")
}

// Found says in one line what is wrong, before any repair.
func (d Damage) Found() string {
	var parts []string
	if n := len(d.Orphans); n > 0 {
		parts = append(parts, fmt.Sprintf("rows under %d load id(s) no load registered", n))
	}
	if n := len(d.Bad); n > 0 {
		parts = append(parts, fmt.Sprintf("%d load(s) whose rows differ from what they registered", n))
	}
	return strings.Join(parts, "; ")
}

// ids is every load id a repair deletes.
func (d Damage) ids() []int64 {
	var ids []int64
	for _, o := range d.Orphans {
		ids = append(ids, o.ID)
	}
	for _, b := range d.Bad {
		ids = append(ids, b.ID)
		ids = append(ids, b.Later...)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Check compares the rows with the registry in one grouped pass over the rows' load id
// and line columns: per load, the rows present against the rows registered, their lines
// within the load's lines and adding up to the sum it registered, and the rejected lines
// counted against those registered; and no rows or rejects under a load id the registry
// does not hold. A line stored twice changes the count or, with another line missing,
// the sum; only lines swapped to keep both (which no crash does) would pass, and full
// counts each load's distinct lines too (about ten times the cost: verify does it).
// Loads registered before line sums were recorded are always counted distinct.
func Check(ctx context.Context, db *sql.DB, full bool) (Damage, error) {
	var d Damage
	rows, err := db.QueryContext(ctx, `
		WITH r AS (SELECT file_id, count(*) AS n, sum(line)::BIGINT AS s, min(line) AS lo, max(line) AS hi
		           FROM requests GROUP BY file_id),
		     j AS (SELECT file_id, sum(n)::BIGINT AS n FROM reject_counts GROUP BY file_id),
		     x AS (SELECT file_id, count(*) AS n FROM rejects GROUP BY file_id),
		     ids AS (SELECT file_id FROM r UNION SELECT file_id FROM j UNION SELECT file_id FROM x UNION SELECT file_id FROM files)
		SELECT ids.file_id, f.file_id IS NOT NULL, coalesce(f.path, ''), coalesce(f.first_line, 0), coalesce(f.lines_end, 0),
		       coalesce(f.rows, 0), coalesce(r.n, 0), coalesce(r.lo < f.first_line OR r.hi > f.lines_end, false),
		       coalesce(r.s, 0) <> coalesce(f.line_sum, r.s, 0), f.file_id IS NOT NULL AND f.line_sum IS NULL,
		       coalesce(f.rejected, 0), coalesce(j.n, 0), coalesce(x.n, 0)
		FROM ids LEFT JOIN files f USING (file_id) LEFT JOIN r USING (file_id) LEFT JOIN j USING (file_id) LEFT JOIN x USING (file_id)
		ORDER BY ids.file_id`)
	if err != nil {
		return d, fmt.Errorf("check the rows against the registry: %w", err)
	}
	defer rows.Close()
	var all []BadLoad
	var distinct []int64 // loads whose distinct lines are counted
	for rows.Next() {
		var b BadLoad
		var registered, legacy bool
		var samples int64
		if err := rows.Scan(&b.ID, &registered, &b.Path, &b.FirstLine, &b.LastLine, &b.Registered, &b.Rows, &b.Outside,
			&b.SumDiffers, &legacy, &b.RejectsRegistered, &b.Rejects, &samples); err != nil {
			return d, err
		}
		if !registered {
			d.Orphans = append(d.Orphans, Orphan{ID: b.ID, Rows: b.Rows, Rejects: b.Rejects + samples})
			continue
		}
		b.Lines = b.Rows
		if full || legacy {
			distinct = append(distinct, b.ID)
		}
		b.legacy = legacy
		all = append(all, b)
	}
	if err := rows.Err(); err != nil {
		return d, err
	}
	if len(distinct) > 0 {
		lines, err := distinctLines(ctx, db, distinct, full)
		if err != nil {
			return d, err
		}
		for i := range all {
			if n, ok := lines[all[i].ID]; ok {
				all[i].Lines = n
			}
		}
	}
	for _, b := range all {
		if b.Rows != b.Registered || b.Lines != b.Rows || b.Outside || b.SumDiffers || b.Rejects != b.RejectsRegistered {
			d.Bad = append(d.Bad, b)
		} else if b.legacy {
			d.unsummed = append(d.unsummed, b.ID)
		}
	}
	if len(d.Bad) == 0 {
		return d, nil
	}
	return d, laterLoads(ctx, db, d.Bad)
}

// distinctLines counts the distinct line numbers of the given loads (all of them when
// every is set).
func distinctLines(ctx context.Context, db *sql.DB, ids []int64, every bool) (map[int64]int64, error) {
	where := ""
	if !every {
		where = " WHERE file_id IN " + idList(ids)
	}
	rows, err := db.QueryContext(ctx, "SELECT file_id, count(DISTINCT line) FROM requests"+where+" GROUP BY file_id")
	if err != nil {
		return nil, fmt.Errorf("count distinct lines: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// fillLineSums records the line sums of sound loads registered before line sums were,
// so that later checks need not count their distinct lines.
func fillLineSums(ctx context.Context, db *sql.DB, ids []int64) error {
	_, err := db.ExecContext(ctx, `UPDATE files SET line_sum = s.sum FROM
		(SELECT file_id, sum(line)::BIGINT AS sum FROM requests WHERE file_id IN `+idList(ids)+` GROUP BY file_id) s
		WHERE files.file_id = s.file_id AND files.line_sum IS NULL`)
	return err
}

func idList(ids []int64) string {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = fmt.Sprint(id)
	}
	return "(" + strings.Join(list, ", ") + ")"
}

// ReadAll reads every column of every table of the database back, so that DuckDB checks
// each block's checksum: a damaged file fails here (see Damaged).
func ReadAll(ctx context.Context, db *sql.DB) error {
	for _, t := range []string{"files", "requests", "reject_counts", "rejects"} {
		rows, err := db.QueryContext(ctx, "SELECT count(*), sum(hash(COLUMNS(*))) FROM "+t)
		if err != nil {
			return fmt.Errorf("read %s: %w", t, err)
		}
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", t, err)
		}
	}
	return nil
}

// laterLoads fills each bad load's Later: the loads that start where it ended, at the
// next line, and were made after it, and so on (a chunk's next chunk, or the tail a
// later run loaded). An unrelated file that happens to match goes too: it loads again.
func laterLoads(ctx context.Context, db *sql.DB, bad []BadLoad) error {
	rows, err := db.QueryContext(ctx, "SELECT file_id, offset_bytes, bytes, first_line, lines_end FROM files ORDER BY file_id")
	if err != nil {
		return err
	}
	defer rows.Close()
	var all []registryLoad
	for rows.Next() {
		var l registryLoad
		if err := rows.Scan(&l.id, &l.offset, &l.bytes, &l.first, &l.last); err != nil {
			return err
		}
		all = append(all, l)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	markLater(all, bad)
	return nil
}

// registryLoad is where a registered load lies in its file.
type registryLoad struct{ id, offset, bytes, first, last int64 }

// markLater fills each bad load's Later from every registered load, in id order: the loads
// that start where it (or one of them) ended.
func markLater(all []registryLoad, bad []BadLoad) {
	byID := map[int64]registryLoad{}
	for _, l := range all {
		byID[l.id] = l
	}
	for i := range bad {
		seen := map[int64]bool{bad[i].ID: true}
		todo := []registryLoad{byID[bad[i].ID]}
		for len(todo) > 0 {
			a := todo[0]
			todo = todo[1:]
			for _, b := range all {
				if b.id > a.id && !seen[b.id] && b.offset == a.bytes && b.first == a.last+1 {
					seen[b.id] = true
					bad[i].Later = append(bad[i].Later, b.id)
					todo = append(todo, b)
				}
			}
		}
	}
}

// Repair deletes, in one transaction, what d names: the rows and rejects of orphan load
// ids, and every bad load with the loads after it, registry entries included, so that
// the next ingest of their files loads those lines again, once. It returns how many rows
// it deleted.
func Repair(ctx context.Context, db *sql.DB, d Damage) (int64, error) {
	ids := d.ids()
	if len(ids) == 0 {
		return 0, nil
	}
	in := idList(ids)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var deleted int64
	for _, t := range []string{"requests", "reject_counts", "rejects", "files"} {
		res, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE file_id IN "+in)
		if err != nil {
			return 0, fmt.Errorf("repair %s: %w", t, err)
		}
		if t == "requests" {
			if deleted, err = res.RowsAffected(); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("repair: %w", err)
	}
	return deleted, nil
}
