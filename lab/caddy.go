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
	"time"
)

// ErrNoCaddy means no caddy binary was found.
var ErrNoCaddy = errors.New("caddy not found (Debian: apt-get install caddy)")

// Caddy is a running Caddy reverse proxy writing its default JSON access log.
type Caddy struct {
	Addr string
	Dir  string
	Log  string
	cmd  *exec.Cmd
	done chan error

	stopOnce sync.Once
	stopErr  error
}

var caddyTmpl = template.Must(template.New("Caddyfile").Parse(`{
	admin off
	auto_https off
	log default {
		output discard
	}
}
http://{{.Addr}} {
	log {
		output file {{.Log}}
		format json
	}
	reverse_proxy {{.Upstream}}
}
`))

// StartCaddy starts Caddy in dir, proxying to upstream (host:port), and waits until it
// accepts connections.
func StartCaddy(dir, upstream string) (*Caddy, error) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return nil, ErrNoCaddy
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &Caddy{Addr: addr, Dir: dir, Log: filepath.Join(dir, "access.json"), done: make(chan error, 1)}
	var conf bytes.Buffer
	if err := caddyTmpl.Execute(&conf, map[string]string{"Addr": addr, "Log": c.Log, "Upstream": upstream}); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	c.cmd = exec.Command(bin, "run", "--config", confPath, "--adapter", "caddyfile")
	// Caddy keeps state under $HOME and the XDG directories: keep it in dir.
	c.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	c.cmd.Stdout, c.cmd.Stderr = &out, &out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start caddy: %w", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	for range 100 {
		select {
		case err := <-c.done:
			return nil, fmt.Errorf("caddy exited at start: %v: %s", err, strings.TrimSpace(out.String()))
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			conn.Close()
			return c, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Stop()
	return nil, fmt.Errorf("caddy did not listen on %s within 5s: %s", addr, out.String())
}

// URL returns the base URL of the Caddy front.
func (c *Caddy) URL() string { return "http://" + c.Addr }

// Stop shuts Caddy down gracefully (SIGINT) and waits for it, killing it after 10 s.
func (c *Caddy) Stop() error {
	c.stopOnce.Do(func() {
		c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
			c.stopErr = errors.New("caddy did not stop within 10s; killed")
		}
	})
	return c.stopErr
}
