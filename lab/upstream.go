package lab

import (
	"net"
	"net/http"
	"strconv"
	"sync"
)

// Upstream is the origin behind the gateway. Its answer is driven by the request so that
// tests need no shared schedule: ?fail=K answers 502 to attempts 0..K-1 (as numbered by
// x-retry-attempt) and 200 after; ?status=S always answers S. It counts the requests it
// served per x-request-id.
type Upstream struct {
	Addr string
	srv  *http.Server

	mu   sync.Mutex
	hits map[string]int
}

// StartUpstream listens on a free loopback port.
func StartUpstream() (*Upstream, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{Addr: l.Addr().String(), hits: map[string]int{}}
	u.srv = &http.Server{Handler: u}
	go u.srv.Serve(l)
	return u, nil
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.hits[r.Header.Get("X-Request-Id")]++
	u.mu.Unlock()
	q := r.URL.Query()
	if s, err := strconv.Atoi(q.Get("status")); err == nil && s >= 100 && s <= 599 {
		w.WriteHeader(s)
		return
	}
	attempt, _ := strconv.Atoi(r.Header.Get("X-Retry-Attempt"))
	if fail, err := strconv.Atoi(q.Get("fail")); err == nil && attempt < fail {
		http.Error(w, "injected failure", http.StatusBadGateway)
		return
	}
	w.Write([]byte("ok\n"))
}

// Hits returns how many requests carried request id id.
func (u *Upstream) Hits(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[id]
}

// Close stops the upstream.
func (u *Upstream) Close() error { return u.srv.Close() }
