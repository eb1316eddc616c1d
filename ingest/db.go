// Package ingest loads access logs into a retrylens DuckDB database: it owns the schema,
// the registry of loaded files and the record of rejected lines.
package ingest

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

//go:embed schema.sql
var schema string

// ErrLocked means another process holds the database.
var ErrLocked = errors.New("database is in use by another process")

// Open opens the DuckDB database at path, creating it and its tables if needed. An empty
// path opens a private in-memory database.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return nil, openError(path, err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	return db, nil
}

var lockHolder = regexp.MustCompile(`\(PID (\d+)\)`)

// openError turns DuckDB's lock conflict into a short message naming the holder.
func openError(path string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "Could not set lock on file") || strings.Contains(msg, "Conflicting lock") {
		who := "another process"
		if m := lockHolder.FindStringSubmatch(msg); m != nil {
			who = "process " + m[1]
		}
		return fmt.Errorf("open %s: %w (held by %s; wait for it to finish or use another --db)", path, ErrLocked, who)
	}
	return fmt.Errorf("open database %s: %w", path, err)
}
