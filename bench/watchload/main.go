// Command watchload measures retrylens watch keeping up with a log written at a steady
// rate: it writes generated lines (lab.Generate) to a file at --rate lines a second for
// --duration, renaming it every --rotate as logrotate does, while a retrylens watch
// follows the rotated set; every 10 s it prints the watch's lag behind the file, the
// batch time, the CPU it used and its peak memory, and at the end how long the watch took
// to catch up. Figures go to bench/README.md.
//
//	go build -o /tmp/retrylens ./cmd/retrylens
//	go run ./bench/watchload --bin /tmp/retrylens --rate 20000 --duration 10m
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/parse"
)

func main() {
	bin := flag.String("bin", "retrylens", "the retrylens binary")
	rate := flag.Int("rate", 20000, "lines written a second")
	duration := flag.Duration("duration", 10*time.Minute, "how long to write")
	rotate := flag.Duration("rotate", time.Minute, "rename the log this often (0: never)")
	interval := flag.String("interval", "10s", "the watch's --interval")
	dir := flag.String("dir", "", "where the log and the database go (default: a new temporary folder)")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "watchload-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	logPath := filepath.Join(*dir, "access.log")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	// The lines, generated ahead into a pipe as they are written.
	format, _ := parse.Preset("retry")
	pr, pw := io.Pipe()
	go func() {
		_, err := lab.Generate(pw, format, int(float64(*rate)*duration.Seconds())+1, 1)
		pw.CloseWithError(err)
	}()
	lines := bufio.NewReaderSize(pr, 1<<20)

	w := exec.Command(*bin, "watch", "--db", filepath.Join(*dir, "w.duckdb"), "--listen", addr, "--interval", *interval, logPath+"*")
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	defer w.Process.Kill()
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	var written, bytesOut int64
	var maxLag float64
	var rotations int
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastRotate, lastReport := start, start
	fmt.Printf("%8s %10s %12s %10s %8s %8s\n", "t", "lines", "lag_bytes", "batch_s", "cpu_s", "peak_mb")
	for time.Since(start) < *duration {
		<-tick.C
		due := int64(time.Since(start).Seconds()*float64(*rate)) - written
		var b strings.Builder
		for ; due > 0; due-- {
			l, err := lines.ReadString('\n')
			if err != nil {
				break
			}
			b.WriteString(l)
			written++
		}
		n, _ := out.WriteString(b.String())
		bytesOut += int64(n)
		if *rotate > 0 && time.Since(lastRotate) >= *rotate {
			out.Close()
			shift(logPath)
			if out, err = os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
				log.Fatal(err)
			}
			lastRotate = time.Now()
			rotations++
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			m := scrape(addr)
			maxLag = max(maxLag, m["retrylens_ingest_lag_bytes"])
			cpu, peak := procStats(w.Process.Pid)
			fmt.Printf("%8s %10.0f %12.0f %10.2f %8.1f %8.0f\n", time.Since(start).Round(time.Second), m["retrylens_lines_total"],
				m["retrylens_ingest_lag_bytes"], m["retrylens_last_batch_duration_seconds"], cpu, peak)
		}
	}
	out.Close()
	wrote := time.Now()
	for {
		m := scrape(addr)
		if m["retrylens_lines_total"] >= float64(written) {
			break
		}
		if time.Since(wrote) > 10*time.Minute {
			log.Fatalf("the watch had %v of %d lines 10 minutes after the writing stopped", m["retrylens_lines_total"], written)
		}
		time.Sleep(200 * time.Millisecond)
	}
	caught := time.Since(wrote)
	cpu, peak := procStats(w.Process.Pid)
	w.Process.Signal(syscall.SIGTERM)
	w.Wait()
	elapsed := time.Since(start)
	fmt.Printf("\nwrote %d lines (%.0f MB, %d a second) in %s, %d rotations; the watch had them all %.1fs after the writing stopped\n",
		written, float64(bytesOut)/1e6, *rate, duration.Round(time.Second), rotations, caught.Seconds())
	fmt.Printf("largest lag seen: %.1f MB (%.1f s of writing); CPU %.0f s in %.0f s (%.2f cores); peak RSS %.0f MB\n",
		maxLag/1e6, maxLag/(float64(bytesOut)/duration.Seconds()), cpu, elapsed.Seconds(), cpu/elapsed.Seconds(), peak)
}

// shift renames access.log to access.log.1, and older ones one further, keeping 5.
func shift(path string) {
	os.Remove(path + ".5")
	for k := 4; k >= 1; k-- {
		os.Rename(fmt.Sprintf("%s.%d", path, k), fmt.Sprintf("%s.%d", path, k+1))
	}
	os.Rename(path, path+".1")
}

// scrape reads the unlabelled retrylens_ series of /metrics.
func scrape(addr string) map[string]float64 {
	m := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "retrylens_") && !strings.Contains(name, "{") {
			m[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return m
}

// procStats is a process's CPU time (user + system, s) and peak resident memory (MB).
func procStats(pid int) (float64, float64) {
	var cpu, peak float64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		cpu = (ut + st) / 100 // clock ticks
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				peak = kb / 1024
			}
		}
	}
	return cpu, peak
}
