package parse

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// PresetInfo is a preset format: what --log-format names, detection tries, and the
// formats command lists.
type PresetInfo struct {
	Name  string
	About string // what it reads, for a person
	// Example is a line of it, for the presets AppendRecord does not write (the others'
	// examples are written from a record).
	Example string
	// Sees is which retries its lines show (docs/formats.md, "Which layer"): a client's
	// (an attempt header or span), the gateway's own (its tries of the upstream), both,
	// or neither.
	Sees string
	new  func() *Format
}

// The layers a preset sees (PresetInfo.Sees).
const (
	SeesBoth    = "client and gateway retries"
	SeesClient  = "client retries"
	SeesGateway = "gateway retries (client retries only with --infer-attempts)"
	SeesNeither = "no retries (client retries only with --infer-attempts)"
)

// IngressNginx is ingress-nginx's default log_format (upstreaminfo): the gateway's tries
// as lists, and $req_id, nginx's own id of each request, which is no client's key.
const IngressNginx = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" ` +
	`$request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr ` +
	`$upstream_response_length $upstream_response_time $upstream_status $req_id`

// presets are every preset, in the order detection tries them: the most specific first
// (retry-sdk before retry before combined, each extending the next one's lines).
var presets = []PresetInfo{
	{Name: "retry-sdk-full", Sees: SeesBoth, About: "retry-sdk plus the error code answered (x-amzn-ErrorType), which tells throttles that are not 429, the operation (X-Amz-Target), which tells reads that are POSTs, and retry-after-ms",
		new: func() *Format { return mustCompile("retry-sdk-full", RetrySDKFull, EscapeDefault) }},
	{Name: "retry-sdk", Sees: SeesBoth, About: "retry plus the SDKs' own headers: amz-sdk-request, amz-sdk-invocation-id, x-stainless-retry-count",
		new: func() *Format { return mustCompile("retry-sdk", RetrySDK, EscapeDefault) }},
	{Name: "retry", Sees: SeesBoth, About: "combined plus request time, upstream status, the retry headers and $msec",
		new: func() *Format { return mustCompile("retry", Retry, EscapeDefault) }},
	{Name: "haproxy", Sees: SeesBoth, About: "HAProxy's option httplog, raw or behind syslog, capturing X-Retry-Attempt, X-Request-Id, Idempotency-Key and User-Agent in that order (--haproxy-captures)",
		Example: `10.0.0.7:53412 [29/Nov/2026:14:20:01.500] web api/s1 0/0/1/11/12 502 157 - - ---- 1/1/0/0/0 0/0 {1|req-7f3a||checkout-web/2.3} "GET /api/orders/1042 HTTP/1.1"`,
		new:     func() *Format { f, _ := HAProxy(nil); return f }},
	{Name: "ingress-nginx", Sees: SeesGateway, About: "ingress-nginx's default log_format (upstreaminfo): the upstream tries as lists, no attempt header",
		new: func() *Format { return mustCompile("ingress-nginx", IngressNginx, EscapeDefault) }},
	{Name: "combined", Sees: SeesNeither, About: "nginx's default log_format (and Apache's Combined Log Format); no attempt numbers",
		new: func() *Format { return mustCompile("combined", Combined, EscapeDefault) }},
	{Name: "nginx-json", Sees: SeesBoth, About: "one JSON object per line from a log_format with escape=json, keys named after the variables",
		new: func() *Format { return &Format{Name: "nginx-json", dialect: jsonDialect{jsonNginx}, keys: variables} }},
	{Name: "caddy", Sees: SeesClient, About: "Caddy's default JSON access log (log { format json })",
		new: func() *Format {
			return &Format{Name: "caddy", dialect: jsonDialect{jsonCaddy}, keys: caddyKeys, foldKeys: true}
		}},
	{Name: "envoy", Sees: SeesBoth, About: "Envoy's JSON access log with Istio's key names (start_time, duration ms, response_code, …) plus x_retry_attempt, x_envoy_attempt_count and upstream_request_attempt_count",
		Example: `{"start_time":"2026-11-29T14:20:01.500Z","method":"GET","path":"/api/orders/1042","protocol":"HTTP/1.1","response_code":502,"duration":12,"bytes_sent":157,"user_agent":"checkout-web/2.3","request_id":"req-7f3a","authority":"shop.local","upstream_host":"10.0.0.9:8080","downstream_remote_address":"10.0.0.7:53412","upstream_request_attempt_count":1,"x_retry_attempt":"1"}`,
		new:     func() *Format { return &Format{Name: "envoy", dialect: jsonDialect{}, keys: envoyKeys, foldKeys: true} }},
	{Name: "traefik", Sees: SeesBoth, About: "Traefik's JSON access log (StartUTC, Duration ns, RetryAttempts) with request headers kept (accessLog.fields.headers)",
		Example: `{"ClientHost":"10.0.0.7","DownstreamStatus":502,"DownstreamContentSize":157,"Duration":12000000,"OriginStatus":502,"RequestHost":"shop.local","RequestMethod":"GET","RequestPath":"/api/orders/1042","RequestProtocol":"HTTP/1.1","RetryAttempts":0,"ServiceAddr":"10.0.0.9:8080","StartUTC":"2026-11-29T14:20:01.5Z","request_User-Agent":"checkout-web/2.3","request_X-Retry-Attempt":"1","request_X-Request-Id":"req-7f3a"}`,
		new: func() *Format {
			return &Format{Name: "traefik", dialect: jsonDialect{}, keys: traefikKeys, foldKeys: true}
		}},
	{Name: "kong", Sees: SeesBoth, About: "the JSON of Kong's logging plugins (file-log, http-log): started_at, latencies.request, request.headers, tries",
		Example: `{"request":{"method":"GET","uri":"/api/orders/1042","headers":{"host":"shop.local","user-agent":"checkout-web/2.3","x-retry-attempt":"1","x-request-id":"req-7f3a"}},"response":{"status":502,"size":157},"tries":[{"ip":"10.0.0.9","port":8080}],"client_ip":"10.0.0.7","started_at":1795962001500,"latencies":{"request":12}}`,
		new:     func() *Format { return &Format{Name: "kong", dialect: jsonDialect{}, keys: kongKeys, foldKeys: true} }},
	{Name: "otel", Sees: SeesClient, About: "attempts from OpenTelemetry client spans, as ingest writes them from OTLP JSON or Jaeger's JSON (given those files, ingest converts them itself)",
		Example: `{"span_start":"2026-11-29T14:20:01.5Z","span_duration_ns":12000000,"method":"GET","uri":"/api/orders/1042","host":"shop.local","status":502,"client":"web-1","service":"checkout-web/2.3","x_retry_attempt":1,"request_id":"4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-e64da301","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"}`,
		new:     func() *Format { return &Format{Name: "otel", dialect: jsonDialect{}, keys: otelKeys} }},
}

