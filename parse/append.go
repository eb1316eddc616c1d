package parse

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// HasFormatter reports whether AppendRecord writes lines of f: nginx text formats,
// nginx-json and caddy. The other gateways' formats are read only.
func (f *Format) HasFormatter() bool { return f.dialect.writes() }

// AppendRecord appends r to dst as a line of format f, with nginx's escaping, without a
// newline. Variables retrylens does not keep are written as "-". Parsing the result gives
// r back; tests and the lab use it to write logs whose content they know.
func (f *Format) AppendRecord(dst []byte, r *Record) []byte { return f.dialect.appendLine(f, dst, r) }

// canonical names the variable AppendRecord writes for a field in JSON.
var canonical = [numFields]string{
	fieldRemoteAddr: "remote_addr", fieldTimeLocal: "time_local", fieldTimeISO: "time_iso8601",
	fieldMsec: "msec", fieldRequest: "request", fieldStatus: "status", fieldBytes: "body_bytes_sent",
	fieldReferer: "http_referer", fieldUserAgent: "http_user_agent", fieldHost: "http_host",
	fieldRequestTime: "request_time", fieldUpstreamAddr: "upstream_addr", fieldUpstreamStatus: "upstream_status",
	fieldUpstreamResponseTime: "upstream_response_time", fieldRetryReason: "http_x_retry_reason",
	fieldRequestID: "http_x_request_id", fieldIdempotencyKey: "http_idempotency_key",
	fieldInvocationID: "http_amz_sdk_invocation_id", fieldRetryAfter: "upstream_http_retry_after",
	fieldAttemptRetry: "http_x_retry_attempt", fieldAttemptStainless: "http_x_stainless_retry_count",
	fieldAttemptEnvoy: "http_x_envoy_attempt_count", fieldAttemptAmz: "http_amz_sdk_request",
	fieldAttemptGRPC: "http_grpc_previous_rpc_attempts", fieldErrorCode: "upstream_http_x_amzn_errortype",
	fieldOperation: "http_x_amz_target", fieldTraceparent: "http_traceparent",
}

func appendJSON(dst []byte, r *Record) []byte {
	dst = append(dst, '{')
	first := true
	for fl, name := range canonical {
		if name == "" || field(fl) == fieldTimeLocal || field(fl) == fieldTimeISO {
			continue
		}
		v := value(r, field(fl))
		if v == "" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(append(append(dst, '"'), name...), '"', ':')
		dst = appendJSONString(dst, v)
	}
	return append(dst, '}')
}

// value renders a Record field the way nginx would log it; "" means absent.
func value(r *Record, f field) string {
	switch f {
	case fieldRemoteAddr:
		return r.RemoteAddr
	case fieldTimeLocal:
		if r.Time.IsZero() {
			return ""
		}
		return r.Time.Format("02/Jan/2006:15:04:05 -0700")
	case fieldTimeISO:
		if r.Time.IsZero() {
			return ""
		}
		return r.Time.Format("2006-01-02T15:04:05-07:00")
	case fieldMsec:
		if r.Time.IsZero() || r.Time.Unix() < 0 {
			return ""
		}
		// nginx writes milliseconds; finer times (from other clocks) keep their digits.
		frac := strings.TrimRight(strconv.Itoa(1e9 + r.Time.Nanosecond())[1:], "0")
		for len(frac) < 3 {
			frac += "0"
		}
		return strconv.FormatInt(r.Time.Unix(), 10) + "." + frac
	case fieldRequest:
		// The inverse of set's split at the first and last space.
		hasSpace := strings.IndexByte(r.URI, ' ') >= 0
		switch {
		case r.Method == "" && r.Protocol == "" && r.URI == "-":
			return " -" // a bare "-" would read as no request at all
		case r.Method == "" && r.Protocol == "" && !hasSpace:
			return r.URI
		case r.Protocol == "" && hasSpace:
			return r.Method + " " + r.URI + " "
		case r.Protocol == "":
			return r.Method + " " + r.URI
		}
		return r.Method + " " + r.URI + " " + r.Protocol
	case fieldMethod:
		return r.Method
	case fieldURI:
		return r.URI
	case fieldProtocol:
		return r.Protocol
	case fieldStatus:
		if r.Status < 0 {
			return ""
		}
		return strconv.Itoa(r.Status)
	case fieldBytes:
		if r.Bytes < 0 {
			return ""
		}
		return strconv.FormatInt(r.Bytes, 10)
	case fieldReferer:
		return r.Referer
	case fieldUserAgent:
		return r.UserAgent
	case fieldHost:
		return r.Host
	case fieldRequestTime:
		if r.RequestTime < 0 {
			return ""
		}
		return strconv.FormatFloat(r.RequestTime, 'f', -1, 64)
	case fieldUpstreamAddr:
		return r.UpstreamAddr
	case fieldUpstreamStatus:
		return r.UpstreamStatus
	case fieldUpstreamResponseTime:
		return r.UpstreamResponseTime
	case fieldRetryReason:
		return r.RetryReason
	case fieldRequestID:
		return r.RequestID
	case fieldIdempotencyKey:
		return r.IdempotencyKey
	case fieldInvocationID:
		return r.InvocationID
	case fieldErrorCode, fieldGRPCStatus:
		return r.ErrorCode
	case fieldOperation:
		return r.Operation
	case fieldTraceparent:
		if r.Span == "" {
			return ""
		}
		return "00-" + r.Span + "-01"
	case fieldRetryAfter:
		return r.RetryAfter
	}
	if f >= firstAttemptField && f < numFields && r.Attempt >= 0 && attemptSources[f-firstAttemptField] == r.AttemptSource {
		switch f {
		case fieldAttemptEnvoy:
			return strconv.Itoa(r.Attempt + 1)
		case fieldAttemptAmz:
			s := "attempt=" + strconv.Itoa(r.Attempt+1)
			if r.MaxAttempts > 0 {
				s += "; max=" + strconv.Itoa(r.MaxAttempts)
			}
			return s
		}
		return strconv.Itoa(r.Attempt)
	}
	return ""
}

