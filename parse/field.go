package parse

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// field is what a variable's value means to retrylens. Variables retrylens has no use for
// are still matched, then dropped (fieldIgnore).
type field uint8

const (
	fieldIgnore field = iota
	fieldRemoteAddr
	fieldTimeLocal
	fieldTimeISO
	fieldMsec
	fieldRequest
	fieldMethod
	fieldURI
	fieldProtocol
	fieldStatus
	fieldBytes
	fieldReferer
	fieldUserAgent
	fieldHost
	fieldRequestTime
	fieldUpstreamAddr
	fieldUpstreamStatus
	fieldUpstreamResponseTime
	fieldRetryReason
	fieldRequestID
	fieldIdempotencyKey
	fieldInvocationID
	fieldRetryAfter
	fieldErrorCode // x-amzn-ErrorType or grpc-status: the upstream's error code (ErrorCode)
	fieldOperation // X-Amz-Target: the operation a POST names (Operation)
	// Fields of other gateways' logs.
	fieldTimeAny        // RFC 3339, or a number since the epoch (s, ms, µs or ns by size): when the request ended
	fieldTimeStart      // the same, when the request started: the end is start + request time
	fieldDurationMS     // request time in milliseconds (Envoy, Kong, HAProxy)
	fieldDurationNS     // request time in nanoseconds (Traefik)
	fieldProxyTries     // the proxy's own tries (Envoy's UPSTREAM_REQUEST_ATTEMPT_COUNT)
	fieldProxyRetries   // the proxy's own retries: tries - 1 (Traefik RetryAttempts, HAProxy %rc)
	fieldProxyTryList   // a JSON array with one element per try (Kong's tries)
	fieldRemoteAddrPort // "ip:port" or "[ip6]:port": the port is dropped
	fieldRetryAfterMs   // retry-after-ms (ms), which the Stainless clients honour before Retry-After
	fieldGRPCStatus     // grpc-status: the call's gRPC status, an error code (ErrorCode) but OK
	fieldTraceparent    // W3C traceparent: the client span the request was sent in (Span)
	// Attempt sources, in the order of precedence docs/formats.md gives.
	fieldAttemptRetry
	fieldAttemptStainless
	fieldAttemptEnvoy
	fieldAttemptAmz
	fieldAttemptGRPC
	numFields
)

const firstAttemptField = fieldAttemptRetry

// attemptSources names the header behind each attempt field.
var attemptSources = [...]string{
	"x-retry-attempt",
	"x-stainless-retry-count",
	"x-envoy-attempt-count",
	"amz-sdk-request",
	"grpc-previous-rpc-attempts",
}

// variables maps nginx variable names (without '$') to fields.
var variables = map[string]field{
	"remote_addr":                          fieldRemoteAddr,
	"http_x_forwarded_for":                 fieldIgnore,
	"time_local":                           fieldTimeLocal,
	"time_iso8601":                         fieldTimeISO,
	"msec":                                 fieldMsec,
	"request":                              fieldRequest,
	"request_method":                       fieldMethod,
	"request_uri":                          fieldURI,
	"server_protocol":                      fieldProtocol,
	"status":                               fieldStatus,
	"body_bytes_sent":                      fieldBytes,
	"http_referer":                         fieldReferer,
	"http_user_agent":                      fieldUserAgent,
	"host":                                 fieldHost,
	"http_host":                            fieldHost,
	"request_time":                         fieldRequestTime,
	"upstream_addr":                        fieldUpstreamAddr,
	"upstream_status":                      fieldUpstreamStatus,
	"upstream_response_time":               fieldUpstreamResponseTime,
	"http_x_retry_reason":                  fieldRetryReason,
	"http_x_request_id":                    fieldRequestID,
	"http_idempotency_key":                 fieldIdempotencyKey,
	"http_amz_sdk_invocation_id":           fieldInvocationID,
	"upstream_http_retry_after":            fieldRetryAfter,
	"sent_http_retry_after":                fieldRetryAfter,
	"upstream_http_retry_after_ms":         fieldRetryAfterMs,
	"sent_http_retry_after_ms":             fieldRetryAfterMs,
	"upstream_http_grpc_retry_pushback_ms": fieldRetryAfterMs, // gRPC's server pushback: a retry-after in ms
	"sent_http_grpc_retry_pushback_ms":     fieldRetryAfterMs,
	"http_x_retry_attempt":                 fieldAttemptRetry,
	"http_x_stainless_retry_count":         fieldAttemptStainless,
	"http_x_envoy_attempt_count":           fieldAttemptEnvoy,
	"http_amz_sdk_request":                 fieldAttemptAmz,
	"http_grpc_previous_rpc_attempts":      fieldAttemptGRPC,
	"upstream_http_x_amzn_errortype":       fieldErrorCode,
	"sent_http_x_amzn_errortype":           fieldErrorCode,
	"upstream_http_grpc_status":            fieldGRPCStatus,
	"sent_http_grpc_status":                fieldGRPCStatus,
	"upstream_trailer_grpc_status":         fieldGRPCStatus,
	"sent_trailer_grpc_status":             fieldGRPCStatus,
	"http_x_amz_target":                    fieldOperation,
	"http_traceparent":                     fieldTraceparent,
}

