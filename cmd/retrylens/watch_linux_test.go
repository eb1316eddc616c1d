package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
)

// TestWatchEndToEnd drives a real nginx with the lab's client for over a minute (12 s
// outside the end-to-end tier) while retrylens watch follows its log, rotated 22 times
// (4): rename and reopen while requests flow, with the rotated files gzipped a rotation
// later, and copytruncate. The watch
// killed with SIGKILL once and restarted, and a real Prometheus scraping it every
// second. At the end: the lines counted are the lines nginx wrote (its JSON log, never
// rotated, is the count); the counters read back through Prometheus's query API equal
// 'retrylens report --until' the time the watch says they are final up to; the window
// gauges equal that window of the report; promtool finds nothing wrong in /metrics.
func TestWatchEndToEnd(t *testing.T) {
	t.Parallel()
	u, n := startLab(t)
	u.Reset(lab.Faults{})
	dir := n.Dir
	db := filepath.Join(t.TempDir(), "watch.duckdb")
	addr, err := lab.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	contrib := filepath.Join("..", "..", "contrib")
	prom, err := lab.StartPrometheus(t.TempDir(), addr, filepath.Join(contrib, "prometheus", "retrylens.rules.yml"))
	if errors.Is(err, lab.ErrNoPrometheus) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Stop() })

	w := startWatch(t, db, addr, filepath.Join(dir, "access.log*"))
	client := lab.NewClient("http://"+n.Addr, lab.Good, 7)
	// 22 segments (over a minute) in the end-to-end tier, 4 in the default one: still a
	// rename, a copytruncate and a kill with segments on both sides of it.
	segments, perSegment := 4, 60
	if testmain.EndToEnd {
		segments = 22
	}
	start := time.Now()
	for s := range segments {
		reqs := make([]lab.Request, perSegment)
		for i := range reqs {
			// fail=K: the upstream answers 502 to attempts 0..K-1; K=3 exhausts the good
			// client's two retries.
			q := "fail=0"
			switch k := s*perSegment + i; {
			case k%11 == 0:
				q = "fail=3"
			case k%5 == 0:
				q = "fail=1"
			}
			reqs[i] = lab.Request{ID: fmt.Sprintf("w%d-%d", s, i), Method: "GET", Path: fmt.Sprintf("/api/items/%d?%s", i%17, q)}
		}
		done := make(chan struct{})
		go func() { client.RunOpen(reqs, 20); close(done) }()
		if s%2 == 0 {
			// Rename rotation while requests flow: nginx writes to the renamed file until
			// it reopens its logs.
			time.Sleep(1500 * time.Millisecond)
			shift(t, dir)
			if err := os.Rename(filepath.Join(dir, "access.log"), filepath.Join(dir, "access.log.1")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if err := n.Reopen(); err != nil {
				t.Fatal(err)
			}
		}
		<-done
		if s%2 == 1 {
			// copytruncate loses what nginx writes between the copy and the truncation (a
			// race of logrotate's, docs/live.md): done when every line is in a file.
			waitLogged(t, dir)
			shift(t, dir)
			copyFile(t, filepath.Join(dir, "access.log"), filepath.Join(dir, "access.log.1"))
			if err := os.Truncate(filepath.Join(dir, "access.log"), 0); err != nil {
				t.Fatal(err)
			}
		}
		if s == segments/2 {
			w.kill()
			w = startWatch(t, db, addr, filepath.Join(dir, "access.log*"))
		}
	}
	t.Logf("traffic: %d logical requests in %s", segments*perSegment, time.Since(start).Round(time.Second))
	wrote := countLines(t, filepath.Join(dir, "access.json"))
	end := time.Now()

	// The watch has every line, and every request final (--max-gap 5s, --settle 1s, 10 s
	// windows), when its figures say so; Prometheus has them a scrape later.
	final := float64(end.Truncate(10 * time.Second).Add(10 * time.Second).Unix())
	var metrics []byte
	for i := 0; ; i++ {
		metrics = get(t, "http://"+addr+"/metrics")
		if value(metrics, "retrylens_lines_total") == float64(wrote) && value(metrics, "retrylens_closed_until_seconds") >= final {
			break
		}
		if i == 600 {
			t.Fatalf("watch did not count the %d lines nginx wrote, every request final, within 60 s:\n%s", wrote,
				grepLines(metrics, "retrylens_lines", "retrylens_closed"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var at time.Time
	one := func(q string) float64 {
		t.Helper()
		got, err := prom.Query(q, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %v, want one series", q, got)
		}
		for _, v := range got {
			return v
		}
		return 0
	}
	for i := 0; ; i++ {
		at = time.Now()
		lines, err := prom.Query("retrylens_lines_total", at)
		if err != nil {
			t.Fatal(err)
		}
		closed, err := prom.Query("retrylens_closed_until_seconds", at)
		if err != nil {
			t.Fatal(err)
		}
		series := "{instance=\"" + addr + "\", job=\"retrylens\"}"
		if lines[series] == float64(wrote) && closed[series] >= final {
			break
		}
		if i == 100 {
			t.Fatalf("prometheus has %v lines, closed until %v; want %d lines, until %v or later", lines, closed, wrote, final)
		}
		time.Sleep(200 * time.Millisecond)
	}
	until := time.Unix(int64(one("retrylens_closed_until_seconds")), 0).UTC()
	stdout, stderr, code := retrylens(t, nil, "report", "--db", db, "--until", until.Format(time.RFC3339), "--window", "10s", "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var rep liveReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	sum := rep.Summary
	// Every request is final: the figures are the whole report's, which counts what the
	// client sent (a test of its own: TestRealNginx).
	if first := sum["first_attempts"]; first != float64(perSegment*segments) {
		t.Fatalf("closed until %s: %v first attempts final, want the %d sent", until, first, perSegment*segments)
	}
	t.Logf("final until %s: %v first attempts, %v retries, %v recovered, %v exhausted; %d lines", until.Format(time.TimeOnly),
		sum["first_attempts"], sum["retries"], sum["recovered"], sum["exhausted"], wrote)
	for _, c := range []struct {
		promQL string
		want   any
	}{
		{`sum(retrylens_attempts_total{attempt="first"})`, sum["first_attempts"]},
		{`sum(retrylens_attempts_total{attempt="retry"})`, sum["retries"]},
		{`sum(retrylens_attempts_total{attempt="untagged"})`, sum["untagged"]},
		{`sum(retrylens_requests_total{outcome="recovered"})`, sum["recovered"]},
		{`sum(retrylens_requests_total{outcome="exhausted"})`, sum["exhausted"]},
		{`sum(retrylens_attempts_failed_total{status="5xx",attempt="first"})`, sum["status_5xx_first"]},
		{`sum(retrylens_attempts_failed_total{status="5xx",attempt="retry"})`, sum["status_5xx_retry"]},
		{`sum(retrylens_attempts_abandoned_total)`, sum["abandoned"]},
		// here a recovered request's one retry is the only retry answered 2xx
		{`sum(retrylens_attempts_succeeded_total)`, sum["recovered"]},
		{`retrylens_hedged_requests_total`, rep.Hedging["requests"]},
		{`retrylens_loops_429_total`, rep.Loops["loops"]},
		{`retrylens_blind_retries_total`, rep.Loops["blind_retries"]},
	} {
		if got := one(c.promQL); got != c.want {
			t.Errorf("%s = %v through Prometheus, report says %v", c.promQL, got, c.want)
		}
	}
	for _, e := range rep.Endpoints {
		q := fmt.Sprintf(`retrylens_attempts_total{method=%q, route=%q, attempt="first"}`, e["method"], e["route"])
		if got := one(q); got != e["first_attempts"] {
			t.Errorf("%s = %v, report says %v", q, got, e["first_attempts"])
		}
	}
	for _, f := range rep.Findings {
		q := fmt.Sprintf(`retrylens_findings_total{kind=%q}`, f["kind"])
		if got := one(q); got != f["count"] {
			t.Errorf("%s = %v, report says %v", q, got, f["count"])
		}
	}
	// The last closed window: the report's window that starts where the gauges say.
	start10 := time.Unix(int64(one("retrylens_window_start_seconds")), 0).UTC()
	if !start10.Equal(until.Add(-10 * time.Second)) {
		t.Errorf("window gauges start at %s, want the 10 s before %s", start10, until)
	}
	want := map[string]any{"first_attempts": 0.0, "retries": 0.0, "verdict": "no attempt data"}
	for _, win := range rep.Windows {
		if win["start"] == start10.Format(time.RFC3339) {
			want = win
		}
	}
	if got := one("retrylens_window_first_attempts"); got != want["first_attempts"] {
		t.Errorf("window first attempts %v, report's window %v", got, want["first_attempts"])
	}
	if got := one("retrylens_window_retries"); got != want["retries"] {
		t.Errorf("window retries %v, report's window %v", got, want["retries"])
	}
	if got := one(fmt.Sprintf(`retrylens_window_verdict{verdict=%q}`, want["verdict"])); got != 1 {
		t.Errorf("window verdict %v is not 1 in the gauges", want["verdict"])
	}
	if rot := one("retrylens_rotations_total"); rot < float64(segments/4) {
		// The restarted watch counts the rotations since its start.
		t.Errorf("%v rotations seen since the restart, want at least %d", rot, segments/4)
	}

	// Every query of the Grafana dashboard runs on this Prometheus, with the rules loaded.
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if b, err := os.ReadFile(filepath.Join(contrib, "grafana", "retrylens.json")); err != nil || json.Unmarshal(b, &dash) != nil {
		t.Fatalf("the Grafana dashboard does not read: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if _, err := prom.Query(tg.Expr, at); err != nil {
				t.Errorf("dashboard panel %q: %v", p.Title, err)
			}
		}
	}
	if got, err := prom.Query("retrylens:amplification:ratio5m", at); err != nil || len(got) != 1 {
		t.Errorf("the recording rules did not record amplification: %v %v", got, err)
	}

	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = bytes.NewReader(metrics)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	// The page is built by the batches after it is first asked for.
	for i := 0; ; i++ {
		page := get(t, "http://"+addr+"/")
		if bytes.Contains(page, []byte("<!DOCTYPE html>")) && bytes.Contains(page, []byte("/api/items/:id")) {
			break
		}
		if i == 100 {
			t.Fatalf("/ is not the HTML report 10 s after it was asked for:\n%.300s", page)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.stop(t)
}

// watchProc is a retrylens watch running as a process of its own.
type watchProc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{} // closed when it has exited, err set
	err  error
}

func startWatch(t *testing.T, db, addr, glob string) *watchProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "watch", "--db", db, "--listen", addr, "--interval", "1s", "--max-gap", "5s",
		"--settle", "1s", "--window", "10s", "--html-window", "10m", glob)
	cmd.Env = append(os.Environ(), "RETRYLENS_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := &watchProc{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(w.kill)
	for i := 0; ; i++ {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			return w
		}
		if i == 100 {
			t.Fatalf("watch did not serve %s within 10 s:\n%s", addr, w.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *watchProc) kill() {
	w.cmd.Process.Kill()
	<-w.done
}

// stop sends SIGTERM: the batch under way finishes and watch exits 0.
func (w *watchProc) stop(t *testing.T) {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		if w.err != nil {
			t.Errorf("watch after SIGTERM: %v\n%s", w.err, w.out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("watch still running 30 s after SIGTERM")
	}
}

// shift makes room for access.log.1 as logrotate does: access.log.N(.gz) becomes N+1,
// and access.log.2, a rotation old, is compressed (delaycompress).
func shift(t *testing.T, dir string) {
	t.Helper()
	for k := 40; k >= 1; k-- {
		for _, ext := range []string{"", ".gz"} {
			from := filepath.Join(dir, fmt.Sprintf("access.log.%d%s", k, ext))
			if _, err := os.Stat(from); err == nil {
				if err := os.Rename(from, filepath.Join(dir, fmt.Sprintf("access.log.%d%s", k+1, ext))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	plain := filepath.Join(dir, "access.log.2")
	if b, err := os.ReadFile(plain); err == nil {
		var z bytes.Buffer
		gw := gzip.NewWriter(&z)
		gw.Write(b)
		gw.Close()
		if err := os.WriteFile(plain+".gz", z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(plain)
	}
}

// waitLogged waits until the rotated set holds as many lines as nginx's JSON log.
func waitLogged(t *testing.T, dir string) {
	t.Helper()
	for i := 0; ; i++ {
		want := countLines(t, filepath.Join(dir, "access.json"))
		files, _ := filepath.Glob(filepath.Join(dir, "access.log*"))
		have := 0
		for _, f := range files {
			have += countLines(t, f)
		}
		if have == want {
			return
		}
		if i == 100 {
			t.Fatalf("the text logs hold %d lines, the JSON log %d", have, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func grepLines(b []byte, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// value is the value of an unlabelled series in a /metrics page, NaN when absent.
func value(page []byte, name string) float64 {
	for _, l := range strings.Split(string(page), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return math.NaN()
}
