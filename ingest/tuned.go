package ingest

import (
	"context"
	"database/sql"
	"runtime/debug"
)

// loadSettings are DuckDB's settings for a command-line load (LoadTuned's).
const loadSettings = "SET memory_limit = '128MB'; SET preserve_insertion_order = false"

// LoadTuned is Load with the memory settings of a command-line load (measured in
// bench/README.md): DuckDB's buffers kept at 128 MB, which a load does not need more of;
// rows inserted in no particular order, which halves a chunk's time (every query orders
// what it needs); Go's garbage collector relaxed while the parser churns through 256 KiB
// blocks, under a soft limit in case lines are huge; and the heap handed back to the OS
// afterwards, before the report cache gives DuckDB more memory.
func LoadTuned(ctx context.Context, db *sql.DB, paths []string, opt Options) (Result, error) {
	if _, err := db.ExecContext(ctx, loadSettings); err != nil {
		return Result{}, err
	}
	gc, limit := debug.SetGCPercent(400), debug.SetMemoryLimit(256<<20)
	res, err := Load(ctx, db, paths, opt)
	debug.SetGCPercent(gc)
	debug.SetMemoryLimit(limit)
	debug.FreeOSMemory()
	return res, err
}
