// Command shards measures what each shard of a ClickHouse cluster does for a load and for
// a report (docs/scale.md, "Per shard"): for each shard count it starts a cluster of
// Debian's clickhouse-server on 127.0.0.1 (lab.StartClickHouse), ingests one log into it
// with the given retrylens binary, then runs a report that reads the shards (10 s windows:
// not among the answers stored at ingest), and prints, per shard, the CPU seconds of its
// server process (user and system, from /proc) for each, and the rows and bytes its part
// of the requests table holds; and the loader's and reporter's own CPU seconds and peak
// memory. The shards share this machine's cores: their CPU seconds, not the wall time, say
// what a shard on a machine of its own would do.
//
//	go run ./bench/shards -bin /tmp/retrylens -log access.log -shards 2,4
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/retrylens/retrylens/lab"
)

func main() {
	bin := flag.String("bin", "", "the retrylens binary (required)")
	logPath := flag.String("log", "", "the log to load (required)")
	counts := flag.String("shards", "2,4", "shard counts, comma-separated")
	flag.Parse()
	if *bin == "" || *logPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			log.Fatalf("-shards: %q", s)
		}
		if err := measure(*bin, *logPath, n); err != nil {
			log.Fatal(err)
		}
	}
}

func measure(bin, logPath string, shards int) error {
	dir, err := os.MkdirTemp("", "retrylens-shards-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ch, err := lab.StartClickHouse(dir, shards)
	if err != nil {
		return err
	}
	defer ch.Stop()
	url := ch.URL("retrylens")
	for _, step := range []struct {
		name string
		args []string
	}{
		{"load", []string{"ingest", "--quiet", "--db", url, logPath}},
		{"report", []string{"report", "--db", url, "--format", "json", "--window", "10s", "-o", filepath.Join(dir, "report.json")}},
	} {
		before := cpu(ch)
		cmd := exec.Command(bin, step.args...)
		cmd.Stderr = os.Stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(step.args, " "), err)
		}
		wall := time.Since(start)
		after := cpu(ch)
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		own := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		var per []string
		var total float64
		for i := range after {
			d := after[i] - before[i]
			total += d
			per = append(per, fmt.Sprintf("%.2f", d))
		}
		fmt.Printf("%d shards, %-6s wall %6.2f s; retrylens %.2f CPU-s, peak %d MiB; shards %.2f CPU-s in all, each: %s\n",
			shards, step.name, wall.Seconds(), own.Seconds(), ru.Maxrss>>10, total, strings.Join(per, " "))
	}
	for i, addr := range ch.TCP {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
		if err != nil {
			return err
		}
		var rows, bytes uint64
		err = conn.QueryRow(context.Background(), "SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = 'retrylens' AND table = 'requests_local' AND active").Scan(&rows, &bytes)
		conn.Close()
		if err != nil {
			return err
		}
		fmt.Printf("%d shards, shard %d: %d rows, %.1f MiB on disk\n", shards, i+1, rows, float64(bytes)/(1<<20))
	}
	return nil
}

// cpu is each shard server's CPU seconds so far (user and system).
func cpu(ch *lab.ClickHouse) []float64 {
	out := make([]float64, len(ch.Shards))
	for i, s := range ch.Shards {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.PID()))
		if err != nil {
			continue
		}
		// the fields after the command's closing parenthesis; utime and stime are 14 and 15
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[i] = (u + st) / 100 // clock ticks
	}
	return out
}
