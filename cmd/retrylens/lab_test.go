package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retrylens/retrylens/backend"
	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/query"
)

// labReport is the part of the JSON report the lab checks.
type labReport struct {
	Summary  metrics `json:"summary"`
	Loops429 struct {
		Loops            int64 `json:"loops"`
		MaxLength        int64 `json:"max_length"`
		PrematureRetries int64 `json:"premature_retries"`
		BlindRetries     int64 `json:"blind_retries"`
	} `json:"loops_429"`
	Findings []findingCount `json:"findings"`
	Hedging  struct {
		Requests, Hedges, Wins, Cancelled int64
	} `json:"hedging"`
	Linking struct {
		Strong    int64 `json:"strong"`
		Heuristic int64 `json:"heuristic"`
		Inferred  int64 `json:"inferred"`
	} `json:"linking"`
}

// finding returns a finding's requests and attempts, 0 when it is absent.
func (r labReport) finding(kind string) (count, attempts int64) {
	for _, f := range r.Findings {
		if f.Kind == kind {
			return f.Count, f.Attempts
		}
	}
	return 0, 0
}

// labFigures are the figures compared between the truth and retrylens, side by side.
type labFigures struct {
	Requests, FirstAttempts, Retries           int64
	Amplification, RetryRate, RetrySuccessRate float64
	Recovered, Exhausted                       int64
	Logical                                    int64   // logical requests
	EffectiveSuccess                           float64 // the 2xx share of their final attempts
	FalseSuccess                               int64   // the false_success finding's requests
	Status429Retry                             int64   // 429 answers to retries
	Abandoned                                  int64   // attempts the client gave up on: 499 (nginx), 0 (Caddy)
	Loops429, MaxLoop429                       int64
	PrematureRetries, BlindRetries             int64
	RetriedWrites, RetriedWriteRequests        int64 // duplicate_write_risk attempts and requests
	HedgedRequests, Hedges, HedgeWins          int64 // attempts sent while another was in flight
	Cancelled                                  int64 // attempts cancelled because another won
}

func truthFigures(t lab.Truth) labFigures {
	return labFigures{
		Requests: int64(t.Requests), FirstAttempts: int64(t.FirstAttempts), Retries: int64(t.Retries),
		Amplification: t.Amplification, RetryRate: t.RetryRate, RetrySuccessRate: t.RetrySuccessRate,
		Recovered: int64(t.Recovered), Exhausted: int64(t.Exhausted), Status429Retry: int64(t.Status429Retry),
		Logical: int64(t.Logical), EffectiveSuccess: t.EffectiveSuccess, FalseSuccess: int64(t.FalseSuccess),
		Abandoned: int64(t.Abandoned), Loops429: int64(t.Loops429), MaxLoop429: int64(t.MaxLoop429),
		PrematureRetries: int64(t.PrematureRetries), BlindRetries: int64(t.BlindRetries),
		RetriedWrites: int64(t.RetriedWrites), RetriedWriteRequests: int64(t.WriteRequests),
		HedgedRequests: int64(t.HedgedRequests), Hedges: int64(t.Hedges), HedgeWins: int64(t.HedgeWins), Cancelled: int64(t.Cancelled),
	}
}

