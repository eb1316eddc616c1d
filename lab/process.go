package lab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a gateway process started by the lab: started, waited for until it accepts
// connections on addr, and stopped gracefully with its own signal.
type server struct {
	name   string
	addr   string
	cmd    *exec.Cmd
	out    bytes.Buffer
	done   chan error
	stop   syscall.Signal
	once   sync.Once
	stopEr error
}

// startServer starts cmd and waits, at most 5 s, until addr accepts a connection.
func startServer(name string, cmd *exec.Cmd, addr string, stop syscall.Signal) (*server, error) {
	s := &server{name: name, addr: addr, cmd: cmd, done: make(chan error, 1), stop: stop}
	if cmd.Stdout == nil { // a server that logs to stdout (HAProxy) brings its own
		cmd.Stdout = &s.out
	}
	cmd.Stderr = &s.out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { s.done <- cmd.Wait() }()
	for range 100 {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("%s exited at start: %v: %s", name, err, strings.TrimSpace(s.out.String()))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("%s did not listen on %s within 5s: %s", name, addr, s.out.String())
}

// Stop sends the server its graceful-stop signal (in-flight requests finish and are
// logged) and waits for it, killing it after 10 s. Calling it again returns the first
// result.
func (s *server) Stop() error {
	s.once.Do(func() {
		s.cmd.Process.Signal(s.stop)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			s.stopEr = errors.New(s.name + " did not stop within 10s; killed")
		}
	})
	return s.stopEr
}

// URL returns the server's base URL.
func (s *server) URL() string { return "http://" + s.addr }

// PID is the server's process id.
func (s *server) PID() int { return s.cmd.Process.Pid }
