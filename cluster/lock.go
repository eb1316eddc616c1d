package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Loaders at once (docs/scale.md, "A loader per gateway"). ClickHouse has no transactions
// and no lock retrylens could take, but of two CREATE TABLE of one name on one server one
// fails: retrylens's locks are tables, on the URL's server, that hold their owner.
//
//   - A loader is present while its table loader_<token> is there and fresh: it writes a
//     heartbeat into it every beatEvery and drops it when done. It is dead when the table
//     is gone, when its last heartbeat is older than leaseTime, or, for a loader of this
//     host, as soon as its process is gone (a crashed ingest run again is not kept
//     waiting for the lease).
//   - Each chunk claims its load id by creating claim_<id> before its rows go to the
//     shards, and drops it once its registry entry is written. A check counts rows
//     without an entry as a killed load's only when no claim of a live loader names
//     their id: another loader's chunk in flight is left alone.
//   - A file is loaded under the lock file_<hash of its first line>: a second loader of
//     the same log (under any name) waits, then reads the registry again and loads only
//     what the first did not.
//   - The stored answers are written under the lock answers.
//
// A lock whose owner is dead is broken: renamed away (one of two breakers succeeds),
// then taken. After breaking a file's lock, the dead loader's rows in flight are
// repaired before the file is read (its chunk had not committed). An owner checks its
// lock is still its own before each commit point; a loader whose heartbeat stopped for
// leaseTime (a stopped process) finds its lock gone and fails its chunk.

const (
	beatEvery = 5 * time.Second
	leaseTime = time.Minute
	lockPoll  = 200 * time.Millisecond
)

// presence is a loader's own entry: its token and the heartbeat that keeps it alive.
type presence struct {
	token string
	stop  context.CancelFunc
	done  chan struct{}
}

// join makes this process a present loader of c until leave.
func (c *Cluster) join(ctx context.Context) error {
	if c.me != nil {
		c.me.refs++
		return nil
	}
	b := make([]byte, 8)
	rand.Read(b)
	token := hex.EncodeToString(b)
	host := thisHost
	// created with its first beat (empty only while the statement runs)
	err := c.Conn.Exec(ctx, "CREATE TABLE "+c.Table("loader_"+token)+" ENGINE = Log AS SELECT now() AS beat, toString(?) AS host, toInt64(?) AS pid",
		host, int64(os.Getpid()))
	if err != nil {
		return fmt.Errorf("register this loader: %w", err)
	}
	beat := func(ctx context.Context) error {
		return c.Conn.Exec(ctx, "INSERT INTO "+c.Table("loader_"+token)+" SELECT now(), ?, ?", host, int64(os.Getpid()))
	}
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &presence{token: token, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(beatEvery)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				beat(bctx) // a missed beat is made up by the next; leaseTime spans many
			}
		}
	}()
	c.me = &loaderRef{presence: p, refs: 1, host: host}
	c.sweep(ctx) // tidying: a dead loader's claims and locks are dead with or without it
	return nil
}

// sweep drops the tables of loaders that died without leaving (killed).
func (c *Cluster) sweep(ctx context.Context) error {
	names, err := c.tablesNamed(ctx, "loader_")
	if err != nil {
		return err
	}
	var tokens []string
	for _, n := range names {
		tokens = append(tokens, strings.TrimPrefix(n, "loader_"))
	}
	for _, t := range tokens {
		var host, pid string
		err := c.Conn.QueryRow(ctx, "SELECT any(host), toString(any(pid)) FROM "+c.Table("loader_"+t)).Scan(&host, &pid)
		if missingTable(err) {
			continue
		}
		if err != nil {
			return err
		}
		n, _ := strconv.ParseInt(pid, 10, 64)
		if live, err := c.alive(ctx, t, host, n); err == nil && !live {
			c.bury(ctx, t)
		}
	}
	return nil
}

// loaderRef counts the joins of one process (a watch's batches, an ingest's load and
// answers) so that its presence ends with the last leave.
type loaderRef struct {
	*presence
	refs int
	host string
}

// leave ends what join began.
func (c *Cluster) leave(ctx context.Context) {
	if c.me == nil {
		return
	}
	if c.me.refs--; c.me.refs > 0 {
		return
	}
	c.me.stop()
	<-c.me.done
	c.Conn.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+c.Table("loader_"+c.me.token))
	c.me = nil
}

