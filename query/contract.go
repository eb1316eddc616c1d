package query

import (
	"reflect"
	"strings"
	"time"
)

// The count tables: the contract between a report's two stages (docs/internals.md).
// Stage one, per engine, turns the rows of a range into these tables (prepare.sql for
// DuckDB, as temporary tables for a range and as the stored cache for the whole
// database); stage two (metrics.sql, logical.sql, linking.sql, loops.sql, findings.sql,
// backoff.sql, gaps.sql, attempt_counts.sql, and Go over their
// counts) computes every figure from them and from nothing else.
//
// Each type below is one row of one table: its fields, in order, are the table's columns
// (the `col` tag names the column; "sum" marks a count that adds up across rows with the
// same keys, which is how windows, groups and the cache's update combine them). Types are
// plain SQL types any engine has: integers, floats, text, booleans, timestamps (UTC).
// TestContract checks that what prepare.sql builds has exactly these columns.

// TimeCount is a row of the time table: the rows of one time bucket (a minute in the
// stored cache; see Set.Windows for finer buckets) with one status, attempt number and
// way of linking. The summary, the windows, the alerts' minutes and incidents read it.
type TimeCount struct {
	Start     time.Time `col:"ts"`        // the bucket's start; NULL for rows without a time
	Status    *int16    `col:"status"`    // NULL when the line had none
	Attempt   *int32    `col:"attempt"`   // logged or inferred; NULL when untagged
	Inferred  bool      `col:"inferred"`  // the attempt number was inferred (--infer-attempts)
	Strong    bool      `col:"strong"`    // linked by a key the client sent
	LinkedBy  *string   `col:"linked_by"` // idempotency_key, invocation_id, request_id, heuristic, inferred
	Cancelled bool      `col:"cancelled"` // abandoned because another attempt of its request won (docs/metrics.md)
	N         int64     `col:"n,sum"`     // rows
	Proxied   int64     `col:"proxied,sum"`
	Tries     int64     `col:"tries,sum"`      // the gateway's own upstream tries of the proxied rows
	GWRetried int64     `col:"gw_retried,sum"` // the proxied rows the gateway tried more than once
	BelowCap  int64     `col:"below_cap,sum"`  // failed retryably below their client's stated cap (belowCapSQL)
	Uncoded   int64     `col:"uncoded,sum"`    // stopped below that cap on an answer whose code the log lacks (uncodedSQL)
}

// The edges table has the time table's rows (TimeCount), per minute, for the context
// around a --since/--until range (the rows before and after it that link its requests):
// alerts read its minutes with the range's, so that one that crosses a bound is found.
// It is empty when the range is every row.

// GroupCount is a row of the groups table: the rows of one minute with one value of every
// --by grouping's columns. The groups' figures add up its minutes; their verdicts come
// from the alerts on each group's minutes.
type GroupCount struct {
	Bucket            // the minute and the grouping columns
	Inferred  bool    `col:"inferred"`
	Strong    bool    `col:"strong"`
	LinkedBy  *string `col:"linked_by"`
	Cancelled bool    `col:"cancelled"`
	N         int64   `col:"n,sum"`
	Proxied   int64   `col:"proxied,sum"`
	Tries     int64   `col:"tries,sum"`
	GWRetried int64   `col:"gw_retried,sum"`
	BelowCap  int64   `col:"below_cap,sum"`
	Uncoded   int64   `col:"uncoded,sum"`
}

// Bucket is a time bucket and the grouping columns of an attempt: what the groups table
// counts rows by (a minute), and the logical and firsts tables requests by (for the
// logical table, the request's first attempt).
type Bucket struct {
	Start        time.Time `col:"ts"`
	Method       *string   `col:"method"`
	Route        *string   `col:"route"`
	Host         *string   `col:"host"`
	UpstreamAddr *string   `col:"upstream_addr"`
	Status       *int16    `col:"status"`
	Attempt      *int32    `col:"attempt"` // 0 for a first attempt, unless it was not logged
}

// LogicalCount is a row of the logical table: the logical requests of the attempts table
// whose first attempt fell in one bucket.
type LogicalCount struct {
	Bucket
	Recovered int64 `col:"recovered,sum"` // first attempt not 2xx, a later one 2xx
	Exhausted int64 `col:"exhausted,sum"` // retried, never 2xx
	Logical   int64 `col:"logical,sum"`
	FinalOK   int64 `col:"final_ok,sum"` // final attempt 2xx
	Denied    int64 `col:"denied,sum"`   // exhausted, but the last attempt below its client's stated cap (belowCapSQL)
}

// FirstCount is a row of the firsts table: the strong-keyed first attempts (attempt 0)
// of requests in the attempts table, by their own bucket. The time table's strong first
// attempts less these are the requests that never retried.
type FirstCount struct {
	Bucket
	Firsts   int64 `col:"firsts,sum"`
	FirstsOK int64 `col:"firsts_ok,sum"`
	// those that failed below their client's stated cap (belowCapSQL): the time table's
	// such strong first attempts less these are the requests denied their first retry
	FirstsDenied int64 `col:"firsts_denied,sum"`
}

