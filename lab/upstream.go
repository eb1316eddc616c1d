package lab

import (
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Faults is the upstream's failure schedule. Decisions are drawn from a hash of the
// request id and attempt number, so a run is reproducible up to timing; the incident
// window is measured from Reset.
type Faults struct {
	Seed          uint64
	BaselineFail  float64       // share of GETs on /api/items answered 502 outside the incident
	IncidentFrom  time.Duration // incident window, since Reset
	IncidentTo    time.Duration
	IncidentFail  float64       // share answered 502 during the incident
	IncidentDelay time.Duration // added to every /api/items answer during the incident (a GC pause)
	SlowShare     float64       // share of /api/items attempts that take Slow (a long tail: what hedging is for)
	Slow          time.Duration

	LimitPerSec int // /api/limited: requests allowed per second; the rest get 429

	SlowWriteShare float64       // share of first-attempt POSTs on /api/orders that take SlowWrite
	SlowWrite      time.Duration // longer than the naive client's timeout: the write happens, the answer is late
	SlowEvery      bool          // SlowWriteShare applies to every attempt, not only the first
	WriteFail      float64       // share of writes answered 502 without writing
	WriteLimit     int           // writes allowed per second; the rest get 429 before any handler runs (no write)

	Capacity Capacity // GET /api/work: a service of fixed capacity (capacity.go)
}

// Upstream is the origin behind the gateways:
//
//	GET  /api/items/ID   502s on the Faults schedule, else 200
//	GET  /api/limited    429 over LimitPerSec, with Retry-After: 1 on three in four of them
//	POST /api/orders, PUT /api/orders/ID
//	                     performs the write at once, answers 201 (late, for slow writes),
//	                     or 502 without writing (WriteFail), or 429 over WriteLimit a
//	                     second, without writing
//	GET  /api/work       a service of fixed capacity (Faults.Capacity): 503 when its
//	                     queue is full, else 200 after waiting for a worker and its service
//	any  ?status=S       answers S; ?fail=K answers 502 to attempts 0..K-1, then 200
//
// It counts the writes it performed per request (X-Lab-Id, which the lab's client sends
// whether or not it sends X-Request-Id).
type Upstream struct {
	Addr string
	srv  *http.Server

	mu     sync.Mutex
	faults Faults
	start  time.Time
	writes map[string]int
	served int   // requests handled since Reset
	window int64 // current second of the rate limiter
	used   int
	// the write limiter's
	writeWindow int64
	writeUsed   int
	capacity    capacityState
}

// StartUpstream listens on a free loopback port, never one freeAddr handed to a gateway
// that may not have bound it yet.
func StartUpstream() (*Upstream, error) {
	l, err := listenUnused()
	if err != nil {
		return nil, err
	}
	u := &Upstream{Addr: l.Addr().String(), writes: map[string]int{}, start: time.Now()}
	u.srv = &http.Server{Handler: u}
	go u.srv.Serve(l)
	return u, nil
}

// Reset sets the failure schedule, restarts its clock and clears the write counts.
func (u *Upstream) Reset(f Faults) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.faults, u.start, u.writes, u.window, u.used, u.writeWindow, u.writeUsed, u.served = f, time.Now(), map[string]int{}, 0, 0, 0, 0, 0
	u.resetCapacity(f.Capacity)
}

// draw returns a number in [0, 1) fixed by the seed, a salt, the request id and attempt.
func (u *Upstream) draw(salt string, r *http.Request) float64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(u.faults.Seed, 10) + "/" + salt + "/" + r.Header.Get("X-Lab-Id") + "/" + r.Header.Get("X-Retry-Attempt")))
	return float64(mix(h.Sum64())>>11) / float64(1<<53)
}

