package ingest

import (
	"context"
	"database/sql"
	"io"
	"os"
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

// rowGroupRows is the rows of one DuckDB row group, the unit its scans share out among
// threads: a table smaller than one is scanned by one thread whatever the setting.
const rowGroupRows = 122_880

// minLineBytes is shorter than an access-log line of any format retrylens reads, so that
// a file's size over it is about the most lines it holds (a file of shorter, malformed
// lines only loads on one thread).
const minLineBytes = 64

// fitThreads gives DuckDB one thread while the database, with about more rows to come,
// stays under a row group, and its default (one per core) otherwise; more < 0 means
// unknown. A report on a small database runs some 50 statements, each too small to
// share, and waking a second thread for each cost 14 % of a 125-row report's CPU and 18 %
// of a 125-line ingest's, for no time saved (bench/README.md, "Settings in force").
func fitThreads(ctx context.Context, db *sql.DB, more int64) error {
	var rows int64
	if more >= 0 {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM requests").Scan(&rows); err != nil {
			return err
		}
	}
	q := "RESET threads"
	if more >= 0 && rows+more < rowGroupRows {
		q = "SET threads = 1"
	}
	_, err := db.ExecContext(ctx, q)
	return err
}

// inputRows bounds the rows that paths can hold from their sizes: -1 (unknown) for
// stdin, anything but a regular file, and gzip, whose size says little.
func inputRows(paths []string) int64 {
	var n int64
	for _, p := range paths {
		if p == "-" {
			return -1
		}
		// Only a regular file is opened: opening a FIFO waits for its writer, and reading
		// a pipe would take its bytes from the load.
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return -1 // for a missing file, the load says why
		}
		f, err := os.Open(p)
		if err != nil {
			return -1
		}
		var magic [2]byte
		_, rerr := io.ReadFull(f, magic[:])
		f.Close()
		if rerr == nil && magic == [2]byte{0x1f, 0x8b} {
			return -1
		}
		n += st.Size()/minLineBytes + 1
	}
	return n
}