func reportFigures(r labReport) labFigures {
	s := r.Summary
	fig := labFigures{
		Requests: s.Requests, FirstAttempts: s.FirstAttempts, Retries: s.Retries,
		Recovered: s.Recovered, Exhausted: s.Exhausted, Status429Retry: s.Status429Retry, Abandoned: s.Abandoned,
		Logical:  r.Linking.Strong + r.Linking.Heuristic + r.Linking.Inferred,
		Loops429: r.Loops429.Loops, MaxLoop429: r.Loops429.MaxLength,
		PrematureRetries: r.Loops429.PrematureRetries, BlindRetries: r.Loops429.BlindRetries,
		HedgedRequests: r.Hedging.Requests, Hedges: r.Hedging.Hedges, HedgeWins: r.Hedging.Wins, Cancelled: r.Hedging.Cancelled,
	}
	for _, p := range []struct {
		dst *float64
		src *float64
	}{{&fig.Amplification, s.Amplification}, {&fig.RetryRate, s.RetryRate}, {&fig.RetrySuccessRate, s.RetrySuccessRate}, {&fig.EffectiveSuccess, s.EffectiveSuccess}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	fig.RetriedWriteRequests, fig.RetriedWrites = r.finding("duplicate_write_risk")
	fig.FalseSuccess, _ = r.finding("false_success")
	return fig
}

// front is a gateway the lab can put in front of the upstream, and the logs it writes.
type front struct {
	name  string
	start func(dir, upstream string) (url string, stop func() error, logs map[string]string, err error)
	// skip names the scenarios whose truth the gateway's log cannot show, and why.
	skip map[string]string
}

// haproxyBlind is why HAProxy sits out the scenarios where the naive client abandons
// requests: HAProxy notices a client's close only when it writes, so it logs an abandoned
// request as the upstream's answer (a 201 after 301 ms, termination state "----") and
// retrylens counts it a success the client never saw. Measured in this lab:
// incident-naive retry success 0.775 against the client's 0.114; slow-writes-naive 0
// recovered and 0 duplicate writes against 21 and 21. (Telling it from the log: the
// request's next attempt began before this one ended. Not done yet.)
const haproxyBlind = "HAProxy logs a request the client abandoned as the upstream's answer"

var fronts = []front{
	{"nginx", func(dir, upstream string) (string, func() error, map[string]string, error) {
		n, err := lab.StartNginx(dir, upstream)
		if err != nil {
			return "", nil, nil, err
		}
		return n.URL(), n.Stop, map[string]string{"retry": n.TextLog, "nginx-json": n.JSONLog}, nil
	}, nil},
	{"caddy", func(dir, upstream string) (string, func() error, map[string]string, error) {
		c, err := lab.StartCaddy(dir, upstream)
		if err != nil {
			return "", nil, nil, err
		}
		return c.URL(), c.Stop, map[string]string{"caddy": c.Log}, nil
	}, nil},
	{"haproxy", func(dir, upstream string) (string, func() error, map[string]string, error) {
		h, err := lab.StartHAProxy(dir, upstream)
		if err != nil {
			return "", nil, nil, err
		}
		return h.URL(), h.Stop, map[string]string{"haproxy": h.Log}, nil
	}, map[string]string{"incident-naive": haproxyBlind, "slow-writes-naive": haproxyBlind, "write-storm-naive": haproxyBlind, "hedged": haproxyBlind,
		"throttled-writes-naive": haproxyBlind}},
}

// TestLab runs every lab scenario (two outside the end-to-end tier) through real nginx,
// Caddy and HAProxy and checks that each log's report equals the client's own record (and
// the upstream's count of duplicate writes); beside them, a real minute at --window 10s
// drawn in Chromium (chaosMinute).
// All figures are over the whole run, where the definitions allow exactness: the
// report's windows are not compared, since nginx and Caddy time a line at completion and
// the client at sending, so a request can straddle a window edge.
func TestLab(t *testing.T) {
	if testing.Short() {
		t.Skip("the lab takes about a minute")
	}
	t.Parallel()
	var minute struct {
		log string
		err error
	}
	minuteDone := make(chan struct{})
	scenarios := lab.Scenarios()
	if testmain.EndToEnd {
		go func(dir string) {
			defer close(minuteDone)
			minute.log, minute.err = chaosMinute(dir)
		}(t.TempDir())
		defer func() { <-minuteDone }() // nginx stopped before the temporary directory goes
	} else {
		// The default tier's smoke: slow writes by the naive client (abandoned writes retried:
		// duplicate writes) and by the good one (which HAProxy's log can show) through each
		// gateway; the end-to-end tier runs every scenario, and the chaos minute.
		close(minuteDone)
		scenarios = slices.DeleteFunc(scenarios, func(sc lab.Scenario) bool {
			return sc.Name != "slow-writes-naive" && sc.Name != "slow-writes-good"
		})
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			// The gateways take the scenario at the same time, each with an upstream of
			// its own: the run takes a third of the time, and each log is its own truth.
			type run struct {
				fr   front
				u    *lab.Upstream
				c    *lab.Client
				logs map[string]string
				err  error
			}
			var runs []*run
			var wg sync.WaitGroup
			for _, fr := range fronts {
				if why, ok := fr.skip[sc.Name]; ok {
					t.Logf("%s: not run: %s", fr.name, why)
					continue
				}
				r := &run{fr: fr}
				runs = append(runs, r)
				dir := t.TempDir()
				wg.Go(func() { r.err = runFront(t, r.fr, dir, sc, &r.u, &r.c, &r.logs) })
			}
			wg.Wait()
			for _, r := range runs {
				if r.u != nil {
					defer r.u.Close()
				}
				if (errors.Is(r.err, lab.ErrNoNginx) || errors.Is(r.err, lab.ErrNoCaddy) || errors.Is(r.err, lab.ErrNoHAProxy)) && os.Getenv("CI") == "" {
					t.Skip(r.err)
				}
				if r.err != nil {
					t.Fatalf("%s: %v", r.fr.name, r.err)
				}
			}
			for _, rn := range runs {
				u, c, logs := rn.u, rn.c, rn.logs
				if c.Truth().Amplification > 1.5 {
					// Over the whole run amplification > 1.5 means some minute had more: the
					// storm alert must fire, whatever the run's minute boundaries.
					for format, path := range logs {
						if _, _, code := retrylens(t, nil, "check", "--log-format", format, path); code != exitAlert {
							t.Errorf("check on %s (%s): exit %d, want %d", sc.Name, format, code, exitAlert)
						}
					}
				}
				if sc.Name == "incident-naive" {
					// The storm through Finagle's default budget: the whole run is shorter than the
					// 10 s window, so at most 0.2 × 300 first attempts + 10/s × 10 s = 160 retries
					// may go out, of the truth's retries.
					for format, path := range logs {
						stdout, stderr, code := retrylens(t, nil, "budget", "--model", "finagle", "--format", "json", "--log-format", format, path)
						var rs []struct {
							Retries, Allowed, Denied int
							Amplification            float64
							After                    float64 `json:"amplification_after"`
						}
						if code != 0 || json.Unmarshal([]byte(stdout), &rs) != nil || len(rs) != 1 {
							t.Fatalf("budget on %s: exit %d: %s%s", format, code, stdout, stderr)
						}
						r := rs[0]
						t.Logf("budget on the storm via %s: %d of %d retries allowed, amplification %.3f -> %.3f", format, r.Allowed, r.Retries, r.Amplification, r.After)
						if r.Retries != c.Truth().Retries || r.Allowed > 160 || r.Allowed+r.Denied != r.Retries || r.After >= r.Amplification {
							t.Errorf("budget on %s: %+v; want the truth's %d retries, at most 160 allowed", format, r, c.Truth().Retries)
						}
					}
				}
				if path, ok := logs["retry"]; ok && sc.Name == "incident-naive" {
					// Hourly ranges of the storm moved across an hour's bound (#15 item 4).
					acrossAnHour(t, path)
				}
				if path, ok := logs["retry"]; ok {
					// watch's figures on the same log are the report's (TestWatchIsTheReport)
					t.Run("watch", func(t *testing.T) { watchIsTheReport(t, path, "retry", "1m") })
					// a finer width never contradicts a coarser one (TestWidthsAgree)
					t.Run("widths", func(t *testing.T) { widthsAgree(t, path, "retry") })
				}
				if path, ok := logs["retry"]; ok {
					// --infer-attempts on the same log with its headers forgotten: measured,
					// not asserted (it depends on how the run interleaved; see docs/lab.md).
					p, r, exact, n := inferenceScore(t, "retry", path)
					t.Logf("inference %s: %d lines, precision %.3f, recall %.3f, exact %.3f", sc.Name, n, p, r, exact)
				}
				for format, path := range logs {
					t.Run(format, func(t *testing.T) {
						rep := labRun(t, format, path, format == "retry" || format == "caddy")
						got := reportFigures(rep)
						// A gateway can log 2xx for an attempt the client gave up on: the answer
						// came as it cancelled it (a hedge that lost, a timeout), which no log can
						// show. The truth is then the client's record as the log shows it.
						want, races, hidden := loggedTruth(t, format, path, c)
						if races > 0 {
							t.Logf("%s via %s: %d requests with an answer logged 2xx that the client had given up on", sc.Name, format, races)
						}
						if hidden.Hedges > 0 {
							// The log shows these as retries: retrylens may count them either way.
							t.Logf("%s via %s: %+v hedges read by the gateway after the attempts before them had ended", sc.Name, format, hidden)
							for _, f := range []struct {
								name            string
								got, want, hide *int64
							}{{"hedged requests", &got.HedgedRequests, &want.HedgedRequests, &hidden.Requests}, {"hedges", &got.Hedges, &want.Hedges, &hidden.Hedges},
								{"hedge wins", &got.HedgeWins, &want.HedgeWins, &hidden.Wins}, {"cancelled", &got.Cancelled, &want.Cancelled, &hidden.Cancelled}} {
								if *f.got < *f.want-*f.hide || *f.got > *f.want {
									t.Errorf("%s %d; the client's %d, of which the log cannot show %d", f.name, *f.got, *f.want, *f.hide)
								}
								*f.got = *f.want
							}
							// A retry the log shows abandoned, not cancelled, counts in retry success.
							if d := float64(max(want.Retries-want.Cancelled, 1)); got.RetrySuccessRate < want.RetrySuccessRate*d/(d+float64(hidden.Cancelled)) || got.RetrySuccessRate > want.RetrySuccessRate {
								t.Errorf("retry success %.4f; the client's %.4f, with %d cancelled attempts the log cannot show", got.RetrySuccessRate, want.RetrySuccessRate, hidden.Cancelled)
							}
							got.RetrySuccessRate = want.RetrySuccessRate
						}
						if n, attempts := rep.finding("synchronised"); n > 0 {
							// The naive client sleeps a fixed 20 ms; the good one jitters.
							t.Logf("%s via %s: synchronised retries: %d requests, %d attempts", sc.Name, format, n, attempts)
							if sc.Policy.Exponential {
								t.Errorf("the good policy jitters its delays, yet retries were found synchronised")
							}
						}
						// Writes: every id the upstream wrote twice must be one
						// possible_duplicate_write names. From the client's record, the
						// requests the finding describes (an unkeyed write with an attempt the
						// client abandoned, then another attempt): they must hold every id
						// written twice, and retrylens must count exactly them. false_success
						// (abandoned first attempt, then a 2xx) is a part of them.
						possible, _ := rep.finding("possible_duplicate_write")
						falseSuccess, _ := rep.finding("false_success")
						pattern := abandonedThenRetried(c.Attempts())
						twice := u.DuplicateWriteIDs()
						both := 0
						for id := range twice {
							if !pattern[id] {
								t.Errorf("%s was written twice, yet no abandoned attempt of it was retried", id)
							}
						}
						for id := range pattern {
							if twice[id] {
								both++
							}
						}
						if possible != int64(len(pattern)) || falseSuccess > possible {
							t.Errorf("possible_duplicate_write %d, false_success %d; the client's record has %d such requests", possible, falseSuccess, len(pattern))
						}
						if precision := float64(both) / float64(max(len(pattern), 1)); len(pattern) >= 20 && precision < 0.95 {
							t.Errorf("possible_duplicate_write: %d of %d requests written twice: precision %.2f, under 0.95", both, len(pattern), precision)
						}
						if refused := refusedAfterAbandon(c.Attempts()); refused > 0 || sc.Name == "throttled-writes-naive" {
							t.Logf("%s via %s: %d writes abandoned, then only refused with 429 (not to be named)", sc.Name, format, refused)
							if refused == 0 {
								t.Errorf("the throttled-writes run made no write abandoned then only refused: it tests nothing")
							}
						}
						if len(pattern) > 0 {
							t.Logf("%s via %s: possible_duplicate_write %d requests, %d of them written twice (precision %.2f), of %d written twice (recall %.2f)",
								sc.Name, format, possible, both, float64(both)/float64(len(pattern)), len(twice), float64(both)/float64(max(len(twice), 1)))
						}
						t.Logf("%s via %s:\ntruth     %+v\nretrylens %+v", sc.Name, format, want, got)
						if sc.Policy.NoRequestID {
							// Only the heuristic links these (#15 item 1): the logical figures
							// within 0.5 % of the truth (exact at this size: 25 recovered, 1
							// exhausted, 300 requests; the rule before this one found 24, one
							// retry left an orphan after four passes; the rule before it 2).
							t.Logf("%s via %s: logical %d (truth %d), recovered %d (%d), exhausted %d (%d), effective success %.4f (%.4f)",
								sc.Name, format, got.Logical, want.Logical, got.Recovered, want.Recovered, got.Exhausted, want.Exhausted, got.EffectiveSuccess, want.EffectiveSuccess)
							for _, f := range []struct {
								name       string
								got, truth float64
							}{{"logical", float64(got.Logical), float64(want.Logical)}, {"recovered", float64(got.Recovered), float64(want.Recovered)},
								{"exhausted", float64(got.Exhausted), float64(want.Exhausted)}, {"effective success", got.EffectiveSuccess, want.EffectiveSuccess}} {
								if d := math.Abs(f.got - f.truth); d > 0.005*f.truth {
									t.Errorf("%s %g, the client's %g: further than 0.5 %%", f.name, f.got, f.truth)
								}
							}
							got.Logical, got.Recovered, got.Exhausted, got.EffectiveSuccess = want.Logical, want.Recovered, want.Exhausted, want.EffectiveSuccess
						}
						if diff := cmp.Diff(want, got, approx); diff != "" {
							t.Errorf("(-truth +retrylens):\n%s", diff)
						}
						if dir := os.Getenv("RETRYLENS_LAB_KEEP"); dir != "" && t.Failed() {
							keepRun(t, dir, sc.Name+"."+format, path, c)
						}
					})
				}
			}
		})
	}
	t.Run("html-chaos-minute", func(t *testing.T) {
		testmain.EndToEndOnly(t)
		<-minuteDone
		if errors.Is(minute.err, lab.ErrNoNginx) && os.Getenv("CI") == "" {
			t.Skip(minute.err)
		}
		if minute.err != nil {
			t.Fatal(minute.err)
		}
		checkChaosMinute(t, minute.log)
	})
}