// processAlive reports whether a process of this host with that id runs.
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// alive reports whether the loader of token is present: its table there and fresh, or,
// on this host, its process running.
func (c *Cluster) alive(ctx context.Context, token, host string, pid int64) (bool, error) {
	if c.me != nil && token == c.me.token {
		return true, nil
	}
	if host == thisHost && pid > 0 && !processAlive(int(pid)) {
		return false, nil
	}
	// an empty table is a loader between creating it and its first beat
	var fresh uint8
	err := c.Conn.QueryRow(ctx, "SELECT toUInt8(count() = 0 OR max(beat) >= now() - ?) FROM "+c.Table("loader_"+token), int64(leaseTime/time.Second)).Scan(&fresh)
	if missingTable(err) {
		return false, nil
	}
	return fresh == 1, err
}

// bury drops a dead loader's own table (a killed loader leaves it).
func (c *Cluster) bury(ctx context.Context, token string) {
	if token != "" && (c.me == nil || token != c.me.token) {
		c.Conn.Exec(ctx, "DROP TABLE IF EXISTS "+c.Table("loader_"+token))
	}
}

// missingTable reports whether err is ClickHouse's "table doesn't exist" (code 60).
func missingTable(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == 60
}

// ownerOf reads the owner of a lock or claim table; ok is false when it is not there.
// The owner is in the table's column defaults, so that it is there with the table: a
// CREATE … AS SELECT is visible empty for a moment.
func (c *Cluster) ownerOf(ctx context.Context, table string) (token, host string, pid int64, ok bool, err error) {
	rows, err := c.Conn.Query(ctx, "SELECT name, default_expression FROM system.columns WHERE database = ? AND table = ?", c.DB, table)
	if err != nil {
		return "", "", 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return "", "", 0, false, err
		}
		def = strings.Trim(def, "'")
		switch name {
		case "token":
			token, ok = def, true
		case "host":
			host = def
		case "pid":
			pid, _ = strconv.ParseInt(def, 10, 64)
		}
	}
	return token, host, pid, ok, rows.Err()
}

// thisHost is the host name as owners record it: the characters a SQL literal needs no
// escape for.
var thisHost = func() string {
	h, _ := os.Hostname()
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, h)
}()

// take creates table with this loader as its owner; false when it exists.
func (c *Cluster) take(ctx context.Context, table string) (bool, error) {
	if c.me == nil {
		return false, errors.New("take " + table + ": this process is no loader of the cluster (join first)")
	}
	// all text: ClickHouse writes a number's default as a CAST
	err := c.Conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (token String DEFAULT '%s', host String DEFAULT '%s', pid String DEFAULT '%d') ENGINE = Log",
		c.Table(table), c.me.token, thisHost, os.Getpid()))
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && ex.Code == 57 { // TABLE_ALREADY_EXISTS
		return false, nil
	}
	return err == nil, err
}

// holds reports whether table is still this loader's.
func (c *Cluster) holds(ctx context.Context, table string) error {
	if c.me == nil {
		return errors.New("this process is no loader of the cluster")
	}
	token, _, _, ok, err := c.ownerOf(ctx, table)
	if err != nil {
		return err
	}
	if !ok || token != c.me.token {
		return fmt.Errorf("this loader lost %s to another (its heartbeat stopped for %s): run the ingest again", table, leaseTime)
	}
	return nil
}

