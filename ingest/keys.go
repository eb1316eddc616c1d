package ingest

import (
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/cespare/xxhash/v2"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// The keys a request is linked by (X-Request-Id, Idempotency-Key, the invocation id) are
// stored as 64-bit hashes, not text (issue #20): most of them are unique per request, so
// their text was among the columns that cost a load most (DuckDB compressing a million
// distinct strings), and every report hashed it again to join and partition by it. The
// text is kept where it is printed: findings and loops name a request by its key, and a
// request with a retry has the key on its retries' rows (key_text). Two keys collide with
// a chance of about n²/2⁶⁵ (10⁻⁶ for 10M keys): two requests would be linked as one.

// KeyHash is the stored hash of a key's text: xxHash64 of the text as stored (bytes that
// are not UTF-8 escaped, as in key_text), as a signed 64-bit integer.
func KeyHash(key string) int64 { return int64(xxhash.Sum64String(validUTF8(key))) }

// KeyText is the key_text of a line: its strong key as logged (Idempotency-Key, else the
// invocation id, else X-Request-Id), but for first attempts (attempt 0), whose retries
// carry the same key, or none (a request that never retried is never named by its key).
// Lines without the attempt header keep it: --infer-attempts links them by client and URI,
// each with a key of its own.
func KeyText(attempt int, idempotencyKey, invocationID, requestID string) string {
	if attempt == 0 {
		return ""
	}
	for _, k := range []string{idempotencyKey, invocationID, requestID} {
		if k != "" {
			return k
		}
	}
	return ""
}

// KeyTextOf is KeyText of a row's values as a database driver hands them over: the
// attempt an int32 (nil for an untagged line), the keys strings (nil for none).
func KeyTextOf(attempt, idempotencyKey, invocationID, requestID any) string {
	a := -1
	if n, ok := attempt.(int32); ok {
		a = int(n)
	}
	text := func(v any) string { s, _ := v.(string); return s }
	return KeyText(a, text(idempotencyKey), text(invocationID), text(requestID))
}

// keyFunction is the SQL name of KeyHash, for `retrylens query` (find a request by its
// id: WHERE request_id_hash = retrylens_key('…')); keyTextFunction that of KeyText
// (attempt, idempotency_key, invocation_id, request_id), for SQL that stores rows
// from the keys' text (an older database's upgrade).
const (
	keyFunction     = "retrylens_key"
	keyTextFunction = "retrylens_key_text"
)

// registerKey registers retrylens_key(VARCHAR) BIGINT and retrylens_key_text(INTEGER,
// VARCHAR, VARCHAR, VARCHAR) VARCHAR.
func registerKey(conn *sql.Conn) error {
	if err := duckdb.RegisterScalarUDF(conn, keyFunction, keyUDF{typeInfo(duckdb.TYPE_VARCHAR), typeInfo(duckdb.TYPE_BIGINT)}); err != nil {
		return err
	}
	return duckdb.RegisterScalarUDF(conn, keyTextFunction, keyTextUDF{})
}

type keyTextUDF struct{}

func (keyTextUDF) Config() duckdb.ScalarFuncConfig {
	v := typeInfo(duckdb.TYPE_VARCHAR)
	return duckdb.ScalarFuncConfig{
		InputTypeInfos: []duckdb.TypeInfo{typeInfo(duckdb.TYPE_INTEGER), v, v, v},
		ResultTypeInfo: v,
		// a NULL attempt is an untagged line, a NULL key no key
		SpecialNullHandling: true,
	}
}

func (keyTextUDF) Executor() duckdb.ScalarFuncExecutor {
	return duckdb.ScalarFuncExecutor{RowExecutor: func(v []driver.Value) (any, error) {
		if k := KeyTextOf(v[0], v[1], v[2], v[3]); k != "" {
			return k, nil
		}
		return nil, nil
	}}
}

type keyUDF struct{ in, out duckdb.TypeInfo }

func (k keyUDF) Config() duckdb.ScalarFuncConfig {
	return duckdb.ScalarFuncConfig{InputTypeInfos: []duckdb.TypeInfo{k.in}, ResultTypeInfo: k.out}
}

func (k keyUDF) Executor() duckdb.ScalarFuncExecutor {
	return duckdb.ScalarFuncExecutor{RowExecutor: func(v []driver.Value) (any, error) {
		s, ok := v[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a VARCHAR, got %T", keyFunction, v[0])
		}
		return KeyHash(s), nil
	}}
}