// abandonedThenRetried returns, from a client's record, the requests that
// possible_duplicate_write describes: a write (POST, PUT, PATCH, DELETE) not protected by
// one idempotency key on every attempt that may have reached the handler (all but those
// answered 429), with an attempt the client abandoned (status 0 in its record) followed by
// one that may have reached the handler.
func abandonedThenRetried(as []lab.Attempt) map[string]bool {
	byID := map[string][]lab.Attempt{}
	for _, a := range as {
		byID[a.RequestID] = append(byID[a.RequestID], a)
	}
	out := map[string]bool{}
	for id, at := range byID {
		sort.Slice(at, func(i, j int) bool { return at[i].N < at[j].N })
		if m := at[0].Method; m != "POST" && m != "PUT" && m != "PATCH" && m != "DELETE" {
			continue
		}
		keys, unknown, twice := map[string]bool{}, false, false
		for _, a := range at {
			reached := a.Status != 429
			if reached {
				keys[a.IdempotencyKey] = true
			}
			twice = twice || unknown && reached
			unknown = unknown || a.Status == 0
		}
		if twice && (len(keys) > 1 || keys[""]) {
			out[id] = true
		}
	}
	return out
}

// refusedAfterAbandon counts, from a client's record, the writes with an attempt the client
// abandoned followed by attempts that were all refused with 429: written once at most,
// which possible_duplicate_write must not name.
func refusedAfterAbandon(as []lab.Attempt) int {
	byID := map[string][]lab.Attempt{}
	for _, a := range as {
		if a.Method == "POST" || a.Method == "PUT" || a.Method == "PATCH" || a.Method == "DELETE" {
			byID[a.RequestID] = append(byID[a.RequestID], a)
		}
	}
	n := 0
	for _, at := range byID {
		sort.Slice(at, func(i, j int) bool { return at[i].N < at[j].N })
		for i, a := range at {
			if a.Status != 0 || i == len(at)-1 {
				continue
			}
			refused := true
			for _, b := range at[i+1:] {
				refused = refused && b.Status == 429
			}
			if refused {
				n++
			}
			break
		}
	}
	return n
}