// stringFields maps the fields set stores as is to their string in Record: the text
// parser stores those without going through set.
var stringFields = map[field]uintptr{
	fieldRemoteAddr:           unsafe.Offsetof(Record{}.RemoteAddr),
	fieldMethod:               unsafe.Offsetof(Record{}.Method),
	fieldURI:                  unsafe.Offsetof(Record{}.URI),
	fieldProtocol:             unsafe.Offsetof(Record{}.Protocol),
	fieldReferer:              unsafe.Offsetof(Record{}.Referer),
	fieldUserAgent:            unsafe.Offsetof(Record{}.UserAgent),
	fieldHost:                 unsafe.Offsetof(Record{}.Host),
	fieldUpstreamAddr:         unsafe.Offsetof(Record{}.UpstreamAddr),
	fieldUpstreamResponseTime: unsafe.Offsetof(Record{}.UpstreamResponseTime),
	fieldRetryReason:          unsafe.Offsetof(Record{}.RetryReason),
	fieldRequestID:            unsafe.Offsetof(Record{}.RequestID),
	fieldIdempotencyKey:       unsafe.Offsetof(Record{}.IdempotencyKey),
	fieldInvocationID:         unsafe.Offsetof(Record{}.InvocationID),
	fieldOperation:            unsafe.Offsetof(Record{}.Operation),
	fieldRetryAfter:           unsafe.Offsetof(Record{}.RetryAfter),
}

// state carries what a line sets before it is folded into the Record.
type state struct {
	attempt           [numFields - firstAttemptField]string
	haveMsec, haveISO bool
	start             time.Time // fieldTimeStart
	timeLocal         string    // $time_local as written, parsed in the end unless a better time came
	timeLocalPos      int
	tries             int // the proxy's tries from fieldProxyTries/Retries/TryList; 0 when absent
	retryAfterMs      string
	grpc              bool // the line logs a gRPC status: it is a gRPC call
}

