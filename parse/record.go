package parse

import "time"

// Record is one access-log line: one physical attempt seen by the gateway.
//
// Absent values are zero strings, except where a field says otherwise: Status, Bytes and
// RequestTime are -1, Attempt is -1 (untagged). A Status of 0 is a status the server
// logged as 0: the client got no answer (Caddy writes it for a client that went away).
type Record struct {
	Time       time.Time // when the gateway finished the request, in UTC; zero when the format has no time
	RemoteAddr string
	Method     string
	URI        string // as requested, query string included
	Protocol   string
	Status     int
	Bytes      int64
	Referer    string
	UserAgent  string
	Host       string

	RequestTime          float64 // seconds
	UpstreamAddr         string
	UpstreamStatus       string // nginx's list as written, e.g. "502, 200"
	UpstreamResponseTime string
	UpstreamTries        int // entries in the upstream status list: the proxy's own tries; 0 when absent

	// Attempt is the client's attempt number n, 0 for the first attempt, normalised from
	// whichever attempt header the line carries (see AttemptSource); -1 when none.
	Attempt       int
	AttemptSource string // header the attempt came from, e.g. "x-retry-attempt"
	MaxAttempts   int    // the client's own cap when the header states it (amz-sdk-request max=); 0 otherwise

	RetryReason    string
	RequestID      string
	IdempotencyKey string
	InvocationID   string // amz-sdk-invocation-id
	RetryAfter     string // the upstream's Retry-After header, as written
	// ErrorCode is the error the upstream answered with, where the gateway logs it
	// (x-amzn-ErrorType, grpc-status): "ThrottlingException", "RESOURCE_EXHAUSTED". Throttles
	// that are not 429 are told by it (query.ThrottleCodes).
	ErrorCode string
	// Operation is the operation a request names beside its method where the gateway logs
	// it (X-Amz-Target: "DynamoDB_20120810.GetItem"): a POST that reads (query's reads).
	Operation string
	// Span is the client span the request was sent in, "<trace id>-<span id>" in lower
	// hex, from the W3C traceparent header where logged; for an attempt read from traces
	// (package traces), the attempt's own span. A span and the gateway's line of the same
	// attempt share it (docs/metrics.md, "Layers").
	Span string
}

// Tagged reports whether the record carries an attempt number.
func (r *Record) Tagged() bool { return r.Attempt >= 0 }

func (r *Record) reset() {
	*r = Record{Status: -1, Bytes: -1, RequestTime: -1, Attempt: -1}
}
