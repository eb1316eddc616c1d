package lab

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ClickHouse is a cluster of ClickHouse servers from Debian's clickhouse-server package,
// one process per shard on 127.0.0.1, each with its own config, ports and data directory
// under the lab's directory, and no system service. Its cluster is named "retrylens" in
// every server's remote_servers; no ZooKeeper: retrylens creates each shard's tables itself.
type ClickHouse struct {
	Shards  []*server
	TCP     []string // each shard's native-protocol address, in order
	Cluster string
}

// ErrNoClickHouse means Debian's clickhouse-server is not installed.
var ErrNoClickHouse = errors.New("clickhouse-server not found (apt-get install clickhouse-server)")

// ClickHouseBinary is where Debian's package puts the server.
func ClickHouseBinary() (string, error) {
	for _, p := range []string{"clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", ErrNoClickHouse
}

// StartClickHouse starts a cluster of shards servers under dir and waits until each
// answers /ping on its HTTP port (at most 60 s each: a first start creates its system
// tables).
func StartClickHouse(dir string, shards int) (*ClickHouse, error) {
	bin, err := ClickHouseBinary()
	if err != nil {
		return nil, err
	}
	users, err := os.ReadFile("/etc/clickhouse-server/users.xml")
	if err != nil {
		return nil, fmt.Errorf("clickhouse users.xml: %w", err)
	}
	type ports struct{ tcp, http, inter string }
	ps := make([]ports, shards)
	for i := range ps {
		for _, p := range []*string{&ps[i].tcp, &ps[i].http, &ps[i].inter} {
			if *p, err = freeAddr(); err != nil {
				return nil, err
			}
		}
	}
	var remote strings.Builder
	for _, p := range ps {
		_, port, _ := net.SplitHostPort(p.tcp)
		fmt.Fprintf(&remote, "<shard><internal_replication>false</internal_replication><replica><host>127.0.0.1</host><port>%s</port></replica></shard>", port)
	}
	c := &ClickHouse{Cluster: "retrylens"}
	for i, p := range ps {
		node := filepath.Join(dir, fmt.Sprintf("clickhouse-%d", i+1))
		for _, d := range []string{"data", "tmp", "user_files", "log"} {
			if err := os.MkdirAll(filepath.Join(node, d), 0o755); err != nil {
				return nil, err
			}
		}
		port := func(a string) string { _, p, _ := net.SplitHostPort(a); return p }
		conf := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>%[2]s</http_port>
  <tcp_port>%[3]s</tcp_port>
  <interserver_http_port>%[4]s</interserver_http_port>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <max_concurrent_queries>100</max_concurrent_queries>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <remote_servers><%[5]s>%[6]s</%[5]s></remote_servers>
</yandex>
`, node, port(p.http), port(p.tcp), port(p.inter), c.Cluster, remote.String())
		if err := os.WriteFile(filepath.Join(node, "config.xml"), []byte(conf), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(node, "users.xml"), users, 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--config-file="+filepath.Join(node, "config.xml"))
		cmd.Dir = node
		// No watchdog process between us and the server: the parent-death signal reaches it.
		cmd.Env = append(os.Environ(), "CLICKHOUSE_WATCHDOG_ENABLE=0")
		s, err := startServer(fmt.Sprintf("clickhouse shard %d", i+1), cmd, p.tcp, syscall.SIGTERM)
		if err == nil {
			err = waitPing("http://" + p.http + "/ping")
		}
		if err != nil {
			if s != nil {
				s.Stop()
			}
			c.Stop()
			log, _ := os.ReadFile(filepath.Join(node, "log", "error.log"))
			return nil, fmt.Errorf("%w\n%s", err, lastLines(string(log), 10))
		}
		c.Shards = append(c.Shards, s)
		c.TCP = append(c.TCP, p.tcp)
	}
	return c, nil
}

// waitPing waits, at most 60 s, until url answers "Ok.".
func waitPing(url string) error {
	client := http.Client{Timeout: time.Second}
	for range 600 {
		if r, err := client.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within 60s", url)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// URL is the retrylens database URL of the cluster's first shard and database db.
func (c *ClickHouse) URL(db string) string {
	return fmt.Sprintf("clickhouse://%s/%s?cluster=%s", c.TCP[0], db, c.Cluster)
}

// Stop stops every shard (SIGTERM, then SIGKILL after 10 s).
func (c *ClickHouse) Stop() error {
	var errs []error
	for _, s := range c.Shards {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