// set stores one decoded value. An empty value or "-" means absent and never reaches set.
// pos is the value's offset in the line, for errors.
func set(r *Record, st *state, f field, v string, pos int) *Error {
	switch f {
	case fieldRemoteAddr:
		r.RemoteAddr = v
	case fieldTimeLocal:
		// Read after the line, when no $msec or $time_iso8601 (more precise) was there.
		st.timeLocal, st.timeLocalPos = v, pos
	case fieldTimeISO:
		if st.haveMsec {
			return nil
		}
		t, ok := parseTimeISO(v)
		if !ok {
			return errAt(pos, ErrBadTime, "want $time_iso8601 like 2026-10-10T13:55:36+00:00, found %s", excerpt(v, 0, 32))
		}
		r.Time, st.haveISO = t, true
	case fieldMsec:
		t, ok := parseMsec(v)
		if !ok {
			return errAt(pos, ErrBadTime, "want $msec like 1795946401.012, found %s", excerpt(v, 0, 32))
		}
		r.Time, st.haveMsec = t, true
	case fieldRequest:
		// "METHOD URI PROTOCOL"; anything else (a TLS handshake sent to a plain port, a
		// bare path) is still a request nginx answered, so it is kept whole as the URI.
		sp := strings.IndexByte(v, ' ')
		last := strings.LastIndexByte(v, ' ')
		switch {
		case sp < 0:
			r.URI = v
		case sp == last:
			r.Method, r.URI = v[:sp], v[sp+1:]
		default:
			r.Method, r.URI, r.Protocol = v[:sp], v[sp+1:last], v[last+1:]
		}
	case fieldMethod:
		r.Method = v
	case fieldURI:
		r.URI = v
	case fieldProtocol:
		r.Protocol = v
	case fieldStatus:
		n, ok := atoi(v)
		if !ok || n > 999 {
			return errAt(pos, ErrBadStatus, "want a 3-digit $status, found %s", excerpt(v, 0, 16))
		}
		if n == 100 {
			// 100 Continue logged as the final status (Caddy, for an Expect: 100-continue
			// upload the client gave up on): no answer was sent, as Caddy's own 0 says.
			n = 0
		}
		r.Status = n
	case fieldBytes:
		n, ok := atoi(v)
		if !ok {
			return errAt(pos, ErrBadNumber, "want a byte count, found %s", excerpt(v, 0, 16))
		}
		r.Bytes = int64(n)
	case fieldReferer:
		r.Referer = v
	case fieldUserAgent:
		r.UserAgent = v
	case fieldHost:
		r.Host = v
	case fieldRequestTime:
		x, ok := decimal(v)
		if !ok {
			var err error
			x, err = strconv.ParseFloat(v, 64)
			ok = err == nil
		}
		if !ok || x < 0 {
			return errAt(pos, ErrBadNumber, "want $request_time in seconds like 0.012, found %s", excerpt(v, 0, 16))
		}
		r.RequestTime = x
	case fieldUpstreamAddr:
		r.UpstreamAddr = v
	case fieldUpstreamStatus:
		r.UpstreamStatus = v
		r.UpstreamTries = countTries(v)
	case fieldUpstreamResponseTime:
		r.UpstreamResponseTime = v
	case fieldRetryReason:
		r.RetryReason = v
	case fieldRequestID:
		r.RequestID = v
	case fieldIdempotencyKey:
		r.IdempotencyKey = v
	case fieldInvocationID:
		r.InvocationID = v
	case fieldRetryAfter:
		r.RetryAfter = v
	case fieldRetryAfterMs:
		st.retryAfterMs = v
	case fieldErrorCode:
		r.ErrorCode = errorCode(v)
	case fieldGRPCStatus:
		r.ErrorCode, st.grpc = errorCode(v), true
	case fieldOperation:
		r.Operation = v
	case fieldTraceparent:
		r.Span = traceSpan(v)
	case fieldTimeAny:
		if st.haveMsec {
			return nil
		}
		t, ok := parseTimeAny(v)
		if !ok {
			return errAt(pos, ErrBadTime, "want an RFC 3339 time or seconds since the epoch, found %s", excerpt(v, 0, 32))
		}
		r.Time, st.haveMsec = t, true
	case fieldTimeStart:
		t, ok := parseTimeAny(v)
		if !ok {
			return errAt(pos, ErrBadTime, "want an RFC 3339 start time or seconds since the epoch, found %s", excerpt(v, 0, 32))
		}
		st.start = t
	case fieldDurationMS, fieldDurationNS:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || math.IsInf(x, 0) {
			return errAt(pos, ErrBadNumber, "want a duration, found %s", excerpt(v, 0, 16))
		}
		if f == fieldDurationMS {
			r.RequestTime = x / 1e3
		} else {
			r.RequestTime = x / 1e9
		}
	case fieldProxyTries, fieldProxyRetries:
		n, ok := atoi(v)
		if !ok {
			return errAt(pos, ErrBadNumber, "want a count of tries, found %s", excerpt(v, 0, 16))
		}
		if f == fieldProxyRetries {
			n++
		}
		st.tries = n
	case fieldRemoteAddrPort:
		r.RemoteAddr = stripPort(v)
	default:
		if f >= firstAttemptField && f < numFields {
			st.attempt[f-firstAttemptField] = v
		}
	}
	return nil
}

