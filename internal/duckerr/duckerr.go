// Package duckerr tells DuckDB's errors apart where a caller acts on the kind, without
// importing the driver: the packages that only build SQL (query, and budget, report and
// postmortem above it) then link no DuckDB, and their test binaries stay small.
package duckerr

import (
	"errors"
	"strings"
)

// Missing reports whether err, or an error it wraps, is DuckDB's for a table or a column
// that is not there: a catalog or binder error, told by the prefix that DuckDB gives its
// messages and that duckdb-go reads its Error.Type from (TestMissing in package ingest
// checks it against DuckDB's own errors).
func Missing(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if m := err.Error(); strings.HasPrefix(m, "Catalog Error: ") || strings.HasPrefix(m, "Binder Error: ") {
			return true
		}
	}
	return false
}

// OutOfMemory reports whether err is DuckDB's for a statement that needed more memory
// than its limit allowed.
func OutOfMemory(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Out of Memory Error: ")
}
