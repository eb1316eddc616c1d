package lab

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"text/template"
)

// ErrNoHAProxy means no haproxy binary was found.
var ErrNoHAProxy = errors.New("haproxy not found (Debian: apt-get install haproxy)")

// HAProxy is a running HAProxy writing `option httplog` lines, with the retry headers
// captured in the haproxy preset's order, to Log.
type HAProxy struct {
	*server
	Addr string
	Dir  string
	Log  string
	log  *os.File
}

// Logs go to stdout, which is the log file. HAProxy writes them without waiting and drops
// a line when another thread is writing one (haproxy/haproxy#1861, "works as designed"):
// one in 60 went missing beside the CPU-bound tests, so it runs one thread. dontlognull (as in Debian's default configuration) leaves out the
// connections that sent nothing, such as the lab's readiness probe. HAProxy's own retries are for connection failures only (the default):
// the lab's upstream always answers, so every line is one try.
var haproxyTmpl = template.Must(template.New("haproxy.cfg").Parse(`global
    nbthread 1
    # a soft stop waits for clients' idle keep-alive connections too: bounded
    hard-stop-after 5s
    log stdout format raw local0
defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 1s
    timeout client 30s
    timeout server 30s
frontend lab
    bind {{.Addr}}
    capture request header X-Retry-Attempt len 16
    capture request header X-Request-Id len 128
    capture request header Idempotency-Key len 128
    capture request header User-Agent len 128
    capture response header Retry-After len 64
    default_backend upstream
backend upstream
    server up {{.Upstream}}
`))

// StartHAProxy starts HAProxy in dir, proxying to upstream (host:port), and waits until
// it accepts connections.
func StartHAProxy(dir, upstream string) (*HAProxy, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/haproxy"); serr != nil {
			return nil, ErrNoHAProxy
		}
		bin = "/usr/sbin/haproxy"
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	h := &HAProxy{Addr: addr, Dir: dir, Log: filepath.Join(dir, "haproxy.log")}
	var conf bytes.Buffer
	if err := haproxyTmpl.Execute(&conf, map[string]string{"Addr": addr, "Upstream": upstream}); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if h.log, err = os.Create(h.Log); err != nil {
		return nil, err
	}
	// -db: stay in the foreground; TZ: %tr is local time, and the parser reads it as UTC.
	cmd := exec.Command(bin, "-db", "-f", confPath)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.Stdout = h.log
	// SIGUSR1: soft stop, in-flight requests finish (and are logged) first.
	if h.server, err = startServer("haproxy", cmd, addr, syscall.SIGUSR1); err != nil {
		h.log.Close()
		return nil, err
	}
	return h, nil
}

// Stop stops HAProxy and closes its log.
func (h *HAProxy) Stop() error {
	err := h.server.Stop()
	if cerr := h.log.Close(); err == nil {
		err = cerr
	}
	return err
}
