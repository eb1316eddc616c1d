// Command chup runs a ClickHouse cluster from Debian's clickhouse-server on 127.0.0.1 for
// measurements by hand (bench/cluster.sh): lab.StartClickHouse's shards under a folder,
// until its input closes or it is signalled; then it stops them by PID.
//
//	go run ./bench/chup -dir /tmp/ch -shards 2   # prints the retrylens URL, then waits
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/retrylens/retrylens/lab"
)

func main() {
	dir := flag.String("dir", "", "folder for the shards' configs and data (required)")
	shards := flag.Int("shards", 2, "number of shards")
	flag.Parse()
	if *dir == "" || *shards < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ch, err := lab.StartClickHouse(*dir, *shards)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ch.URL("retrylens"))
	done := make(chan struct{}, 2)
	go func() { io.Copy(io.Discard, os.Stdin); done <- struct{}{} }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; done <- struct{}{} }()
	<-done
	if err := ch.Stop(); err != nil {
		log.Fatal(err)
	}
}