// appendEscaped writes v as nginx would with the format's escaping.
func (f *Format) appendEscaped(dst []byte, v string) []byte {
	switch f.escape {
	case EscapeJSON:
		s := appendJSONString(nil, v)
		return append(dst, s[1:len(s)-1]...)
	case EscapeNone:
		return append(dst, v...)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			dst = append(dst, '\\', 'x', hexUpper[c>>4], hexUpper[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

const hexUpper = "0123456789ABCDEF"

func appendJSONString(dst []byte, v string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			_, n := utf8.DecodeRuneInString(v[i:])
			dst = append(dst, v[i:i+n]...)
			i += n
			continue
		}
		i++
	}
	return append(dst, '"')
}

// caddyHeaders are the request headers appendCaddy writes, with the field behind each.
var caddyHeaders = []struct {
	name string
	f    field
}{
	{"User-Agent", fieldUserAgent}, {"Referer", fieldReferer}, {"X-Retry-Reason", fieldRetryReason},
	{"X-Request-Id", fieldRequestID}, {"Idempotency-Key", fieldIdempotencyKey},
	{"Amz-Sdk-Invocation-Id", fieldInvocationID}, {"X-Retry-Attempt", fieldAttemptRetry},
	{"X-Stainless-Retry-Count", fieldAttemptStainless}, {"X-Envoy-Attempt-Count", fieldAttemptEnvoy},
	{"Amz-Sdk-Request", fieldAttemptAmz}, {"Grpc-Previous-Rpc-Attempts", fieldAttemptGRPC},
}

// appendCaddy writes r in the layout of Caddy's JSON access log.
func appendCaddy(dst []byte, r *Record) []byte {
	dst = append(dst, `{"level":"info"`...)
	if ts := value(r, fieldMsec); ts != "" {
		dst = append(append(dst, `,"ts":`...), ts...)
	}
	dst = append(dst, `,"logger":"http.log.access","msg":"handled request","request":{`...)
	n := 0
	kv := func(k, v string) {
		if v == "" {
			return
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, v)
	}
	kv("remote_ip", r.RemoteAddr)
	kv("proto", r.Protocol)
	kv("method", r.Method)
	kv("host", r.Host)
	kv("uri", r.URI)
	if n > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"headers":{`...)
	n = 0
	for _, h := range caddyHeaders {
		v := value(r, h.f)
		if v == "" {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendJSONString(dst, h.name)
		dst = append(dst, ':', '[')
		dst = appendJSONString(dst, v)
		dst = append(dst, ']')
	}
	dst = append(dst, `}}`...)
	if v := value(r, fieldRequestTime); v != "" {
		dst = append(append(dst, `,"duration":`...), v...)
	}
	if v := value(r, fieldBytes); v != "" {
		dst = append(append(dst, `,"size":`...), v...)
	}
	if v := value(r, fieldStatus); v != "" {
		dst = append(append(dst, `,"status":`...), v...)
	}
	if r.RetryAfter != "" {
		dst = append(dst, `,"resp_headers":{"Retry-After":[`...)
		dst = appendJSONString(dst, r.RetryAfter)
		dst = append(dst, `]}`...)
	}
	return append(dst, '}')
}