// loggedTruth is the client's record as the log at path shows it. An attempt the client
// gave up on (status 0 in its record) that the gateway logged 2xx, found by request id and
// attempt number, is taken as answered, and its request's 2xx as its result, won by its first
// 2xx by the gateway's end time (then line order), as is a request of which two attempts
// answered 2xx. An attempt the client gave up on that the
// gateway did not log is dropped: no log can show it (closed before the request was written
// whole, or before a loaded gateway had read it); without request ids, none is. It returns
// the figures, how many requests changed, and what no log can show of the hedges.
func loggedTruth(t *testing.T, format, path string, c *lab.Client) (labFigures, int, unseenHedges) {
	t.Helper()
	pf, err := parse.Preset(format)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		id string
		n  int
	}
	type line struct {
		parse.Record
		no int
	}
	logged := map[key]line{}
	for no, l := range bytes.Split(b, []byte{'\n'}) {
		if rec, err := pf.ParseLine(l); err == nil && rec.RequestID != "" && rec.Attempt >= 0 {
			logged[key{rec.RequestID, rec.Attempt}] = line{rec, no}
		}
	}
	ok := func(s int) bool { return s >= 200 && s < 300 }
	results := c.Results()
	var as []lab.Attempt
	for _, a := range c.Attempts() {
		if _, found := logged[key{a.RequestID, a.N}]; found || a.Status != 0 || c.Policy.NoRequestID {
			as = append(as, a)
		}
	}
	raced := map[string]bool{}
	for i, a := range as {
		if rec, found := logged[key{a.RequestID, a.N}]; found && a.Status == 0 && ok(rec.Status) {
			as[i].Status, as[i].Abandoned, as[i].Cancelled = rec.Status, false, false
			raced[a.RequestID] = true
		}
	}
	earlier := func(id string, i, j int) bool {
		a, b := logged[key{id, as[i].N}], logged[key{id, as[j].N}]
		return a.Time.Before(b.Time) || a.Time.Equal(b.Time) && a.no < b.no
	}
	// Two attempts answered 2xx: which came first is the log's to tell (the first by end
	// time); the client's own order can differ by how its goroutines were scheduled, on a
	// busy machine by a millisecond or more.
	races := len(raced)
	oks := map[string]int{}
	for _, a := range as {
		if _, found := logged[key{a.RequestID, a.N}]; found && ok(a.Status) {
			oks[a.RequestID]++
		}
	}
	for id, n := range oks {
		if n >= 2 {
			raced[id] = true
		}
	}
	for id := range raced {
		results[id] = http.StatusOK
		winner := -1
		for i := range as {
			if as[i].RequestID != id {
				continue
			}
			as[i].Won = false
			if ok(as[i].Status) && (winner < 0 || earlier(id, i, winner)) {
				winner = i
			}
		}
		as[winner].Won = true
	}
	return truthFigures(lab.TruthOf(as, results, http.StatusTooManyRequests)), races, unseen(as, func(id string, n int) (time.Time, time.Time, int, bool) {
		l, found := logged[key{id, n}]
		took := time.Duration(math.Round(l.RequestTime*1000)) * time.Millisecond // as logged, to the millisecond
		return l.Time.Add(-took), l.Time, l.Status, found
	})
}