// lock takes the lock table lock_<name>, on what (for messages), waiting while a live
// loader holds it: at most wait (0 fails at once, as --wait does for a file), or, when
// wait is negative, as long as it lives, in silence. broke says it was a dead loader's.
func (c *Cluster) lock(ctx context.Context, name, what string, wait time.Duration) (unlock func(), broke bool, err error) {
	table := "lock_" + name
	deadline := time.Now().Add(wait)
	told := false
	for {
		ok, err := c.take(ctx, table)
		if err != nil {
			return nil, broke, fmt.Errorf("take the lock %s: %w", table, err)
		}
		if ok {
			return func() {
				// not another's, if a loader took it as this one's heartbeat had stopped
				if ctx := context.WithoutCancel(ctx); c.holds(ctx, table) == nil {
					c.Conn.Exec(ctx, "DROP TABLE IF EXISTS "+c.Table(table))
				}
			}, broke, nil
		}
		token, host, pid, there, err := c.ownerOf(ctx, table)
		if err != nil {
			return nil, broke, err
		}
		if there {
			live, err := c.alive(ctx, token, host, pid)
			if err != nil {
				return nil, broke, err
			}
			if !live {
				// one of two breakers renames it; the other finds it gone and tries again
				c.Conn.Exec(ctx, "RENAME TABLE "+c.Table(table)+" TO "+c.Table("dead_"+table+"_"+token))
				c.Conn.Exec(ctx, "DROP TABLE IF EXISTS "+c.Table("dead_"+table+"_"+token))
				c.bury(ctx, token)
				broke = true
				continue
			}
		}
		if there {
			held := fmt.Errorf("another loader (pid %d on %s) holds %s", pid, host, what)
			if wait >= 0 && !time.Now().Before(deadline) {
				return nil, broke, fmt.Errorf("%w: gave up after %s (--wait); run again once it is done", held, wait)
			}
			if !told && c.Waiting != nil && wait >= 0 {
				c.Waiting(held)
				told = true
			}
		}
		select {
		case <-ctx.Done():
			return nil, broke, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// claim takes a load id for a chunk: one above every id registered, loaded or claimed.
func (c *Cluster) claim(ctx context.Context) (int32, error) {
	var fromFiles, fromRows int32
	if err := c.Conn.QueryRow(ctx, "SELECT toInt32(max(file_id)) FROM "+c.Table("files")).Scan(&fromFiles); err != nil {
		return 0, err
	}
	if err := c.Conn.QueryRow(ctx, "SELECT toInt32(max(file_id)) FROM "+c.Table("requests")).Scan(&fromRows); err != nil {
		return 0, err
	}
	claims, err := c.claims(ctx)
	if err != nil {
		return 0, err
	}
	id := max(fromFiles, fromRows)
	for cid := range claims {
		id = max(id, int32(cid))
	}
	for range 1000 {
		id++
		ok, err := c.take(ctx, claimTable(int64(id)))
		if err != nil {
			return 0, fmt.Errorf("claim load id %d: %w", id, err)
		}
		if ok {
			return id, nil
		}
	}
	return 0, errors.New("could not claim a load id: 1000 were taken")
}

// unclaim drops a chunk's claim once its registry entry is written.
func (c *Cluster) unclaim(ctx context.Context, id int32) {
	ctx = context.WithoutCancel(ctx)
	table := claimTable(int64(id))
	if c.holds(ctx, table) == nil {
		c.Conn.Exec(ctx, "DROP TABLE IF EXISTS "+c.Table(table))
	}
}

// dropClaim drops a dead loader's claim (RepairCluster, once its rows are deleted).
func (c *Cluster) dropClaim(ctx context.Context, id int64) {
	c.Conn.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+c.Table(claimTable(id)))
}

// claimTable is the table that claims load id id.
func claimTable(id int64) string { return fmt.Sprintf("claim_%d", id) }

// tablesNamed are the names of the cluster database's tables on the URL's server that
// start with prefix.
func (c *Cluster) tablesNamed(ctx context.Context, prefix string) ([]string, error) {
	rows, err := c.Conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ? AND startsWith(name, ?)", c.DB, prefix)
	if err != nil {
		return nil, fmt.Errorf("list the %s tables: %w", prefix, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// claims are the load ids claimed, by id, with whether their loader is alive.
func (c *Cluster) claims(ctx context.Context) (map[int64]bool, error) {
	names, err := c.tablesNamed(ctx, "claim_")
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, n := range names {
		var id int64
		if _, err := fmt.Sscanf(n, "claim_%d", &id); err != nil {
			continue
		}
		token, host, pid, ok, err := c.ownerOf(ctx, n)
		if err != nil {
			return nil, err
		}
		live := false
		if ok {
			if live, err = c.alive(ctx, token, host, pid); err != nil {
				return nil, err
			}
		}
		out[id] = live
	}
	return out, nil
}