// AttemptRow is a row of the attempts table: one attempt of a logical request that has
// a retry (or was linked by the heuristic or inference), with what the previous attempt
// and the first got. Loops, findings, the backoff profile and the gap histograms read it.
type AttemptRow struct {
	FileID              int32      `col:"file_id"` // with line: where the attempt was logged
	Line                int64      `col:"line"`
	End                 time.Time  `col:"ts"` // when the gateway finished it
	Started             time.Time  `col:"started"`
	Method              *string    `col:"method"`
	URI                 *string    `col:"uri"`
	Route               *string    `col:"route"`
	Host                *string    `col:"host"`
	UpstreamAddr        *string    `col:"upstream_addr"`
	Status              *int16     `col:"status"`
	UpstreamStatus      *string    `col:"upstream_status"`
	IdempotencyKey      *int64     `col:"idempotency_key"` // the keys' hashes (ingest.KeyHash)
	InvocationID        *int64     `col:"invocation_id"`
	RequestID           *int64     `col:"request_id"`
	RetryAfter          *string    `col:"retry_after"`
	KeyText             *string    `col:"key_text"`     // the line's key as logged; NULL on first attempts
	MaxAttempts         *int16     `col:"max_attempts"` // the client's own cap when its header states it (amz-sdk-request max=)
	ErrorCode           *string    `col:"error_code"`   // the upstream's error code where logged (ThrottleCodes)
	Operation           *string    `col:"operation"`    // the operation named beside the method where logged (X-Amz-Target)
	Attempt             int32      `col:"attempt"`
	Inferred            bool       `col:"inferred"`
	Strong              bool       `col:"strong"`
	Key                 string     `col:"lkey"` // the logical request
	LinkedBy            string     `col:"linked_by"`
	ReusedKey           bool       `col:"reused_key"`  // its key was reused across requests: linked as if it had none
	Renumbered          bool       `col:"renumbered"`  // its attempt number is its place in the request, not the one logged (which repeated)
	After2xx            bool       `col:"after_2xx"`   // linked by the heuristic to a chain whose previous attempt was logged 2xx (a timeout race)
	Hedge               bool       `col:"hedge"`       // started while an earlier attempt was in flight (docs/metrics.md)
	Won                 bool       `col:"won"`         // the request's first 2xx by end time: its outcome
	Cancelled           bool       `col:"cancelled"`   // abandoned because another attempt won
	PrevStatus          *int16     `col:"prev_status"` // the previous attempt's, by attempt number
	PrevEnd             *time.Time `col:"prev_end"`
	PrevStarted         *time.Time `col:"prev_started"`
	PrevRetryAfter      *string    `col:"prev_retry_after"`
	PrevErrorCode       *string    `col:"prev_error_code"`
	PrevRetrySecs       *float64   `col:"prev_retry_secs"` // its Retry-After in seconds
	FirstStatus         *int16     `col:"first_status"`
	FirstUpstreamStatus *string    `col:"first_upstream_status"`
	FirstN              int32      `col:"first_n"`  // the first attempt's number
	FirstTs             time.Time  `col:"first_ts"` // when the first attempt ended: the range the request belongs to
}

// CountTable describes one table of the contract.
type CountTable struct {
	Name  string // after the prefix: a Set's tables are <set>_<name>, the cache's cache_<name>
	Build string // the prepare.sql statement that builds it
	Timed bool   // keyed by a time bucket: built again at a finer grain for sub-minute windows
	// PerRequest tables count logical requests (from the attempts table): a new row can
	// change what an older request counts for. The others count rows, each on its own.
	PerRequest bool
	Keys       []string // the columns its rows are unique by (all but Sums); none for attempts
	Sums       []string // the counts that add up
	Cols       []string // every column, in order

	goTypes []reflect.Type // each column's Go type, for TestContract
}

// CountTables are the contract's tables, in the order stage one builds them.
var CountTables = []CountTable{
	tableOf[AttemptRow]("attempts", "prepare_attempts", false, true),
	tableOf[GroupCount]("groups", "prepare_groups", false, false),
	tableOf[TimeCount]("time", "prepare_time", true, false), // per minute, from the groups table
	tableOf[TimeCount]("edges", "", false, false),           // built with the time table
	tableOf[LogicalCount]("logical", "prepare_logical", true, true),
	tableOf[FirstCount]("firsts", "prepare_firsts", true, true),
}

// buildSteps are the statements that build the count tables that pass keep.
func buildSteps(keep func(CountTable) bool) []string {
	var steps []string
	for _, t := range CountTables {
		if keep(t) && t.Build != "" {
			steps = append(steps, t.Build)
		}
	}
	return steps
}

func tableOf[T any](name, build string, timed, perRequest bool) CountTable {
	t := CountTable{Name: name, Build: build, Timed: timed, PerRequest: perRequest}
	additive := false
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		if f.Anonymous {
			continue // its fields follow, in place
		}
		col, role, _ := strings.Cut(f.Tag.Get("col"), ",")
		t.Cols = append(t.Cols, col)
		t.goTypes = append(t.goTypes, f.Type)
		if role == "sum" {
			additive = true
			t.Sums = append(t.Sums, col)
		} else {
			t.Keys = append(t.Keys, col)
		}
	}
	if !additive {
		t.Keys = nil // rows, not counts
	}
	return t
}