// finish folds the attempt headers into Attempt, first source in that order wins. A header
// whose value is not a number (it is client-controlled) leaves the line untagged rather
// than rejecting it.
func finish(r *Record, st *state, f *Format) {
	only := f.only
	// A gRPC method is an operation, as X-Amz-Target is: its path names it (/shop.Orders/Get),
	// and whether it reads (sdk.Families). Once the attempt is known, below.
	defer func() {
		if r.Operation == "" && (st.grpc || r.AttemptSource == attemptSources[fieldAttemptGRPC-firstAttemptField]) {
			r.Operation = grpcMethod(r.URI)
		}
	}()
	if !st.start.IsZero() && r.Time.IsZero() {
		r.Time = st.start
		if r.RequestTime > 0 {
			r.Time = r.Time.Add(time.Duration(r.RequestTime * float64(time.Second)))
		}
	}
	if st.tries > 0 {
		r.UpstreamTries = st.tries
	}
	// A gRPC call that failed is logged 200 by every gateway (its status is in the
	// trailers): its status is the HTTP one its code maps to (google.rpc.Code), so that an
	// UNAVAILABLE counts as the 503 it is and a RESOURCE_EXHAUSTED as a 429.
	if r.Status == 200 && r.ErrorCode != "" {
		if s, ok := grpcHTTPStatus[r.ErrorCode]; ok {
			r.Status = s
		}
	}
	// retry-after-ms wins over Retry-After, as the clients that send it read them; it is
	// kept as Retry-After's seconds. A value that is not a number (it is the server's, but
	// logged as text) leaves Retry-After as it was.
	if st.retryAfterMs != "" {
		if ms, err := strconv.ParseFloat(st.retryAfterMs, 64); err == nil && ms >= 0 && ms < 1e12 {
			r.RetryAfter = strconv.FormatFloat(ms/1000, 'f', -1, 64)
		}
	}
	for i, v := range st.attempt {
		if v == "" || (only > 0 && i != only-1) {
			continue
		}
		f := firstAttemptField + field(i)
		n, max, ok := attemptValue(f, v)
		if !ok {
			continue
		}
		r.Attempt, r.AttemptSource, r.MaxAttempts = n, attemptSources[i], max
		return
	}
	// A gRPC client sends grpc-previous-rpc-attempts on its retries and hedges only (gRFC
	// A6), never on a call's first attempt: a gRPC call logged without it, where the format
	// logs it, is a first attempt.
	grpcAt := fieldAttemptGRPC - firstAttemptField
	if st.grpc && st.attempt[grpcAt] == "" && (only == 0 || only-1 == int(grpcAt)) && f.logs(fieldAttemptGRPC) {
		r.Attempt, r.AttemptSource = 0, attemptSources[grpcAt]
	}
}

func attemptValue(f field, v string) (n, max int, ok bool) {
	switch f {
	case fieldAttemptEnvoy:
		n, ok = atoi(v)
		return n - 1, 0, ok && n >= 1
	case fieldAttemptAmz:
		// "attempt=2; max=3"
		for part := range strings.SplitSeq(v, ";") {
			k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "attempt":
				n, ok = atoi(val)
			case "max":
				max, _ = atoi(val)
			}
		}
		return n - 1, max, ok && n >= 1
	}
	n, ok = atoi(v)
	return n, 0, ok
}

// countTries counts the upstream tries in nginx's "502, 200 : 200" lists: ", " separates
// tries within one upstream group and " : " separates internal redirects.
func countTries(v string) int {
	n := 1
	for i := 0; i < len(v); i++ {
		if v[i] == ',' || v[i] == ':' {
			n++
		}
	}
	return n
}

// atoi parses a small non-negative decimal; it refuses signs, spaces and overflow.
func atoi(s string) (int, bool) {
	if len(s) == 0 || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int(c)
	}
	return n, true
}

// month reads a three-letter English month abbreviation, as nginx writes it.
func month(s string) (time.Month, bool) {
	switch s {
	case "Jan":
		return time.January, true
	case "Feb":
		return time.February, true
	case "Mar":
		return time.March, true
	case "Apr":
		return time.April, true
	case "May":
		return time.May, true
	case "Jun":
		return time.June, true
	case "Jul":
		return time.July, true
	case "Aug":
		return time.August, true
	case "Sep":
		return time.September, true
	case "Oct":
		return time.October, true
	case "Nov":
		return time.November, true
	case "Dec":
		return time.December, true
	}
	return 0, false
}