// keepRun copies a failed run's log and the client's record into dir, to be read after the
// test has removed its own (RETRYLENS_LAB_KEEP=dir go test -run TestLab ...).
func keepRun(t *testing.T, dir, name, path string, c *lab.Client) {
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".log"), b, 0o644)
	}
	if err == nil {
		b, err = json.MarshalIndent(c.Attempts(), "", " ")
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".attempts.json"), b, 0o644)
	}
	if err != nil {
		t.Log(err)
		return
	}
	t.Logf("kept %s's log and the client's record in %s", name, dir)
}

// unseenHedges is what no log can show of a hedging client's traffic: hedges the gateway
// read only after it had ended every earlier attempt of their request (a loaded machine
// delays the read), which the log shows as retries, and what they change in the figures.
type unseenHedges struct {
	Requests, Hedges, Wins, Cancelled int64
}

// logResolution is the log's clock: an attempt's start is its end less its request time,
// each to the millisecond, so overlaps within it cannot be told from rounding
// (docs/metrics.md, the slack).
const logResolution = time.Millisecond

// unseen finds the client's hedges that the log (logged: start, end, status, found) does
// not show sent while an earlier attempt of their request was in flight, beyond the log's
// resolution: started or ended before an answered one ended; logged no later than an
// abandoned one (dropped when it answered); or abandoned as an earlier attempt's 2xx
// answered, having started no later.
func unseen(as []lab.Attempt, logged func(id string, n int) (start, end time.Time, status int, found bool)) unseenHedges {
	byID := map[string][]lab.Attempt{}
	for _, a := range as {
		byID[a.RequestID] = append(byID[a.RequestID], a)
	}
	abandoned := func(s int) bool { return s == 0 || s == 499 }
	var u unseenHedges
	for id, req := range byID {
		hidden := 0
		for _, a := range req {
			start, end, status, found := logged(id, a.N)
			if !a.Hedge || !found {
				continue
			}
			shown := false
			for _, e := range req {
				_, eEnd, eStatus, ok := logged(id, e.N)
				if !ok || e.N >= a.N {
					continue
				}
				switch {
				case !abandoned(eStatus) && (start.Before(eEnd.Add(-logResolution)) || end.Before(eEnd.Add(-logResolution))),
					abandoned(eStatus) && !eEnd.Before(end.Add(-logResolution)),
					abandoned(status) && eStatus >= 200 && eStatus < 300 && !start.After(eEnd.Add(logResolution)) && !end.After(eEnd.Add(logResolution)):
					shown = true
				}
			}
			if !shown {
				hidden++
				u.Hedges++
				if a.Won {
					u.Wins++
				}
			}
		}
		if hidden > 0 {
			u.Requests++
			for _, a := range req {
				if a.Cancelled {
					u.Cancelled++
				}
			}
		}
	}
	return u
}