// Presets returns every preset, sorted by name.
func Presets() []PresetInfo {
	ps := slices.Clone(presets)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return names
}

// Preset returns the named preset format (see Presets).
func Preset(name string) (*Format, error) {
	for _, p := range presets {
		if p.Name == name {
			return p.new(), nil
		}
	}
	return nil, fmt.Errorf("unknown log format %q: want one of %s", name, strings.Join(PresetNames(), ", "))
}

// ErrUnknownFormat means no preset matches the start of a file.
var ErrUnknownFormat = errors.New("no known log format matches")

// Detect picks the preset that parses most of lines, a file's first non-blank lines.
// It fails when none parses at least half of them, naming the closest preset and its
// first error, so that the user knows what to fix. A JSON preset reads any JSON object,
// so a line counts for it only when it found the line's time there; when the first line
// is a JSON object the JSON presets go first, so that the closest format named on
// failure is a JSON one.
func Detect(lines [][]byte) (*Format, error) {
	if len(lines) == 0 {
		return Preset("retry") // empty input: nothing to get wrong
	}
	var candidates []*Format
	for _, p := range presets {
		candidates = append(candidates, p.new())
	}
	jsonFirst := false
	if t := bytes.TrimSpace(lines[0]); len(t) > 0 && t[0] == '{' {
		jsonFirst = true
		sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].JSON() && !candidates[j].JSON() })
	}
	var best *Format
	bestOK := -1
	var bestErr error
	for _, f := range candidates {
		ok := 0
		var first error
		for _, l := range lines {
			r, err := f.ParseLine(l)
			if err == nil && r.Time.IsZero() {
				err = fmt.Errorf("no time found under the %s keys", f.Name)
			}
			if err == nil {
				ok++
			} else if first == nil {
				first = err
			}
		}
		if ok > bestOK {
			best, bestOK, bestErr = f, ok, first
		}
	}
	if bestOK*2 >= len(lines) && best.Name == "combined" && longerThanCombined(best, lines) {
		return nil, fmt.Errorf("%w: the lines read as %q go on after the user agent with name=value fields (%s): "+
			"a longer format, which combined would fold into the user agent and read without attempt numbers; "+
			"give it with --nginx-format '<log_format string>' (or --nginx-conf FILE --log-format-name NAME), "+
			"or log the retry-sdk preset (retrylens formats)", ErrUnknownFormat, best.Name, tailExcerpt(best, lines))
	}
	if bestOK*2 < len(lines) {
		if longer, tail := extended(lines); longer != nil {
			return nil, fmt.Errorf("%w: the lines are the %s preset's with more fields after its last (%s), which it would misread; "+
				"give the whole format: --nginx-format '%s%s'", ErrUnknownFormat, longer.Name, excerpt(tail, 0, 40), longer.Source, namedVariables(tail))
		}
		how := "give the format with --nginx-format '<log_format string>' (or --nginx-conf FILE --log-format-name NAME)"
		if jsonFirst {
			how = "this is JSON: name its keys with --field NAME=KEY.PATH, e.g. --field time=ts --field status=status --field attempt=headers.x-retry-attempt"
		}
		return nil, fmt.Errorf("%w: closest is %q, which parsed %d of the first %d lines; its first error: %v; %s",
			ErrUnknownFormat, best.Name, bestOK, len(lines), bestErr, how)
	}
	return best, nil
}