// timeLocalShape checks $time_local's shape, "10/Oct/2026:13:55:36 -0700", without
// computing the time: enough when another variable gives the time.
func timeLocalShape(s string) bool {
	if len(s) != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' || (s[21] != '+' && s[21] != '-') {
		return false
	}
	d := func(c byte) bool { return c-'0' <= 9 }
	if !(d(s[0]) && d(s[1]) && d(s[7]) && d(s[8]) && d(s[9]) && d(s[10]) && d(s[12]) && d(s[13]) &&
		d(s[15]) && d(s[16]) && d(s[18]) && d(s[19]) && d(s[22]) && d(s[23]) && d(s[24]) && d(s[25])) {
		return false
	}
	_, ok := month(s[3:6])
	return ok
}

// parseTimeLocal reads nginx's $time_local, "10/Oct/2026:13:55:36 -0700".
func parseTimeLocal(s string) (time.Time, bool) {
	if len(s) != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' {
		return time.Time{}, false
	}
	d, ok1 := atoi(s[0:2])
	mon, ok2 := month(s[3:6])
	y, ok3 := atoi(s[7:11])
	hh, ok4 := atoi(s[12:14])
	mm, ok5 := atoi(s[15:17])
	ss, ok6 := atoi(s[18:20])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, false
	}
	return civil(y, mon, d, hh, mm, ss, 0, s[21], s[22:24], s[24:26])
}

