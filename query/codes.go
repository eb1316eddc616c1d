package query

import (
	"fmt"
	"strings"

	"github.com/retrylens/retrylens/sdk"
)

// ThrottleCodes are the error codes (the requests table's error_code: x-amzn-ErrorType,
// grpc-status) that say the client was throttled whatever the status: DynamoDB's 400
// ThrottlingException, S3's 503 SlowDown, gRPC's RESOURCE_EXHAUSTED (sdk.Families). An
// attempt answered one is throttled as one answered a status of --throttle-status is:
// loops, blind retries, and writes the server refused.
var ThrottleCodes = sdk.ThrottleCodes()

// TransientCodes are the error codes the SDKs retry as transient whatever the status (S3's
// 400 RequestTimeout, gRPC's UNAVAILABLE): a retry after one is no retry of a
// non-retryable answer.
var TransientCodes = sdk.TransientCodes()

// codeIn is the SQL of "col is one of codes" (false when col is NULL).
func codeIn(col string, codes []string) string {
	return fmt.Sprintf("coalesce(%s IN (%s), false)", col, quotedList(codes))
}

// quotedList is codes as SQL string literals, comma-separated.
func quotedList(codes []string) string {
	quoted := make([]string, len(codes))
	for i, c := range codes {
		quoted[i] = "'" + strings.ReplaceAll(c, "'", "''") + "'"
	}
	return strings.Join(quoted, ", ")
}

// retriedCodes are the codes the SDKs retry: throttles and transient ones.
func retriedCodes() []string { return append(append([]string{}, ThrottleCodes...), TransientCodes...) }

func throttleCodeSQL(col string) string { return codeIn(col, ThrottleCodes) }

// belowCapSQL is whether a row (its columns named after prefix p) failed as a client
// retries (RetryableFailure, or a code the SDKs retry) and stopped below the cap its
// client stated (amz-sdk-request's max=): a request that ends so was denied a retry its
// policy allowed, by its retry budget or quota, or its deadline (docs/metrics.md,
// "Layers"). Plain SQL that DuckDB and ClickHouse read alike: a NULL is no.
func belowCapSQL(p string) string {
	return fmt.Sprintf("(%[1]smax_attempts > %[1]sattempt + 1 AND (%[2]s OR %[1]serror_code IN (%[3]s)))",
		p, retryableFailureSQL(p+"status"), quotedList(retriedCodes()))
}

// retryableCodeSQL is whether col is a code the SDKs retry: a throttle or a transient one.
func retryableCodeSQL(col string) string {
	return codeIn(col, retriedCodes())
}

// readOperations match the operations (X-Amz-Target, after the service's prefix:
// "DynamoDB_20120810.GetItem") that read, as the SDK families name them (sdk.Families: the
// AWS APIs' Get…, BatchGet…, Query, Scan, Describe…, List…). A POST naming one is a read,
// in no write finding; any other operation, and a POST that names none, is a write.
var readOperations = sdk.Reads()

// readOperationSQL is whether col names a read operation (false when NULL).
func readOperationSQL(col string) string {
	return fmt.Sprintf(`coalesce(regexp_matches(regexp_replace(%s, '^.*\.', ''), '%s'), false)`, col, readOperations)
}
