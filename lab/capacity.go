package lab

import (
	"net/http"
	"sort"
	"strconv"
	"time"
)

// Capacity makes GET /api/work a service of fixed capacity, the shape of a retry-sustained
// outage (Bronson et al., HotOS'21): Workers serve one request at a time, each for Service
// (Service × TriggerFactor while the trigger lasts, from TriggerFrom to TriggerTo since
// Reset; a TriggerTo of 0 never ends it); up to Queue requests wait for a worker, the rest
// are refused at once with 503. A request is served to its end even when its client has
// left: the work an abandoned request still costs.
type Capacity struct {
	Workers       int
	Service       time.Duration
	Queue         int
	TriggerFrom   time.Duration
	TriggerTo     time.Duration
	TriggerFactor float64
}

// service is how long a request admitted at since (from Reset) takes to serve.
func (c Capacity) service(since time.Duration) time.Duration {
	if since >= c.TriggerFrom && (c.TriggerTo == 0 || since < c.TriggerTo) && c.TriggerFactor > 0 {
		return time.Duration(float64(c.Service) * c.TriggerFactor)
	}
	return c.Service
}

// Work is one request to /api/work as the upstream saw it: the upstream's record.
type Work struct {
	RequestID string
	N         int           // its attempt number (X-Retry-Attempt)
	Arrived   time.Duration // since Reset
	Started   time.Duration // when a worker took it; 0 when refused
	Ended     time.Duration // when its answer was written (or failed to be)
	Refused   bool          // 503 at once: the queue was full
	Gone      bool          // its client had left before the answer: the work was wasted
}

// capacityState is the upstream's queue and workers (under Upstream.mu, slots apart).
type capacityState struct {
	slots   chan struct{} // a worker each
	waiting int
	work    []Work
}

func (u *Upstream) resetCapacity(c Capacity) {
	u.capacity = capacityState{}
	if c.Workers > 0 {
		u.capacity.slots = make(chan struct{}, c.Workers)
	}
}

// work serves /api/work under Faults.Capacity.
func (u *Upstream) work(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	c, slots, start := u.faults.Capacity, u.capacity.slots, u.start
	n, _ := strconv.Atoi(r.Header.Get("X-Retry-Attempt"))
	rec := Work{RequestID: r.Header.Get("X-Lab-Id"), N: n, Arrived: time.Since(start)}
	if slots == nil {
		u.mu.Unlock()
		w.Write([]byte("ok\n"))
		return
	}
	free := len(slots) < cap(slots)
	if !free && u.capacity.waiting >= c.Queue {
		rec.Refused, rec.Ended = true, rec.Arrived
		u.capacity.work = append(u.capacity.work, rec)
		u.mu.Unlock()
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	u.capacity.waiting++
	u.mu.Unlock()
	slots <- struct{}{} // a worker, or wait in the queue
	u.mu.Lock()
	u.capacity.waiting--
	rec.Started = time.Since(start)
	u.mu.Unlock()
	time.Sleep(c.service(rec.Started)) // served whether or not the client is still there
	<-slots
	rec.Gone = r.Context().Err() != nil
	if !rec.Gone {
		w.Write([]byte("ok\n"))
	}
	u.mu.Lock()
	rec.Ended = time.Since(start)
	u.capacity.work = append(u.capacity.work, rec)
	u.mu.Unlock()
}

// Started is when the upstream was last Reset: the origin of its record's times.
func (u *Upstream) Started() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.start
}

// Work returns the upstream's record of /api/work since Reset, by arrival.
func (u *Upstream) Work() []Work {
	u.mu.Lock()
	out := append([]Work(nil), u.capacity.work...)
	u.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Arrived < out[j].Arrived })
	return out
}

// Second is one second of an overload run, from the upstream's and the client's records.
type Second struct {
	Start         time.Duration // since Reset
	FirstAttempts int           // first attempts that reached the upstream
	Attempts      int           // every attempt that reached it
	Refused       int           // answered 503 at once
	Goodput       int           // 2xx answers the client received (by the time it received them)
	BusyWasted    time.Duration // worker time spent on requests whose client had left
	Busy          time.Duration // worker time spent
}

// Timeline is the run second by second: what the upstream did (from its record) and
// what reached the client (goodput, from the client's record of attempts answered 2xx,
// by when they came, since start).
func Timeline(work []Work, attempts []Attempt, start time.Time) []Second {
	var out []Second
	at := func(d time.Duration) *Second {
		i := int(d / time.Second)
		if i < 0 {
			i = 0
		}
		for len(out) <= i {
			out = append(out, Second{Start: time.Duration(len(out)) * time.Second})
		}
		return &out[i]
	}
	for _, w := range work {
		s := at(w.Arrived)
		s.Attempts++
		if w.N == 0 {
			s.FirstAttempts++
		}
		if w.Refused {
			s.Refused++
			continue
		}
		took := w.Ended - w.Started
		// worker time in the second the work started: fine at these service times
		s2 := at(w.Started)
		s2.Busy += took
		if w.Gone {
			s2.BusyWasted += took
		}
	}
	for _, a := range attempts {
		if a.Status >= 200 && a.Status < 300 {
			at(a.Received.Sub(start)).Goodput++
		}
	}
	return out
}