// parseTimeISO reads nginx's $time_iso8601, "2026-10-10T13:55:36+00:00", and, from other
// servers, RFC 3339 with fractional seconds or "Z".
func parseTimeISO(s string) (time.Time, bool) {
	if len(s) == 25 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':' && s[22] == ':' {
		y, ok1 := atoi(s[0:4])
		m, ok2 := atoi(s[5:7])
		d, ok3 := atoi(s[8:10])
		hh, ok4 := atoi(s[11:13])
		mm, ok5 := atoi(s[14:16])
		ss, ok6 := atoi(s[17:19])
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && m >= 1 && m <= 12 {
			return civil(y, time.Month(m), d, hh, mm, ss, 0, s[19], s[20:22], s[23:25])
		}
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !plausible(t) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// civil builds a UTC time from wall-clock fields and a "+hh" "mm" offset, refusing
// out-of-range fields that time.Date would silently normalise.
func civil(y int, mon time.Month, d, hh, mm, ss, nsec int, sign byte, oh, om string) (time.Time, bool) {
	h, ok1 := atoi(oh)
	m, ok2 := atoi(om)
	if !ok1 || !ok2 || (sign != '+' && sign != '-') || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, false
	}
	off := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if sign == '-' {
		off = -off
	}
	t := time.Date(y, mon, d, hh, mm, ss, nsec, time.UTC).Add(-off)
	return t, plausible(t)
}

// plausible reports whether t can be a log time: from 1970 to the year 9999.
func plausible(t time.Time) bool {
	u := t.Unix()
	return u >= 0 && u <= maxUnix
}

// maxUnix is 9999-12-31T23:59:59Z: later times are not log times.
const maxUnix = 253402300799

// decimal reads "0.012" or "12" exactly as strconv.ParseFloat would, faster: the digits
// make an integer below 2^53 and a power of ten up to 10^15, both exact, and one IEEE
// division rounds their quotient correctly. Anything else is left to ParseFloat.
func decimal(v string) (float64, bool) {
	var n uint64
	frac := -1
	if len(v) == 0 || len(v) > 15 { // at most 15 digits: below 2^53
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			n = n*10 + uint64(c-'0')
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0 && i > 0 && i < len(v)-1:
			frac = 0
		default:
			return 0, false
		}
	}
	if frac <= 0 {
		return float64(n), true
	}
	return float64(n) / pow10[frac], true
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseTimeAny reads an RFC 3339 time, or a number since the epoch whose size says its
// unit: seconds below 1e11 (year 5138), then milliseconds, microseconds, nanoseconds.
func parseTimeAny(s string) (time.Time, bool) {
	if len(s) > 0 && s[0] >= '0' && s[0] <= '9' && strings.IndexByte(s, '-') < 0 {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x < 0 {
			return time.Time{}, false
		}
		switch {
		case x >= 1e17:
			x /= 1e9
		case x >= 1e14:
			x /= 1e6
		case x >= 1e11:
			x /= 1e3
		}
		sec, frac := math.Modf(x)
		t := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
		return t, plausible(t)
	}
	return parseTimeISO(s)
}

// digits8 reads eight ASCII digits loaded little-endian (the first digit lowest) as a
// number, eight bytes at a time (Lemire's method); ok is false unless all are digits.
func digits8(w uint64) (uint64, bool) {
	v := w - 0x3030303030303030
	// every byte was '0'..'9': no borrow out of it, and adding 0x46 keeps it below 0x80
	if (v|(v+0x7676767676767676))&0x8080808080808080 != 0 {
		return 0, false
	}
	v = (v * 10) + (v >> 8)
	v = ((v & 0x000000FF000000FF) * (100 + (1000000 << 32))) + (((v >> 16) & 0x000000FF000000FF) * (1 + (10000 << 32)))
	return v >> 32, true
}

// digits3 reads three ASCII digits.
func digits3(a, b, c byte) (uint64, bool) {
	a, b, c = a-'0', b-'0', c-'0'
	if a > 9 || b > 9 || c > 9 {
		return 0, false
	}
	return uint64(a)*100 + uint64(b)*10 + uint64(c), true
}

// stripPort drops the port of "ip:port" or "[ip6]:port"; a bare address is kept.
func stripPort(v string) string {
	if strings.HasPrefix(v, "[") {
		if end := strings.IndexByte(v, ']'); end > 0 {
			return v[1:end]
		}
		return v
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 && strings.IndexByte(v, ':') == i {
		return v[:i]
	}
	return v
}

// parseMsec reads $msec, seconds since the epoch with millisecond resolution.
func parseMsec(s string) (time.Time, bool) {
	// The shape nginx writes until 2286: ten digits, '.', three.
	if len(s) == 14 && s[10] == '.' {
		if hi, ok := digits8(load64(s, 0)); ok {
			lo, ok1 := digits3(s[8], s[9], '0')
			ms, ok2 := digits3(s[11], s[12], s[13])
			if sec := int64(hi*100 + lo/10); ok1 && ok2 && sec <= maxUnix {
				return time.Unix(sec, int64(ms)*1e6).UTC(), true
			}
		}
	}
	var sec int64
	i := 0
	for ; i < len(s) && s[i] != '.'; i++ {
		c := s[i] - '0'
		if c > 9 || i >= 18 {
			return time.Time{}, false
		}
		sec = sec*10 + int64(c)
	}
	if i == 0 || sec > maxUnix || len(s)-i > 10 {
		return time.Time{}, false
	}
	ns, scale := 0, 1000000000
	if i < len(s) { // s[i] is the '.'
		for _, c := range []byte(s[i+1:]) {
			c -= '0'
			if c > 9 {
				return time.Time{}, false
			}
			scale /= 10
			ns += int(c) * scale
		}
	}
	return time.Unix(sec, int64(ns)).UTC(), true
}

// traceSpan returns the trace and parent ids of a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>") as "<trace id>-<parent id>" in lower case, the span
// the client sent the request in; "" for a header that is none (it is client-controlled:
// a bad one leaves the line without a span rather than rejecting it). A later version
// may append fields after the flags.
func traceSpan(v string) string {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || (len(v) > 55 && v[55] != '-') || v[:2] == "ff" {
		return ""
	}
	for i := range 55 {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		if c := v[i] | 0x20; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	if v[3:35] == "00000000000000000000000000000000" || v[36:52] == "0000000000000000" {
		return ""
	}
	return strings.ToLower(v[3:52])
}

// grpcMethod is the method a gRPC path names, "shop.Orders/Get" for /shop.Orders/Get;
// "" for a path that is not one (gRPC's is /service/method, nothing else).
func grpcMethod(path string) string {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || !strings.HasPrefix(path, "/") || svc == "" || method == "" || strings.ContainsAny(method, "/?") {
		return ""
	}
	return svc + "/" + method
}