// mix is splitmix64's finalizer. FNV alone barely moves its top bits when only the last
// byte changes (attempt "0" vs "1"), which would make failures stick to a request id.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.served++
	u.mu.Unlock()
	q := r.URL.Query()
	if s, err := strconv.Atoi(q.Get("status")); err == nil && s >= 100 && s <= 599 {
		w.WriteHeader(s)
		return
	}
	attempt, _ := strconv.Atoi(r.Header.Get("X-Retry-Attempt"))
	if fail, err := strconv.Atoi(q.Get("fail")); err == nil {
		if attempt < fail {
			http.Error(w, "injected failure", http.StatusBadGateway)
			return
		}
		w.Write([]byte("ok\n"))
		return
	}
	switch {
	case (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/api/orders"):
		u.write(w, r, attempt)
	case r.URL.Path == "/api/limited":
		u.limited(w, r)
	case r.URL.Path == "/api/work":
		u.work(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/items/"):
		u.items(w, r)
	default:
		w.Write([]byte("ok\n"))
	}
}

func (u *Upstream) items(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	f, since := u.faults, time.Since(u.start)
	fail := f.BaselineFail
	incident := since >= f.IncidentFrom && since < f.IncidentTo
	if incident {
		fail = f.IncidentFail
	}
	x := u.draw("items", r)
	slow := f.SlowShare > 0 && u.draw("slow", r) < f.SlowShare
	u.mu.Unlock()
	if incident && f.IncidentDelay > 0 {
		time.Sleep(f.IncidentDelay)
	}
	if slow {
		// Cut short when the client goes: a hedge that lost leaves no handler running.
		select {
		case <-time.After(f.Slow):
		case <-r.Context().Done():
			return
		}
	}
	if x < fail {
		http.Error(w, "upstream failure", http.StatusBadGateway)
		return
	}
	w.Write([]byte(`{"id":1}` + "\n"))
}

func (u *Upstream) limited(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	sec := int64(time.Since(u.start) / time.Second)
	if sec != u.window {
		u.window, u.used = sec, 0
	}
	u.used++
	over := u.faults.LimitPerSec > 0 && u.used > u.faults.LimitPerSec
	x := u.draw("limited", r)
	u.mu.Unlock()
	if over {
		if x < 0.75 {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	w.Write([]byte("ok\n"))
}

func (u *Upstream) write(w http.ResponseWriter, r *http.Request, attempt int) {
	u.mu.Lock()
	if sec := int64(time.Since(u.start) / time.Second); sec != u.writeWindow {
		u.writeWindow, u.writeUsed = sec, 0
	}
	u.writeUsed++
	if u.faults.WriteLimit > 0 && u.writeUsed > u.faults.WriteLimit {
		u.mu.Unlock()
		http.Error(w, "slow down", http.StatusTooManyRequests) // refused before writing
		return
	}
	if u.draw("writefail", r) < u.faults.WriteFail {
		u.mu.Unlock()
		http.Error(w, "write failed", http.StatusBadGateway)
		return
	}
	u.writes[r.Header.Get("X-Lab-Id")]++
	slow := (attempt == 0 || u.faults.SlowEvery) && u.draw("write", r) < u.faults.SlowWriteShare
	d := u.faults.SlowWrite
	u.mu.Unlock()
	if slow {
		time.Sleep(d) // the write is done; only the answer is late
	}
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"order":"created"}` + "\n"))
}

// Served returns how many requests the upstream handled since Reset: the load it saw.
func (u *Upstream) Served() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.served
}

// Writes returns how many writes the upstream performed for request id id.
func (u *Upstream) Writes(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.writes[id]
}

// DuplicateWrites returns how many request ids were written more than once, and how many
// writes beyond the first they got in all.
func (u *Upstream) DuplicateWrites() (ids, extra int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range u.writes {
		if n > 1 {
			ids++
			extra += n - 1
		}
	}
	return ids, extra
}

// DuplicateWriteIDs returns the request ids the upstream wrote more than once.
func (u *Upstream) DuplicateWriteIDs() map[string]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	ids := map[string]bool{}
	for id, n := range u.writes {
		if n > 1 {
			ids[id] = true
		}
	}
	return ids
}

// Close stops the upstream.
func (u *Upstream) Close() error { return u.srv.Close() }
