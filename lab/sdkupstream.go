package lab

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SDKPhases is the SDK upstream's schedule, since it started: each phase answers a share of
// attempts as the services do when they fail (Fail: 500), throttle (Throttle: DynamoDB's 400
// ThrottlingException, S3's 503 SlowDown, OpenAI's 429 with retry-after-ms) or are slow
// (Slow: a write that takes SlowFor, longer than the clients' timeout: performed, answered
// late), and S3's answers are cut by a rate limit in front of it (Limit: 429 with the
// limiter's own body, no S3 error code: botocore 1.29 does not retry it, aws-sdk-go-v2
// from 1.48 does).
type SDKPhases struct {
	LimitFrom, LimitTo       time.Duration
	Limit                    float64
	FailFrom, FailTo         time.Duration
	Fail                     float64
	ThrottleFrom, ThrottleTo time.Duration
	Throttle                 float64
	SlowFrom, SlowTo         time.Duration
	Slow                     float64
	SlowFor                  time.Duration
	RetryAfterMs             int // what OpenAI's 429s ask (retry-after-ms)
}

// SDKUpstream is an origin that answers as the services real SDKs call do, enough for
// their retries: DynamoDB (POST / with X-Amz-Target GetItem or PutItem, the JSON 1.0
// protocol), S3 (GET and PUT /BUCKET/KEY, path style) and OpenAI (POST
// /v1/chat/completions, GET /v1/models). It counts the writes it performed (PutItem,
// PutObject, a chat completion) per logical call: the invocation id, else the body's
// "user" (the lab's OpenAI client names each call there).
type SDKUpstream struct {
	Addr   string
	srv    *http.Server
	phases SDKPhases
	start  time.Time

	mu     sync.Mutex
	writes map[string]int
}

// StartSDKUpstream starts the SDK upstream on a free loopback port.
func StartSDKUpstream(p SDKPhases) (*SDKUpstream, error) {
	ln, err := listenUnused()
	if err != nil {
		return nil, err
	}
	u := &SDKUpstream{Addr: ln.Addr().String(), phases: p, start: time.Now(), writes: map[string]int{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

// Close stops it.
func (u *SDKUpstream) Close() error { return u.srv.Close() }

// Writes returns the writes performed per logical call.
func (u *SDKUpstream) Writes() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.writes)
}

// draw is a share in [0, 1) drawn from the attempt's identity.
func draw(parts ...string) float64 {
	h := fnv.New64a()
	for _, p := range parts {
		io.WriteString(h, p)
		h.Write([]byte{0})
	}
	return float64(h.Sum64()%10000) / 10000
}

func (u *SDKUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	target := r.Header.Get("X-Amz-Target")
	call := r.Header.Get("Amz-Sdk-Invocation-Id")
	if call == "" {
		var v struct{ User string }
		json.Unmarshal(body, &v)
		call = v.User
	}
	since := time.Since(u.start)
	p := u.phases
	in := func(from, to time.Duration) bool { return since >= from && since < to }
	x := draw(call, r.Header.Get("Amz-Sdk-Request")+r.Header.Get("X-Stainless-Retry-Count"), r.URL.Path)
	var service, op string
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		service, op = "openai", r.Method+" "+r.URL.Path
	case target != "":
		service, op = "dynamodb", target[strings.LastIndexByte(target, '.')+1:]
	default:
		service, op = "s3", r.Method
	}
	kind := "ok"
	switch {
	case service == "s3" && in(p.LimitFrom, p.LimitTo) && x < p.Limit:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "<html><head><title>429 Too Many Requests</title></head><body>rate limited</body></html>\n")
		return
	case in(p.FailFrom, p.FailTo) && x < p.Fail:
		kind = "fail"
	case in(p.ThrottleFrom, p.ThrottleTo) && x < p.Throttle:
		kind = "throttle"
	case in(p.SlowFrom, p.SlowTo) && x < p.Slow:
		kind = "slow"
	}
	write := op == "PutItem" || (service == "s3" && op == "PUT") || op == "POST /v1/chat/completions"
	if kind == "slow" && write { // only writes are slow: performed, answered late
		time.Sleep(p.SlowFor)
	}
	if answer(w, service, op, kind, p.RetryAfterMs) < 300 && write {
		u.mu.Lock()
		u.writes[call]++
		u.mu.Unlock()
	}
}

// failures are each service's answers when it fails and throttles: status and error code
// (what DynamoDB puts in x-amzn-ErrorType and the AWS JSON body, S3 in its XML body).
var failures = map[string]map[string]struct {
	status int
	code   string
}{
	"dynamodb": {"fail": {http.StatusInternalServerError, "InternalServerError"}, "throttle": {http.StatusBadRequest, "ThrottlingException"}},
	"s3":       {"fail": {http.StatusInternalServerError, "InternalError"}, "throttle": {http.StatusServiceUnavailable, "SlowDown"}},
	"openai":   {"fail": {http.StatusInternalServerError, "server_error"}, "throttle": {http.StatusTooManyRequests, "rate_limit_exceeded"}},
}

// answer writes the service's answer of kind ("ok", "fail", "throttle", "slow") to op, as
// the service writes it, and returns its status.
func answer(w http.ResponseWriter, service, op, kind string, retryAfterMs int) int {
	h := w.Header()
	if f, ok := failures[service][kind]; ok {
		switch service {
		case "dynamodb":
			h.Set("Content-Type", "application/x-amz-json-1.0")
			h.Set("X-Amzn-Errortype", f.code+":http://internal.amazon.com/coral/com.amazon.coral.availability/")
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"lab"}`, f.code)
		case "s3":
			h.Set("Content-Type", "application/xml")
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>lab</Message></Error>`, f.code)
		default:
			h.Set("Content-Type", "application/json")
			if kind == "throttle" {
				h.Set("Retry-After-Ms", fmt.Sprint(retryAfterMs))
			}
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `{"error":{"message":"lab","type":%q}}`, f.code)
		}
		return f.status
	}
	switch {
	case service == "dynamodb":
		h.Set("Content-Type", "application/x-amz-json-1.0")
		if op == "GetItem" {
			io.WriteString(w, `{"Item":{"id":{"S":"k"}}}`)
		} else {
			io.WriteString(w, `{}`)
		}
	case service == "s3":
		h.Set("ETag", `"5d41402abc4b2a76b9719d911017c592"`)
		if op == "GET" {
			h.Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "hello")
		}
	case op == "GET /v1/models":
		h.Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"lab-1","object":"model","created":0,"owned_by":"lab"}]}`)
	default:
		h.Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-lab","object":"chat.completion","created":0,"model":"lab-1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}
	return http.StatusOK
}
