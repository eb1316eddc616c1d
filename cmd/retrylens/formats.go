package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/parse"
)

// presetText says what each preset reads.
var presetText = map[string]string{
	"combined":   "nginx's default log_format (and Apache's Combined Log Format); no attempt numbers",
	"retry":      "combined plus request time, upstream status, the retry headers and $msec",
	"nginx-json": "one JSON object per line from a log_format with escape=json, keys named after the variables",
	"caddy":      "Caddy's default JSON access log (log { format json })",
	"envoy":      "Envoy's JSON access log with Istio's key names (start_time, duration ms, response_code, …) plus x_retry_attempt, x_envoy_attempt_count and upstream_request_attempt_count",
	"traefik":    "Traefik's JSON access log (StartUTC, Duration ns, RetryAttempts) with request headers kept (accessLog.fields.headers)",
	"kong":       "the JSON of Kong's logging plugins (file-log, http-log): started_at, latencies.request, request.headers, tries",
	"haproxy":    "HAProxy's option httplog, raw or behind syslog, capturing X-Retry-Attempt, X-Request-Id, Idempotency-Key and User-Agent in that order (--haproxy-captures)",
}

// readOnlyExamples are example lines of the presets retrylens reads but does not write.
var readOnlyExamples = map[string]string{
	"envoy":   `{"start_time":"2026-11-29T14:20:01.500Z","method":"GET","path":"/api/orders/1042","protocol":"HTTP/1.1","response_code":502,"duration":12,"bytes_sent":157,"user_agent":"checkout-web/2.3","request_id":"req-7f3a","authority":"shop.local","upstream_host":"10.0.0.9:8080","downstream_remote_address":"10.0.0.7:53412","upstream_request_attempt_count":1,"x_retry_attempt":"1"}`,
	"traefik": `{"ClientHost":"10.0.0.7","DownstreamStatus":502,"DownstreamContentSize":157,"Duration":12000000,"OriginStatus":502,"RequestHost":"shop.local","RequestMethod":"GET","RequestPath":"/api/orders/1042","RequestProtocol":"HTTP/1.1","RetryAttempts":0,"ServiceAddr":"10.0.0.9:8080","StartUTC":"2026-11-29T14:20:01.5Z","request_User-Agent":"checkout-web/2.3","request_X-Retry-Attempt":"1","request_X-Request-Id":"req-7f3a"}`,
	"kong":    `{"request":{"method":"GET","uri":"/api/orders/1042","headers":{"host":"shop.local","user-agent":"checkout-web/2.3","x-retry-attempt":"1","x-request-id":"req-7f3a"}},"response":{"status":502,"size":157},"tries":[{"ip":"10.0.0.9","port":8080}],"client_ip":"10.0.0.7","started_at":1795962001500,"latencies":{"request":12}}`,
	"haproxy": `10.0.0.7:53412 [29/Nov/2026:14:20:01.500] web api/s1 0/0/1/11/12 502 157 - - ---- 1/1/0/0/0 0/0 {1|req-7f3a||checkout-web/2.3} "GET /api/orders/1042 HTTP/1.1"`,
}

func (e *env) formatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "formats",
		Short: "List the input format presets, with an example line each",
		Long: `List the input format presets (--log-format NAME), with an example line each.

Any other nginx format works with --nginx-format '<log_format string>' or
--nginx-conf /etc/nginx/nginx.conf --log-format-name NAME; 'retrylens ingest --dry-run
FILE' shows how a file's first lines parse. Any other JSON log works with --field
NAME=KEY.PATH (repeatable), alone or on top of a JSON preset.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			example := parse.Record{
				Time: time.Date(2026, 11, 29, 14, 20, 1, 512e6, time.UTC), RemoteAddr: "10.0.0.7", Method: "GET",
				URI: "/api/orders/1042", Protocol: "HTTP/1.1", Status: 502, Bytes: 157, UserAgent: "checkout-web/2.3",
				RequestTime: 0.012, UpstreamStatus: "502", UpstreamResponseTime: "0.011", Attempt: 1,
				AttemptSource: "x-retry-attempt", RetryReason: "status_502", RequestID: "req-7f3a",
			}
			var b strings.Builder
			for _, name := range parse.PresetNames() {
				f, _ := parse.Preset(name)
				line := readOnlyExamples[name]
				if f.HasFormatter() {
					line = string(f.AppendRecord(nil, &example))
				}
				fmt.Fprintf(&b, "%s\n  %s\n  %s\n", name, presetText[name], line)
			}
			_, err := fmt.Fprint(e.stdout, b.String())
			return err
		},
	}
}