// extended finds the text preset that reads most of lines but for fields after its last
// (ErrTrailing), and returns it with the first such line's extra text.
func extended(lines [][]byte) (*Format, string) {
	for _, p := range presets {
		f := p.new()
		if f.JSON() || f.Source == "" {
			continue
		}
		n, tail := 0, ""
		for _, l := range lines {
			var perr *Error
			if _, err := f.ParseLine(l); errors.As(err, &perr) && perr.Err == ErrTrailing {
				n++
				if tail == "" && perr.Column-1 < len(l) {
					tail = string(l[perr.Column-1:])
				}
			}
		}
		if n*2 >= len(lines) && tail != "" {
			return f, tail
		}
	}
	return nil, ""
}

// presetVariables are the name=$variable pairs of the text presets (ram="$sent_http_retry_after_ms"):
// what a field after a preset's last most likely logs.
var presetVariables = func() map[string]string {
	out := map[string]string{}
	for _, m := range namedField.FindAllStringSubmatch(RetrySDKFull+" "+IngressNginx, -1) {
		out[m[1]] = m[2]
	}
	return out
}()

var namedField = regexp.MustCompile(`(\w+)="?(\$\w+)`)

// namedVariables writes the name=value fields of tail as a log_format's text, each with
// the variable the presets log under that name, or a placeholder to fill in.
func namedVariables(tail string) string {
	var b strings.Builder
	for _, m := range regexp.MustCompile(`(\w+)=("?)`).FindAllStringSubmatch(tail, -1) {
		v, ok := presetVariables[m[1]]
		if !ok {
			v = "$<variable of " + m[1] + ">"
		}
		fmt.Fprintf(&b, " %s=%s%s%s", m[1], m[2], v, m[2])
	}
	return b.String()
}

// foldedField finds, in a user agent, where a quoted value closed and a name=value field
// began: the mark of a line longer than combined ('" rt=', '" msec=', '" amz="').
func foldedField(ua string) int {
	for i := 0; i+2 < len(ua); i++ {
		if ua[i] != '"' || ua[i+1] != ' ' {
			continue
		}
		j := i + 2
		for j < len(ua) && (ua[j] >= 'a' && ua[j] <= 'z' || ua[j] >= 'A' && ua[j] <= 'Z' || ua[j] >= '0' && ua[j] <= '9' || ua[j] == '_' || ua[j] == '-') {
			j++
		}
		if j > i+2 && j < len(ua) && ua[j] == '=' {
			return i
		}
	}
	return -1
}

// longerThanCombined reports whether most lines f parses fold a name=value field into
// their user agent.
func longerThanCombined(f *Format, lines [][]byte) bool {
	folded, parsed := 0, 0
	for _, l := range lines {
		r, err := f.ParseLine(l)
		if err != nil {
			continue
		}
		parsed++
		if foldedField(r.UserAgent) >= 0 {
			folded++
		}
	}
	return parsed > 0 && folded*2 > parsed
}

// tailExcerpt shows what the first line that folds fields into its user agent has after
// the user agent.
func tailExcerpt(f *Format, lines [][]byte) string {
	for _, l := range lines {
		r, err := f.ParseLine(l)
		if err != nil {
			continue
		}
		if i := foldedField(r.UserAgent); i >= 0 {
			tail := r.UserAgent[i+2:]
			if len(tail) > 60 {
				tail = tail[:60] + "…"
			}
			return strconv.Quote(tail)
		}
	}
	return ""
}
