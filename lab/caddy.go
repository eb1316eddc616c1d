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

// ErrNoCaddy means no caddy binary was found.
var ErrNoCaddy = errors.New("caddy not found (Debian: apt-get install caddy)")

// Caddy is a running Caddy reverse proxy writing its default JSON access log.
type Caddy struct {
	*server
	Addr string
	Dir  string
	Log  string
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
	c := &Caddy{Addr: addr, Dir: dir, Log: filepath.Join(dir, "access.json")}
	var conf bytes.Buffer
	if err := caddyTmpl.Execute(&conf, map[string]string{"Addr": addr, "Log": c.Log, "Upstream": upstream}); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", confPath, "--adapter", "caddyfile")
	// Caddy keeps state under $HOME and the XDG directories: keep it in dir.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if c.server, err = startServer("caddy", cmd, addr, syscall.SIGINT); err != nil {
		return nil, err
	}
	return c, nil
}
