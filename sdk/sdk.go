// Package sdk is the catalogue of what retrying clients say in their requests and how
// they read the answers: one entry per family, the data parse, query and the docs read
// (docs/formats.md's table is Markdown, checked by a test), so that a family is described
// once.
package sdk

import (
	"fmt"
	"slices"
	"strings"
)

// Family is one family of clients' retry conventions.
type Family struct {
	Name    string // "AWS SDKs"
	Clients string // who, for a person
	// Attempt is the request header that numbers attempts, First what it says on the
	// first (0 or 1), and StatesCap whether it also states the client's own cap
	// (amz-sdk-request: attempt=2; max=5).
	Attempt   string
	First     int
	StatesCap bool
	// Keys are the request headers that name the logical call across its attempts.
	Keys []string
	// Throttles are the answers that throttle: statuses, and error codes (from a response
	// header the gateway logs: ErrorHeader) whatever the status. Transient are the codes it
	// retries as transient whatever the status.
	ThrottleStatuses []int
	ThrottleCodes    []string
	TransientCodes   []string
	ErrorHeader      string
	// RetryAfter are the response headers it waits for, first first.
	RetryAfter []string
	// RetryStatuses are the statuses it retries whatever the error code, where its rule is
	// its own (nil: any 5xx, 408, 429 and an abandoned attempt, query.RetryableFailure);
	// CodeStatuses those it retries or not by the error code alone (ErrorHeader), so that
	// without the code in the log neither a retry after one nor a stop on one is judged.
	RetryStatuses []int
	CodeStatuses  []int
	// Operation is the request header that names the operation beside the method (for
	// gRPC, the path: /shop.Orders/Get), and Reads matches (a regular expression over the
	// name after its last '.' or '/') those that read. Where a family names operations, a
	// POST that names none in the log is not judged a write.
	Operation string
	Reads     string
}

// Families are the families retrylens knows, in the order parse tries their attempt
// headers: the lab's own header first, then the SDKs'.
var Families = []Family{
	{Name: "retrylens", Clients: "clients that follow the README (the lab's)", Attempt: "x-retry-attempt", First: 0,
		Keys: []string{"Idempotency-Key", "X-Request-Id"}, ThrottleStatuses: []int{429}, RetryAfter: []string{"Retry-After"}},
	{Name: "Stainless", Clients: "openai, anthropic (Python, Node, Go: openai-go)", Attempt: "x-stainless-retry-count", First: 0,
		ThrottleStatuses: []int{429}, RetryAfter: []string{"retry-after-ms", "Retry-After"}},
	{Name: "Envoy", Clients: "Envoy's own retries (a proxy, not a client)", Attempt: "x-envoy-attempt-count", First: 1,
		ThrottleStatuses: []int{429}, RetryAfter: []string{"Retry-After"}},
	{Name: "AWS SDKs", Clients: "botocore (boto3, the AWS CLI), aws-sdk-go-v2, aws-sdk-js-v3, the Java SDK", Attempt: "amz-sdk-request",
		First: 1, StatesCap: true, Keys: []string{"amz-sdk-invocation-id"}, ThrottleStatuses: []int{429},
		// smithy's THROTTLING_ERROR_CODES and TRANSIENT_ERROR_CODES, which botocore and
		// aws-sdk-go-v2 share
		ThrottleCodes: []string{"BandwidthLimitExceeded", "EC2ThrottledException", "LimitExceededException",
			"PriorRequestNotComplete", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "RequestThrottled",
			"RequestThrottledException", "SlowDown", "ThrottledException", "Throttling", "ThrottlingException",
			"TooManyRequestsException", "TransactionInProgressException"},
		TransientCodes: []string{"RequestTimeout", "RequestTimeoutException", "TimeoutError"},
		// smithy's retryable statuses (botocore's standard and adaptive modes, aws-sdk-go-v2),
		// and an attempt the client abandoned (a timeout, retried as a connection error); a
		// 4xx only for a throttling or transient code: a 429 without one is retried by some
		// (aws-sdk-go-v2 from 1.48, the 2026 retry behaviour) and not by others (botocore
		// 1.29), so that without the code a stop on one is not judged
		RetryStatuses: []int{0, 499, 500, 502, 503, 504}, CodeStatuses: []int{400, 403, 429},
		ErrorHeader: "x-amzn-ErrorType", Operation: "X-Amz-Target",
		Reads: `^(Get|BatchGet|TransactGet|Query|Scan|Describe|List)`},
	{Name: "gRPC", Clients: "gRPC's retry policy (grpc-go, grpc-java, …)", Attempt: "grpc-previous-rpc-attempts", First: 0,
		ThrottleCodes: []string{"RESOURCE_EXHAUSTED"}, TransientCodes: []string{"UNAVAILABLE"}, ErrorHeader: "grpc-status",
		RetryAfter: []string{"grpc-retry-pushback-ms"}, Operation: ":path",
		// the standard methods of Google's API guidelines (AIP-131, 132, 231, and Search),
		// and the health service's
		Reads: `^(Get|BatchGet|List|Search|Check|Watch)`},
}

// AWS is the AWS SDKs' family: the one whose requests state their cap (amz-sdk-request's
// max=) and carry an invocation id, which is how a line is told to be theirs.
func AWS() Family {
	for _, f := range Families {
		if f.StatesCap {
			return f
		}
	}
	panic("sdk: no family states its cap")
}

// ThrottleCodes are every family's throttling codes.
func ThrottleCodes() []string { return union(func(f Family) []string { return f.ThrottleCodes }) }

// TransientCodes are every family's transient codes.
func TransientCodes() []string { return union(func(f Family) []string { return f.TransientCodes }) }

func union(get func(Family) []string) []string {
	var out []string
	for _, f := range Families {
		for _, c := range get(f) {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Reads is the expression that matches the operations that read, of the families that
// name operations ("" when none does).
func Reads() string {
	var rs []string
	for _, f := range Families {
		if f.Reads != "" {
			rs = append(rs, f.Reads)
		}
	}
	return strings.Join(rs, "|")
}

// Markdown is the catalogue as docs/formats.md shows it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| family | clients | attempt header (first) | key | throttles | retry-after | operation |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	code := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return "`" + strings.Join(s, "`, `") + "`"
	}
	for _, f := range Families {
		attempt := fmt.Sprintf("`%s` (%d)", f.Attempt, f.First)
		if f.StatesCap {
			attempt += ", states its cap (`max=`)"
		}
		var throttles []string
		for _, s := range f.ThrottleStatuses {
			throttles = append(throttles, fmt.Sprint(s))
		}
		throttles = append(throttles, f.ThrottleCodes...)
		if f.ErrorHeader != "" {
			throttles[len(throttles)-1] += "` in `" + f.ErrorHeader
		}
		op := "-"
		if f.Operation != "" {
			// a | in a table's cell, even in code, needs its backslash
			op = "`" + f.Operation + "`, reads: `" + strings.ReplaceAll(f.Reads, "|", `\|`) + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.Clients, attempt, code(f.Keys), code(throttles), code(f.RetryAfter), op)
	}
	return b.String()
}
