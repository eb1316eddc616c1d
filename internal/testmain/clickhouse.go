package testmain

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrylens/retrylens/lab"
)

// clickHouse is the test binary's two-shard cluster, started by the first ClusterURL
// and stopped by Run.
var clickHouse struct {
	once sync.Once
	c    *lab.ClickHouse
	dir  string
	err  error
	dbs  atomic.Int64
}

// ClusterURL returns the URL of a new database on the test binary's ClickHouse cluster
// (two shards from Debian's package), starting it the first time. Without
// clickhouse-server the test is skipped, unless $CI is set.
func ClusterURL(t testing.TB) string {
	t.Helper()
	clickHouse.once.Do(func() {
		if clickHouse.dir, clickHouse.err = os.MkdirTemp("", "retrylens-clickhouse-"); clickHouse.err == nil {
			clickHouse.c, clickHouse.err = lab.StartClickHouse(clickHouse.dir, 2)
		}
	})
	if errors.Is(clickHouse.err, lab.ErrNoClickHouse) && os.Getenv("CI") == "" {
		t.Skip(clickHouse.err)
	}
	if clickHouse.err != nil {
		t.Fatal(clickHouse.err)
	}
	return clickHouse.c.URL(fmt.Sprintf("t%d", clickHouse.dbs.Add(1)))
}

// stopClickHouse stops the cluster if a test started it.
func stopClickHouse() {
	if clickHouse.c != nil {
		clickHouse.c.Stop()
	}
	if clickHouse.dir != "" {
		os.RemoveAll(clickHouse.dir)
	}
}
