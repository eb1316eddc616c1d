package parse

import (
	"fmt"
	"maps"
	"sort"
	"strings"
)

// The JSON access logs of other gateways. Keys are matched case-insensitively (they are
// lower-cased before the lookup), so the maps below are lower case.

// envoyKeys reads Envoy's JSON access log with the key names of Envoy's documentation
// and Istio's default JSON format (start_time, method, path, response_code, duration in
// ms, …), plus the attempt headers and %UPSTREAM_REQUEST_ATTEMPT_COUNT% (Envoy's own
// tries) under the names the README's sample configuration gives them.
var envoyKeys = map[string]field{
	"start_time":                     fieldTimeStart,
	"duration":                       fieldDurationMS,
	"method":                         fieldMethod,
	"path":                           fieldURI,
	"protocol":                       fieldProtocol,
	"response_code":                  fieldStatus,
	"bytes_sent":                     fieldBytes,
	"user_agent":                     fieldUserAgent,
	"authority":                      fieldHost,
	"upstream_host":                  fieldUpstreamAddr,
	"downstream_remote_address":      fieldRemoteAddrPort,
	"request_id":                     fieldRequestID,
	"upstream_request_attempt_count": fieldProxyTries,
	"x_retry_attempt":                fieldAttemptRetry,
	"x_stainless_retry_count":        fieldAttemptStainless,
	"x_envoy_attempt_count":          fieldAttemptEnvoy,
	"amz_sdk_request":                fieldAttemptAmz,
	"grpc_previous_rpc_attempts":     fieldAttemptGRPC,
	"idempotency_key":                fieldIdempotencyKey,
	"amz_sdk_invocation_id":          fieldInvocationID,
	"x_retry_reason":                 fieldRetryReason,
	"retry_after":                    fieldRetryAfter,
	"retry_after_ms":                 fieldRetryAfterMs,
	"x_amzn_errortype":               fieldErrorCode,
	"grpc_status":                    fieldGRPCStatus,
	"x_amz_target":                   fieldOperation,
	"traceparent":                    fieldTraceparent,
}

// traefikKeys reads Traefik's JSON access log (accessLog.format=json): StartUTC and
// Duration in ns, RetryAttempts (the retry middleware's own retries), and request headers
// kept with accessLog.fields.headers, which Traefik writes as request_<Header-Name>.
var traefikKeys = map[string]field{
	"startutc":                    fieldTimeStart,
	"duration":                    fieldDurationNS,
	"clienthost":                  fieldRemoteAddr,
	"requestmethod":               fieldMethod,
	"requestpath":                 fieldURI,
	"requestprotocol":             fieldProtocol,
	"requesthost":                 fieldHost,
	"downstreamstatus":            fieldStatus,
	"downstreamcontentsize":       fieldBytes,
	"originstatus":                fieldUpstreamStatus,
	"serviceaddr":                 fieldUpstreamAddr,
	"retryattempts":               fieldProxyRetries,
	"downstream_retry-after":      fieldRetryAfter,
	"origin_retry-after":          fieldRetryAfter,
	"origin_x-amzn-errortype":     fieldErrorCode,
	"downstream_x-amzn-errortype": fieldErrorCode,
}

// kongKeys reads the JSON that Kong's logging plugins (file-log, http-log, tcp-log)
// write: started_at in ms, latencies.request in ms, request.headers lower-cased, and tries
// (one element per balancer try: Kong's own retries).
var kongKeys = map[string]field{
	"started_at":                        fieldTimeStart,
	"latencies.request":                 fieldDurationMS,
	"client_ip":                         fieldRemoteAddr,
	"request.method":                    fieldMethod,
	"request.uri":                       fieldURI,
	"request.headers.host":              fieldHost,
	"response.status":                   fieldStatus,
	"response.size":                     fieldBytes,
	"response.headers.retry-after":      fieldRetryAfter,
	"response.headers.x-amzn-errortype": fieldErrorCode,
	"upstream_status":                   fieldUpstreamStatus,
	"tries":                             fieldProxyTryList,
}

// otelKeys read the attempt lines package traces writes from OpenTelemetry spans: the
// span's start and duration, the client's service, and the attempt number under its
// family's header name (HTTP resends as x-retry-attempt, gRPC attempts as
// grpc-previous-rpc-attempts).
var otelKeys = map[string]field{
	"span_start":                 fieldTimeStart,
	"span_duration_ns":           fieldDurationNS,
	"method":                     fieldMethod,
	"uri":                        fieldURI,
	"host":                       fieldHost,
	"status":                     fieldStatus,
	"client":                     fieldRemoteAddr,
	"service":                    fieldUserAgent,
	"x_retry_attempt":            fieldAttemptRetry,
	"grpc_previous_rpc_attempts": fieldAttemptGRPC,
	"grpc_status":                fieldGRPCStatus,
	"request_id":                 fieldRequestID,
	"traceparent":                fieldTraceparent,
}

