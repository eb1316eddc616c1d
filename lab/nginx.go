package lab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/template"

	"github.com/retrylens/retrylens/parse"
)

// ErrNoNginx means no nginx binary was found.
var ErrNoNginx = errors.New("nginx not found (Debian: apt-get install nginx-light)")

// JSONFormat is the escape=json log_format the lab's nginx writes next to the retry text
// log: the same fields, keys named after the variables.
const JSONFormat = `{"time_iso8601":"$time_iso8601","msec":"$msec","remote_addr":"$remote_addr","request":"$request",` +
	`"status":"$status","body_bytes_sent":"$body_bytes_sent","http_referer":"$http_referer","http_user_agent":"$http_user_agent",` +
	`"request_time":"$request_time","upstream_response_time":"$upstream_response_time","upstream_status":"$upstream_status",` +
	`"http_x_retry_attempt":"$http_x_retry_attempt","http_x_retry_reason":"$http_x_retry_reason","http_x_request_id":"$http_x_request_id",` +
	`"http_idempotency_key":"$http_idempotency_key","sent_http_retry_after":"$sent_http_retry_after"}`

// Nginx is a running nginx process with a private prefix directory. Stop it with Stop,
// which also flushes its logs.
type Nginx struct {
	*server
	Addr    string // host:port it listens on
	Dir     string
	TextLog string // access log in the "retry" format
	JSONLog string // access log in JSONFormat
	// AlsoLogs are the access logs of NginxOptions.AlsoFormats, in order: the same
	// requests, written as other log_formats write them.
	AlsoLogs []string
}

var confTmpl = template.Must(template.New("nginx.conf").Parse(`daemon off;
master_process off;
worker_processes 1;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path {{.Dir}}/tmp/body;
    proxy_temp_path {{.Dir}}/tmp/proxy;
    fastcgi_temp_path {{.Dir}}/tmp/fastcgi;
    uwsgi_temp_path {{.Dir}}/tmp/uwsgi;
    scgi_temp_path {{.Dir}}/tmp/scgi;
    log_format retry '{{.Retry}}';
    log_format retry_json escape=json '{{.JSON}}';
    {{- range $i, $f := .Also}}
    log_format also{{$i}} '{{$f}}';
    {{- end}}
    limit_req_zone $binary_remote_addr zone=lab:1m rate=10r/s;
    upstream backend {
        {{- if .Random}}
        random;
        {{- end}}
        {{- range .Upstreams}}
        server {{.}} max_fails=0;
        {{- end}}
        keepalive 32;
    }
    server {
        listen {{.Addr}}{{if .GRPC}} http2{{end}};
        access_log {{.TextLog}} retry;
        access_log {{.JSONLog}} retry_json;
        {{- range $i, $l := .AlsoLogs}}
        access_log {{$l}} also{{$i}};
        {{- end}}
        location / {
            {{- if .GRPC}}
            grpc_pass grpc://backend;
        }
        {{- else}}
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            {{- if .NextUpstream}}
            proxy_next_upstream error timeout http_502 http_503;
            proxy_next_upstream_tries 2;
            {{- else}}
            proxy_next_upstream off;
            {{- end}}
            proxy_read_timeout 30s;
        }
        {{- end}}
        # limit_req's own throttling: 503 past 10 requests a second, with Retry-After
        # under /api/throttled-ra, without it under /api/throttled
        location /api/throttled-ra {
            limit_req zone=lab;
            add_header Retry-After 1 always;
            proxy_pass http://backend;
        }
        location /api/throttled {
            limit_req zone=lab;
            proxy_pass http://backend;
        }
    }
}
`))

// StartNginx starts nginx in dir, proxying to upstream (host:port), and waits until it
// accepts connections. Stop it with Stop, which also flushes its logs.
func StartNginx(dir, upstream string) (*Nginx, error) {
	return StartNginxWith(dir, NginxOptions{Upstreams: []string{upstream}})
}

