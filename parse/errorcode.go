package parse

import "strings"

// grpcCodes are gRPC's status codes by number (grpc-status), as the gRPC libraries name
// them; Envoy's %GRPC_STATUS% writes them in CamelCase ("ResourceExhausted").
var grpcCodes = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// GRPCCodes returns gRPC's status code names by number (OK is 0).
func GRPCCodes() []string { return append([]string(nil), grpcCodes[:]...) }

// grpcHTTPStatus is the HTTP status of each gRPC code but OK, as google.rpc.Code states
// it (CANCELLED: 499, the client gave up).
var grpcHTTPStatus = map[string]int{
	"CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504, "NOT_FOUND": 404,
	"ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400,
	"ABORTED": 409, "OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503,
	"DATA_LOSS": 500, "UNAUTHENTICATED": 401,
}

// errorCode is the error code a logged header carries, as the SDKs' own lists name it:
// x-amzn-ErrorType's "ThrottlingException:http://internal.amazon.com/…" and the AWS JSON
// protocols' "com.amazonaws.dynamodb.v20120810#ThrottlingException" are
// "ThrottlingException"; grpc-status 8, and Envoy's "ResourceExhausted", are
// "RESOURCE_EXHAUSTED". gRPC's OK is no error: "".
func errorCode(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[:i]
	}
	if i := strings.LastIndexByte(v, '#'); i >= 0 {
		v = v[i+1:]
	}
	v = strings.TrimSpace(v)
	if n, ok := atoi(v); ok {
		if n < len(grpcCodes) {
			v = grpcCodes[n]
		}
	} else {
		for _, c := range grpcCodes {
			if strings.EqualFold(v, strings.ReplaceAll(c, "_", "")) {
				v = c
			}
		}
	}
	if v == "OK" {
		return ""
	}
	return v
}
