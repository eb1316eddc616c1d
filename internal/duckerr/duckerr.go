// Package duckerr tells DuckDB's errors apart where a caller acts on the kind.
package duckerr

import (
	"errors"

	"github.com/duckdb/duckdb-go/v2"
)

// Missing reports whether err is DuckDB's for a table or a column that is not there
// (a catalog or binder error).
func Missing(err error) bool {
	var de *duckdb.Error
	return errors.As(err, &de) && (de.Type == duckdb.ErrorTypeCatalog || de.Type == duckdb.ErrorTypeBinder)
}