// NginxOptions are how the lab's nginx proxies.
type NginxOptions struct {
	Upstreams []string // host:port each, taken in turn
	// NextUpstream makes nginx retry a request on the next upstream after an error, a
	// timeout, a 502 or a 503 (proxy_next_upstream, two tries at most): the gateway's own
	// retries, logged in $upstream_status as "502, 200".
	NextUpstream bool
	// TZ is nginx's time zone (its $time_local), and SecondsOnly logs the time to the
	// second: the retry format with "msec=-" where $msec was, as a log_format without
	// $msec writes it.
	TZ          string
	SecondsOnly bool
	// Format is the text log's log_format; "" is the retry preset's.
	Format string
	// GRPC makes nginx a gRPC gateway: HTTP/2 without TLS, grpc_pass to the upstreams.
	GRPC bool
	// Random takes the upstreams at random (an address listed twice is twice as likely)
	// rather than in turn, whose cycle a client's own cycle of attempts can keep in step.
	Random bool
	// AlsoFormats are more log_formats nginx writes each request in, each to its own
	// access log (Nginx.AlsoLogs).
	AlsoFormats []string
}

// StartNginxWith starts nginx in dir as o says, and waits until it accepts connections.
// Stop it with Stop, which also flushes its logs.
func StartNginxWith(dir string, o NginxOptions) (*Nginx, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return nil, ErrNoNginx
		}
		bin = "/usr/sbin/nginx"
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n := &Nginx{
		Addr:    addr,
		Dir:     dir,
		TextLog: filepath.Join(dir, "access.log"),
		JSONLog: filepath.Join(dir, "access.json"),
	}
	for i := range o.AlsoFormats {
		n.AlsoLogs = append(n.AlsoLogs, filepath.Join(dir, fmt.Sprintf("also%d.log", i)))
	}
	var conf bytes.Buffer
	format := parse.Retry
	if o.Format != "" {
		format = o.Format
	}
	if o.SecondsOnly {
		format = strings.Replace(format, "msec=$msec", "msec=-", 1)
	}
	err = confTmpl.Execute(&conf, map[string]any{
		"Dir": dir, "Addr": addr, "Upstreams": o.Upstreams, "NextUpstream": o.NextUpstream, "TextLog": n.TextLog, "JSONLog": n.JSONLog, "GRPC": o.GRPC, "Random": o.Random,
		"Retry": format, "JSON": JSONFormat, "Also": o.AlsoFormats, "AlsoLogs": n.AlsoLogs,
	})
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	if o.TZ != "" {
		cmd.Env = append(os.Environ(), "TZ="+o.TZ) // nginx keeps TZ from its environment
	}
	// SIGQUIT: nginx's graceful shutdown.
	if n.server, err = startServer("nginx", cmd, addr, syscall.SIGQUIT); err != nil {
		return nil, err
	}
	return n, nil
}

// freeAddr returns a loopback address nothing listens on, for a server to bind. The port
// is free only once the probe closes, so the kernel can hand it out again: to another
// gateway starting at the same time (TestLab starts three), which then binds it too
// (HAProxy sets SO_REUSEPORT) or fails. Ports handed out once in this process are never
// handed out again.
func freeAddr() (string, error) {
	l, err := listenUnused()
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// listenUnused listens on a loopback port freeAddr never handed out, and marks it used.
func listenUnused() (net.Listener, error) {
	usedMu.Lock()
	defer usedMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		if addr := l.Addr().String(); !used[addr] {
			used[addr] = true
			return l, nil
		}
		l.Close()
	}
	return nil, errors.New("lab: no loopback port that was not handed out before")
}

// FreeAddr is freeAddr for a server a test starts itself (retrylens watch): a port no
// lab server is handed too.
func FreeAddr() (string, error) { return freeAddr() }

var (
	usedMu sync.Mutex
	used   = map[string]bool{} // the addresses freeAddr handed out
)

// Reopen makes nginx reopen its log files (SIGUSR1, what logrotate's postrotate sends):
// until it has, it writes to the files it has open, wherever they were renamed to.
func (n *Nginx) Reopen() error { return n.cmd.Process.Signal(syscall.SIGUSR1) }