// runFront starts an upstream and the gateway fr in dir, runs the scenario through them
// and stops the gateway once its logs hold every attempt the client sent.
func runFront(t *testing.T, fr front, dir string, sc lab.Scenario, u **lab.Upstream, c **lab.Client, logs *map[string]string) error {
	var err error
	if *u, err = lab.StartUpstream(); err != nil {
		return err
	}
	url, stop, l, err := fr.start(dir, (*u).Addr)
	if err != nil {
		return err
	}
	*logs = l
	*c = sc.Run(url, *u)
	// A gateway logs a request once it has answered it: under load the last lines can
	// come after the client has its answers. Wait for every attempt's.
	for _, path := range l {
		waitLines(t, path, *c)
	}
	return stop()
}

// waitLines waits, up to 10 s, until the log at path has a line for every attempt in
// c's record, and logs what it has if not: the count, and the attempts the client never
// wrote whole (a gateway cannot log what it did not read).
func waitLines(t *testing.T, path string, c *lab.Client) {
	t.Helper()
	if waitLinesOf(t, path, c.Truth().Requests) {
		return
	}
	var unwritten []string
	for _, a := range c.Attempts() {
		if !a.Wrote {
			unwritten = append(unwritten, fmt.Sprintf("%s#%d sent %s, gave up after %s", a.RequestID, a.N, a.Sent.Format("15:04:05.000"), a.Received.Sub(a.Sent)))
		}
	}
	t.Logf("%s: attempts not written whole: %q", path, unwritten)
}

