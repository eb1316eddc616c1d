package query

import (
	"fmt"
	"strconv"
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

// aws is the AWS SDKs' family, whose rule the columns only its lines carry select:
// max_attempts (amz-sdk-request's max=) and the invocation id.
var aws = sdk.AWS()

// awsSQL is whether a row (its columns named after prefix p) was sent by an AWS SDK: it
// carries their headers (plain SQL both engines read; NULL is no).
func awsSQL(p string) string {
	return fmt.Sprintf("(%[1]smax_attempts IS NOT NULL OR %[1]sinvocation_id IS NOT NULL)", p)
}

// intList is statuses as an SQL list.
func intList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// belowCapSQL is whether a row (its columns named after prefix p) failed as its client
// retries and stopped below the cap it stated (amz-sdk-request's max=): a request that
// ends so was denied a retry its policy allowed, by its retry budget or quota, or its
// deadline (docs/metrics.md, "Layers"). Only the AWS SDKs state a cap, so their rule
// decides: a status they retry whatever the code, or a throttling or transient code (a
// 429 without one is retried by some SDKs and versions, not by others: uncodedSQL counts
// those as not judged). Plain SQL that DuckDB and ClickHouse read alike: a NULL is no.
func belowCapSQL(p string) string {
	return fmt.Sprintf("(%[1]smax_attempts > %[1]sattempt + 1 AND (%[1]sstatus IN (%[2]s) OR %[1]serror_code IN (%[3]s)))",
		p, intList(aws.RetryStatuses), quotedList(retriedCodes()))
}

// uncodedSQL is whether a row stopped below its stated cap on a status the AWS SDKs retry
// or not by the error code alone, without the code in the log: whether its SDK was
// denied a retry there, or was right not to retry, the log cannot tell.
func uncodedSQL(p string) string {
	return fmt.Sprintf("(%[1]smax_attempts > %[1]sattempt + 1 AND %[1]sstatus IN (%[2]s) AND %[1]serror_code IS NULL)",
		p, intList(aws.CodeStatuses))
}

// codeUnknownSQL is whether a retry after the row's previous attempt cannot be judged: an
// AWS SDK's, after a status its SDK retries by the code alone, the code not in the log.
func codeUnknownSQL() string {
	return fmt.Sprintf("(%s AND prev_status IN (%s) AND prev_error_code IS NULL)", awsSQL(""), intList(aws.CodeStatuses))
}

// operationUnknownSQL is whether a row's method does not say whether it writes: an AWS
// SDK's POST that names no operation in the log (X-Amz-Target: DynamoDB's reads are POSTs).
func operationUnknownSQL() string {
	return fmt.Sprintf("(%s AND upper(method) = 'POST' AND operation IS NULL)", awsSQL(""))
}

// retryableCodeSQL is whether col is a code the SDKs retry: a throttle or a transient one.
func retryableCodeSQL(col string) string {
	return codeIn(col, retriedCodes())
}

// readOperations match the operations (X-Amz-Target after the service's prefix:
// "DynamoDB_20120810.GetItem"; a gRPC method after its service: "shop.Orders/Get") that
// read, as the SDK families name them (sdk.Families: the AWS APIs' Get…, BatchGet…, Query,
// Scan, Describe…, List…; gRPC's standard methods). A POST naming one is a read, in no
// write finding; any other operation is a write, and an AWS SDK's POST that names none is
// not judged (operationUnknownSQL).
var readOperations = sdk.Reads()

// readOperationSQL is whether col names a read operation (false when NULL).
func readOperationSQL(col string) string {
	return fmt.Sprintf(`coalesce(regexp_matches(regexp_replace(%s, '^.*[./]', ''), '%s'), false)`, col, readOperations)
}

// unjudgedPrefix marks a finding's kind on an attempt the log lacks a field to judge
// (findings.sql): such findings are counted apart (Set.NotJudged), never claimed.
const unjudgedPrefix = "unjudged:"

// unjudgedSQL is the kind (an SQL string) of a finding, marked unjudged where unknown holds.
func unjudgedSQL(kind, unknown string) string {
	return fmt.Sprintf("CASE WHEN %s THEN '%s' || %s ELSE %s END", unknown, unjudgedPrefix, kind, kind)
}