// requestHeaders are the request headers retrylens reads, with their fields.
var requestHeaders = map[string]field{
	"user-agent": fieldUserAgent, "referer": fieldReferer, "x-retry-reason": fieldRetryReason,
	"x-request-id": fieldRequestID, "idempotency-key": fieldIdempotencyKey,
	"amz-sdk-invocation-id": fieldInvocationID, "x-retry-attempt": fieldAttemptRetry,
	"x-stainless-retry-count": fieldAttemptStainless, "x-envoy-attempt-count": fieldAttemptEnvoy,
	"amz-sdk-request": fieldAttemptAmz, "grpc-previous-rpc-attempts": fieldAttemptGRPC,
	"x-amz-target": fieldOperation, "traceparent": fieldTraceparent,
}

func init() {
	for header, f := range requestHeaders {
		caddyKeys["request.headers."+header] = f
		traefikKeys["request_"+header] = f
		kongKeys["request.headers."+header] = f
	}
}

// mappable are the names --field accepts, with their fields.
var mappable = map[string]field{
	"time":                       fieldTimeAny,
	"start_time":                 fieldTimeStart,
	"traceparent":                fieldTraceparent,
	"request_time":               fieldRequestTime,
	"duration_ms":                fieldDurationMS,
	"duration_ns":                fieldDurationNS,
	"remote_addr":                fieldRemoteAddr,
	"request":                    fieldRequest,
	"method":                     fieldMethod,
	"uri":                        fieldURI,
	"protocol":                   fieldProtocol,
	"status":                     fieldStatus,
	"bytes":                      fieldBytes,
	"referer":                    fieldReferer,
	"user_agent":                 fieldUserAgent,
	"host":                       fieldHost,
	"upstream_addr":              fieldUpstreamAddr,
	"upstream_status":            fieldUpstreamStatus,
	"proxy_tries":                fieldProxyTries,
	"proxy_retries":              fieldProxyRetries,
	"request_id":                 fieldRequestID,
	"idempotency_key":            fieldIdempotencyKey,
	"invocation_id":              fieldInvocationID,
	"retry_after":                fieldRetryAfter,
	"retry_reason":               fieldRetryReason,
	"error_code":                 fieldErrorCode,
	"grpc_status":                fieldGRPCStatus,
	"operation":                  fieldOperation,
	"attempt":                    fieldAttemptRetry,
	"x-retry-attempt":            fieldAttemptRetry,
	"x-stainless-retry-count":    fieldAttemptStainless,
	"x-envoy-attempt-count":      fieldAttemptEnvoy,
	"amz-sdk-request":            fieldAttemptAmz,
	"grpc-previous-rpc-attempts": fieldAttemptGRPC,
}

// FieldNames returns the names --field accepts, sorted.
func FieldNames() []string {
	names := make([]string, 0, len(mappable))
	for n := range mappable {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WithFields returns a copy of the JSON format f (nil: a JSON format with no key of its
// own) that also reads the given mappings, each "name=path": name one of FieldNames,
// path the dotted key path to the value, matched case-insensitively, e.g.
// "attempt=request.headers.X-Retry-Attempt". An empty path ("request_id=") stops f from
// reading that field at all. Attempt headers keep their documented meaning (docs/formats.md): "attempt" is
// x-retry-attempt (0 for the first attempt).
func WithFields(f *Format, mappings []string) (*Format, error) {
	if f == nil {
		f = &Format{Name: "json", dialect: jsonDialect{}}
	}
	if !f.JSON() {
		return nil, fmt.Errorf("--field maps keys of JSON logs; the %s format is not JSON", f.Name)
	}
	g := *f
	g.keys = make(map[string]field, len(f.keys)+len(mappings))
	for k, v := range f.keys { // fold the preset's keys: paths are compared in lower case
		g.keys[strings.ToLower(k)] = v
	}
	g.foldKeys = true
	g.dialect = jsonDialect{} // read only: not the layout the nginx-json or Caddy formatter writes any more
	for _, m := range mappings {
		name, path, ok := strings.Cut(m, "=")
		fl, known := mappable[strings.ToLower(strings.TrimSpace(name))]
		if !ok || !known {
			return nil, fmt.Errorf("--field %q: want NAME=KEY.PATH with NAME one of %s", m, strings.Join(FieldNames(), ", "))
		}
		path = strings.ToLower(strings.TrimSpace(path))
		if path == "" {
			maps.DeleteFunc(g.keys, func(_ string, v field) bool { return v == fl })
			continue
		}
		g.keys[path] = fl
	}
	if g.Name != "json" {
		g.Name += "+fields"
	}
	return &g, nil
}