// waitLinesOf waits, up to 10 s, until the log at path has n lines, and says whether it
// does; if not, it logs how many it has.
func waitLinesOf(t *testing.T, path string, n int) bool {
	t.Helper()
	got := 0
	for range 200 {
		if b, err := os.ReadFile(path); err == nil {
			if got = bytes.Count(b, []byte{'\n'}); got >= n {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: %d lines after 10 s, for %d attempts", path, got, n)
	return false
}

// labRun loads a lab log into a DuckDB file and returns its JSON report; onCluster
// requires the same report from a two-shard ClickHouse cluster loaded with the same log
// (not with -short).
func labRun(t *testing.T, format, path string, onCluster bool) labReport {
	t.Helper()
	db := filepath.Join(t.TempDir(), "lab.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--db", db, "--log-format", format, path); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := retrylens(t, nil, "report", "--db", db, "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if onCluster && !testing.Short() { // -short starts no cluster
		url := testmain.ClusterURL(t)
		if _, stderr, code := retrylens(t, nil, "ingest", "--db", url, "--log-format", format, path); code != 0 {
			t.Fatalf("ingest into the cluster: exit %d: %s", code, stderr)
		}
		got, stderr, code := retrylens(t, nil, "report", "--db", url, "--format", "json")
		if code != 0 || got != stdout {
			t.Errorf("the cluster's report (exit %d, %s) differs from the DuckDB file's: %s", code, stderr, firstDiff(stdout, got, "DuckDB", "cluster"))
		}
		sameCounts(t, db, url)
	}
	var r labReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sameCounts requires the same count tables (backend.Counts) from the stores at a and b:
// the backends' conformance, on a lab scenario's log.
func sameCounts(t *testing.T, a, b string) {
	t.Helper()
	ctx := context.Background()
	var tables []map[string][][]any
	for _, location := range []string{a, b} {
		st, err := backend.Open(ctx, location, backend.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := backend.Counts(ctx, st, query.Options{})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, c)
	}
	if diff := cmp.Diff(tables[0], tables[1]); diff != "" {
		t.Errorf("count tables differ (-%s +%s):\n%s", a, b, diff)
	}
}

// TestGenerated checks retrylens against the truth the log generator counted while
// writing, in every format it writes: 10,000 lines each (3,000 with -short), with untagged lines, 429s,
// retried writes with and without idempotency keys, and a logical request cut short at
// the end.
func TestGenerated(t *testing.T) {
	testmain.Long(t, "three generated logs against their truth")
	t.Parallel()
	for _, format := range []string{"retry", "nginx-json", "caddy"} {
		t.Run(format, func(t *testing.T) {
			pf, err := parse.Preset(format)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "access.log")
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := 3000 // every kind of request
			if testmain.EndToEnd {
				lines = 10000
			}
			truth, err := lab.Generate(out, pf, lines, 42)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			if truth.Retries == 0 || truth.Untagged == 0 || truth.RetriedWrites == 0 || truth.Status429Retry == 0 {
				t.Fatalf("generator truth lacks variety: %+v", truth)
			}
			r := labRun(t, format, path, true)
			s := r.Summary
			_, writes := r.finding("duplicate_write_risk")
			got := lab.GenTruth{
				Lines: truth.Lines, Requests: int(s.Requests), Untagged: int(s.Untagged), FirstAttempts: int(s.FirstAttempts),
				Retries: int(s.Retries), Amplification: *s.Amplification, RetryRate: *s.RetryRate, RetrySuccessRate: *s.RetrySuccessRate,
				Recovered: int(s.Recovered), Exhausted: int(s.Exhausted), Status429Retry: int(s.Status429Retry), RetriedWrites: int(writes),
			}
			if diff := cmp.Diff(truth, got, approx, cmpopts.IgnoreUnexported(lab.GenTruth{})); diff != "" {
				t.Errorf("(-generator +retrylens):\n%s", diff)
			}
		})
	}
}

// A healthy log of sparse traffic (a logical request every half second on average: about
// 130 lines a minute, 6 % of first attempts failing, most retries succeeding) must not read
// fuelling: some minutes hold a few retries that failed by chance, and a rule needs more
// evidence than that (docs/metrics.md). No incident may be one whose retries mostly
// succeeded, and check passes. With the minimum samples and confidence set to 0 (the
// figures as they are) it fires, which shows the test can fail.
func TestHealthySparseLog(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30,000-line log reported twice")
	}
	t.Parallel()
	pf, _ := parse.Preset("retry")
	path := filepath.Join(t.TempDir(), "healthy.log")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := lab.GenerateEvery(out, pf, 30000, 9, time.Second)
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if truth.Amplification > 1.1 || truth.RetrySuccessRate < 0.6 {
		t.Fatalf("the generated log is not healthy: %+v", truth)
	}
	noMinimum := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(noMinimum, []byte(`[{"rule": "retry_rate_high", "min_first_attempts": 0, "min_retries": 0, "confidence": 0},
		{"rule": "retries_not_helping", "min_first_attempts": 0, "min_retries": 0, "confidence": 0},
		{"rule": "retry_storm", "min_first_attempts": 0, "min_retries": 0, "confidence": 0}]`), 0o644)
	for _, tc := range []struct {
		rules    []string
		fuelling bool
	}{{nil, false}, {[]string{"--rules", noMinimum}, true}} {
		stdout, stderr, code := retrylens(t, nil, append([]string{"report", "--format", "json", "--log-format", "retry", path}, tc.rules...)...)
		var r struct {
			Summary   metrics `json:"summary"`
			Incidents []struct {
				Start  string  `json:"start"`
				During metrics `json:"during"`
			} `json:"incidents"`
			Alerts []struct{ Rule string } `json:"alerts"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("report %v: exit %d: %s", tc.rules, code, stderr)
		}
		t.Logf("rules %v: verdict %s, %d alerts, %d incidents", tc.rules, r.Summary.Verdict, len(r.Alerts), len(r.Incidents))
		if (r.Summary.Verdict == "fuelling") != tc.fuelling {
			t.Errorf("rules %v: verdict %s, alerts %+v", tc.rules, r.Summary.Verdict, r.Alerts)
		}
		for _, in := range r.Incidents {
			if s := in.During.RetrySuccessRate; !tc.fuelling && s != nil && *s >= 0.5 {
				t.Errorf("incident at %s: retry success %.2f: retries mostly succeeded", in.Start, *s)
			}
		}
	}
	if _, stderr, code := retrylens(t, nil, "check", "--fail-on", "P2", "--log-format", "retry", path); code != 0 {
		t.Errorf("check: exit %d: %s", code, stderr)
	}
}

// unseen on a hand trace: r1's hedge reached the gateway as its first attempt's 200 ended
// and was cancelled (the log shows a retry after a 2xx); r2's hedge started while its
// first attempt was in flight; r3's hedge started as its first attempt ended, but that
// attempt was abandoned after the hedge answered (dropped because it did); r4's hedge
// started 1 ms before its first attempt's 502, within the log's resolution. r1's and
// r4's show no overlap: 2 requests, 2 hedges, 1 win (r4's), 1 cancelled attempt (r1's).
func TestUnseenHedges(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Time { return time.Date(2026, 12, 3, 10, 0, 0, n*int(time.Millisecond), time.UTC) }
	type line struct {
		start, end time.Time
		status     int
	}
	log := map[string]line{
		"r1/0": {ms(0), ms(10), 200}, "r1/1": {ms(10), ms(12), 499},
		"r2/0": {ms(0), ms(20), 499}, "r2/1": {ms(5), ms(12), 200},
		"r3/0": {ms(0), ms(15), 499}, "r3/1": {ms(15), ms(15), 200},
		"r4/0": {ms(0), ms(10), 502}, "r4/1": {ms(9), ms(30), 200},
	}
	as := []lab.Attempt{
		{RequestID: "r1", N: 0, Status: 200, Won: true}, {RequestID: "r1", N: 1, Hedge: true, Cancelled: true},
		{RequestID: "r2", N: 0, Cancelled: true}, {RequestID: "r2", N: 1, Status: 200, Hedge: true, Won: true},
		{RequestID: "r3", N: 0, Cancelled: true}, {RequestID: "r3", N: 1, Status: 200, Hedge: true, Won: true},
		{RequestID: "r4", N: 0, Status: 502}, {RequestID: "r4", N: 1, Status: 200, Hedge: true, Won: true},
	}
	got := unseen(as, func(id string, n int) (time.Time, time.Time, int, bool) {
		l, ok := log[fmt.Sprintf("%s/%d", id, n)]
		return l.start, l.end, l.status, ok
	})
	if want := (unseenHedges{Requests: 2, Hedges: 2, Wins: 1, Cancelled: 1}); got != want {
		t.Errorf("unseen = %+v, want %+v", got, want)
	}
}
