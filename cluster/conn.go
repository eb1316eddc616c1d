package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/retrylens/retrylens/ingest"
	"github.com/retrylens/retrylens/parse"
)

// A retrylens database on a ClickHouse cluster (docs/scale.md): the rows in a MergeTree
// table on every shard (requests_local) under a Distributed table (requests) sharded by
// a hash of the link key, so that every attempt of a request lands on one shard; the
// registry (files, reject_counts, rejects) on the server the URL names. The SQL keeps to
// what ClickHouse 18.16 (Debian's package) has, which current releases have too: no
// window functions, CTEs or DateTime64 (times are microseconds since the epoch, ts_us).
//
// Exactly once without transactions: a chunk's rows go first, into each shard's table
// where the Distributed table would send them (on the shards when the insert returns), then its rejects,
// then its registry entry, the commit point. Every ingest first compares the rows with
// the registry (CheckCluster) and deletes what no entry covers (RepairCluster): a killed
// load's rows, whether all of them reached the shards or part, but not another live
// loader's chunk in flight: loaders run at once (lock.go).

// ClusterScheme starts a database URL that names a ClickHouse cluster.
const ClusterScheme = "clickhouse://"

// Cluster is an open retrylens database on a ClickHouse cluster.
type Cluster struct {
	Conn   driver.Conn   // the URL's server: registry, Distributed table, queries
	Shards []driver.Conn // one server per shard, for its local table
	DB     string        // the database, on every server
	Name   string        // the cluster, as remote_servers names it

	// Wait is how long a load waits for a file another loader holds (0 fails at once);
	// Waiting, when set, is told once per wait what it waits for.
	Wait    time.Duration
	Waiting func(err error)

	// PartRows and CountRows cut the loader's work (read.go: partRows, countSlices): how
	// many rows to link a part links, and about how many rows a query of the shards'
	// counts covers; 0 for the defaults. They change how the work is cut, never a figure.
	PartRows, CountRows int

	upTo     []uint64   // each shard's weight plus those before it: where a row goes (shardOf)
	me       *loaderRef // while this process loads (lock.go)
	fileLock string     // the file lock held while a file loads
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// OpenCluster connects to clickhouse://[USER[:PASSWORD]@]HOST:PORT/DATABASE?cluster=NAME
// (the native protocol's port, 9000 by default), finds the cluster's shards in
// system.clusters and creates what retrylens needs that is not there yet.
func OpenCluster(ctx context.Context, raw string) (*Cluster, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "clickhouse" || u.Host == "" {
		return nil, fmt.Errorf("%q is not a database URL like clickhouse://127.0.0.1:9000/retrylens?cluster=logs", RedactURL(raw))
	}
	raw = u.Redacted() // errors never show the password
	c := &Cluster{DB: strings.Trim(u.Path, "/"), Name: u.Query().Get("cluster")}
	if c.DB == "" {
		c.DB = "retrylens"
	}
	if !identifier.MatchString(c.DB) {
		return nil, fmt.Errorf("%s: the database name %q must be letters, digits and _", raw, c.DB)
	}
	if !identifier.MatchString(c.Name) {
		return nil, fmt.Errorf("%s: name the cluster (?cluster=NAME, as the servers' remote_servers does): the rows are spread over its shards", raw)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":9000"
	}
	auth := clickhouse.Auth{Database: "default", Username: u.User.Username()}
	auth.Password, _ = u.User.Password()
	if auth.Username == "" {
		auth.Username = "default"
	}
	open := func(addr string) (driver.Conn, error) {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: auth, DialTimeout: 5 * time.Second,
			MaxOpenConns: 8, ReadTimeout: 10 * time.Minute})
		if err == nil {
			err = conn.Ping(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("clickhouse at %s: %w", addr, err)
		}
		return conn, nil
	}
	if c.Conn, err = open(host); err != nil {
		return nil, err
	}
	rows, err := c.Conn.Query(ctx, "SELECT host_address, toUInt16(port), toUInt64(shard_weight) FROM system.clusters WHERE cluster = ? AND replica_num = 1 ORDER BY shard_num", c.Name)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("find the shards of cluster %s: %w", c.Name, err)
	}
	var addrs []string
	for rows.Next() {
		var h string
		var p uint16
		var w uint64
		if err := rows.Scan(&h, &p, &w); err != nil {
			rows.Close()
			c.Close()
			return nil, err
		}
		addrs = append(addrs, fmt.Sprintf("%s:%d", h, p))
		total := w
		if n := len(c.upTo); n > 0 {
			total += c.upTo[n-1]
		}
		c.upTo = append(c.upTo, total)
	}
	rows.Close()
	if len(addrs) == 0 {
		c.Close()
		return nil, fmt.Errorf("%s: the server has no cluster %q in its remote_servers", raw, c.Name)
	}
	if c.upTo[len(c.upTo)-1] == 0 {
		c.Close()
		return nil, fmt.Errorf("%s: every shard of cluster %q has weight 0: no row could be stored", raw, c.Name)
	}
	for _, a := range addrs {
		conn, err := open(a)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Shards = append(c.Shards, conn)
	}
	if err := c.ensure(ctx); err != nil {
		c.Close()
		return nil, err
	}
	// Again, in the database it now has: unqualified names in a query are its tables.
	c.Conn.Close()
	auth.Database = c.DB
	if c.Conn, err = open(host); err != nil {
		c.Conn = nil
		c.Close()
		return nil, err
	}
	return c, nil
}

// RedactURL is a database URL as messages show it: without its password.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		return ClusterScheme + "xxxxx" + raw[at:]
	}
	return raw
}

// Close closes every connection.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Shards {
		errs = append(errs, s.Close())
	}
	if c.Conn != nil {
		errs = append(errs, c.Conn.Close())
	}
	return errors.Join(errs...)
}

// Loads is how many loads the registry holds.
func (c *Cluster) Loads(ctx context.Context) (int64, error) {
	var n uint64
	err := c.Conn.QueryRow(ctx, "SELECT count() FROM "+c.Table("files")).Scan(&n)
	return int64(n), err
}

// Table is a table's name in the cluster's database.
func (c *Cluster) Table(name string) string { return c.DB + "." + name }

// clusterColumns are the requests table's columns in ClickHouse: the DuckDB table's
// (schema.sql), with the time as microseconds and the link key's hash that shards it.
const clusterColumns = `file_id Int32, line Int64, ts_us Nullable(Int64),
	remote_addr Nullable(String), method Nullable(String), uri Nullable(String), protocol Nullable(String),
	status Nullable(Int16), bytes Nullable(Int64), referer Nullable(String), user_agent Nullable(String),
	host Nullable(String), request_time Nullable(Float64), upstream_addr Nullable(String),
	upstream_status Nullable(String), upstream_response_time Nullable(String), upstream_tries Nullable(Int16),
	attempt Nullable(Int32), attempt_source Nullable(String), max_attempts Nullable(Int16),
	retry_reason Nullable(String), request_id Nullable(String), idempotency_key Nullable(String),
	invocation_id Nullable(String), retry_after Nullable(String), route Nullable(String), link_hash UInt64,
	error_code Nullable(String), operation Nullable(String)`

// addedColumns are the columns of clusterColumns that clusters made before them lack:
// ensure adds them (ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS).
var addedColumns = [][2]string{{"error_code", "Nullable(String)"}, {"operation", "Nullable(String)"}}

// MinuteOf is the minute (since the epoch; 0 without a time) of col, a time in
// microseconds: what a cluster's tables are sorted by first, so that a range reads its
// own granules. 18.16 uses the sort key only for conditions on the key's expression
// itself, so a query states it beside its bounds on col. The shards' requests_local
// tables made before it was their key are sorted by (file_id, line) alone: the same rows,
// read whole.
func MinuteOf(col string) string { return "intDiv(ifNull(" + col + ", 0), 60000000)" }

// ensure creates the database, each shard's local table, the Distributed table and the
// registry, where they do not exist (ON CLUSTER needs ZooKeeper: each shard is told).
func (c *Cluster) ensure(ctx context.Context) error {
	local := "CREATE TABLE IF NOT EXISTS " + c.Table("requests_local") + " (" + clusterColumns + ") ENGINE = MergeTree() ORDER BY (" + MinuteOf("ts_us") + ", file_id, line)"
	for i, s := range c.Shards {
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS " + c.DB, local} {
			if err := s.Exec(ctx, q); err != nil {
				return fmt.Errorf("shard %d: %w", i+1, err)
			}
		}
		if err := addColumns(ctx, s, c.DB, "requests_local"); err != nil {
			return fmt.Errorf("shard %d: %w", i+1, err)
		}
	}
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + c.DB,
		"CREATE TABLE IF NOT EXISTS " + c.Table("requests") + " (" + clusterColumns + ") ENGINE = Distributed(" +
			c.Name + ", " + c.DB + ", requests_local, link_hash)",
		"CREATE TABLE IF NOT EXISTS " + c.Table("files") + ` (file_id Int32, path String, sha256 String,
			offset_bytes Int64, bytes Int64, first_line Int64, lines_end Int64, format String, lines Int64,
			rows Int64, rejected Int64, first_ts Nullable(DateTime), last_ts Nullable(DateTime), loaded_at DateTime,
			line_sum Int64, duplicates Int64) ENGINE = MergeTree() ORDER BY file_id`,
		"CREATE TABLE IF NOT EXISTS " + c.Table("reject_counts") + " (file_id Int32, reason String, n Int64) ENGINE = MergeTree() ORDER BY file_id",
		"CREATE TABLE IF NOT EXISTS " + c.Table("rejects") + " (file_id Int32, line Int64, reason String, message String, excerpt String) ENGINE = MergeTree() ORDER BY file_id",
	} {
		if err := c.Conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	return addColumns(ctx, c.Conn, c.DB, "requests")
}

// addColumns adds to db.table the addedColumns it lacks.
func addColumns(ctx context.Context, conn driver.Conn, db, table string) error {
	for _, col := range addedColumns {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?", db, table, col[0]).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if err := conn.Exec(ctx, "ALTER TABLE "+db+"."+table+" ADD COLUMN "+col[0]+" "+col[1]); err != nil {
				return fmt.Errorf("add %s to %s: %w", col[0], table, err)
			}
		}
	}
	return nil
}

// LinkHash is the hash the rows are sharded by: of the link key, the idempotency key,
// else the invocation id, else the request id, else client, user agent, method and URI
// (what the heuristic links by).
func LinkHash(r *parse.Record) uint64 {
	h := fnv.New64a()
	switch {
	case r.IdempotencyKey != "":
		io.WriteString(h, r.IdempotencyKey)
	case r.InvocationID != "":
		io.WriteString(h, r.InvocationID)
	case r.RequestID != "":
		io.WriteString(h, r.RequestID)
	default:
		for _, s := range []string{r.RemoteAddr, r.UserAgent, r.Method, r.URI} {
			io.WriteString(h, s)
			h.Write([]byte{0})
		}
	}
	return h.Sum64()
}

// LoadCluster is ingest.Load into a cluster: the same files, chunks, registry and
// reject accounting; --dedupe is the DuckDB file's alone. Other loaders may load into
// the cluster at the same time (lock.go).
func LoadCluster(ctx context.Context, c *Cluster, paths []string, opt ingest.Options) (ingest.Result, error) {
	if err := c.join(ctx); err != nil {
		return ingest.Result{}, err
	}
	defer c.leave(ctx)
	return ingest.LoadTarget(ctx, c, paths, opt)
}

// LockFile holds a file against other loaders (lock.go). A lock a dead loader held is
// broken, and the rows its chunk in flight had sent are deleted before the file is read.
func (c *Cluster) LockFile(ctx context.Context, key, path string) (func(), error) {
	name := "file_" + key
	unlock, broke, err := c.lock(ctx, name, path, max(c.Wait, 0)) // a negative --wait fails at once, as on a file
	if err != nil {
		return nil, err
	}
	if broke {
		d, err := CheckCluster(ctx, c)
		if err == nil && !d.OK() {
			_, err = RepairCluster(ctx, c, d)
		}
		if err != nil {
			unlock()
			return nil, fmt.Errorf("repair what a dead loader of this file left: %w", err)
		}
	}
	c.fileLock = "lock_" + name
	return func() { c.fileLock = ""; unlock() }, nil
}

func (c *Cluster) String() string { return "cluster" }

// Check is CheckCluster, for ingest.Target.
func (c *Cluster) Check(ctx context.Context) (ingest.Damage, error) { return CheckCluster(ctx, c) }

// Repair is RepairCluster, for ingest.Target.
func (c *Cluster) Repair(ctx context.Context, d ingest.Damage) (int64, error) {
	return RepairCluster(ctx, c, d)
}

// RouteCheck counts the distinct routes into res and, past max, names the path prefixes
// behind them.
func (c *Cluster) RouteCheck(ctx context.Context, res *ingest.Result, max int64) error {
	if max <= 0 {
		max = 500
	}
	var n uint64
	if err := c.Conn.QueryRow(ctx, "SELECT uniqExact(route) FROM "+c.Table("requests")+" WHERE route IS NOT NULL").Scan(&n); err != nil {
		return fmt.Errorf("count routes: %w", err)
	}
	res.Routes = int64(n)
	if res.Routes <= max {
		return nil
	}
	rows, err := c.Conn.Query(ctx, `SELECT if(prefix = '', '/', prefix) AS p, count() AS n, min(route)
		FROM (SELECT DISTINCT assumeNotNull(route) AS route, replaceRegexpOne(assumeNotNull(route), '/[^/]*$', '') AS prefix
		      FROM `+c.Table("requests")+` WHERE route IS NOT NULL)
		GROUP BY p ORDER BY n DESC, p LIMIT 5`)
	if err != nil {
		return fmt.Errorf("route hotspots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h ingest.Hotspot
		var n uint64
		if err := rows.Scan(&h.Prefix, &n, &h.Example); err != nil {
			return err
		}
		h.Routes = int64(n)
		res.Hotspots = append(res.Hotspots, h)
	}
	return rows.Err()
}

// Registered returns every loaded prefix.
func (c *Cluster) Registered(ctx context.Context) ([]ingest.Prefix, error) {
	rows, err := c.Conn.Query(ctx, ingest.RegistryQuery) // the connection's database is the cluster's
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	defer rows.Close()
	return ingest.ScanPrefixes(rows)
}

// clusterBatch is how many rows go to a shard in one insert.
const clusterBatch = 1 << 16

// shardOf is the shard a row of link hash h is on: as the Distributed table sends it, by
// the remainder of h over the shards' weights.
func (c *Cluster) shardOf(h uint64) int {
	r := h % c.upTo[len(c.upTo)-1]
	for i, w := range c.upTo {
		if r < w {
			return i
		}
	}
	return len(c.upTo) - 1
}

// LoadChunk loads a chunk: its rows into the shards (on them when each insert returns),
// then its rejects, then its registry entry, the commit point.
func (c *Cluster) LoadChunk(ctx context.Context, ch *ingest.Chunk) error {
	ch.Step(ingest.StepBegun)
	// A new id, claimed against other loaders: above every id in the rows too,
	// registered or not. A chunk that fails leaves its rows to the next check.
	id, err := c.claim(ctx)
	if err != nil {
		return err
	}
	defer c.unclaim(ctx, id)

	// Each shard's rows go straight into its own table, where the Distributed table
	// would send them (shardOf: a request's lines meet on one shard), so that no shard
	// routes the others' rows and a shard's parts hold its own rows: with twice the
	// shards, each does half the work.
	cols := append(append([]string{"file_id"}, ingest.KeyTextColumns()...), "link_hash")
	insert := "INSERT INTO " + c.Table("requests_local") + " (" + strings.Join(cols, ", ") + ")"
	batches := make([]driver.Batch, len(c.Shards))
	pending := make([]int, len(c.Shards))
	var inserted int64
	defer func() {
		for _, b := range batches {
			if b != nil {
				b.Abort()
			}
		}
	}()
	send := func(i int) error {
		if batches[i] == nil || pending[i] == 0 {
			return nil
		}
		if err := batches[i].Send(); err != nil {
			return fmt.Errorf("load the rows into shard %d: %w", i+1, err)
		}
		inserted += int64(pending[i])
		batches[i], pending[i] = nil, 0
		ch.Step(ingest.StepRows) // these rows are on the shards, unregistered
		return nil
	}
	row := make([]any, len(cols))
	err = ch.Rows(ctx, func(rec *parse.Record, vals []any) error {
		h := LinkHash(rec)
		i := c.shardOf(h)
		if batches[i] == nil {
			var err error
			if batches[i], err = c.Shards[i].PrepareBatch(ctx, insert); err != nil {
				return err
			}
		}
		row[0] = id
		copy(row[1:], vals)
		row[len(row)-1] = h
		if err := batches[i].Append(row...); err != nil {
			return err
		}
		if pending[i]++; pending[i] == clusterBatch {
			return send(i)
		}
		return nil
	})
	for i := range batches {
		if err == nil {
			err = send(i)
		}
	}
	if err != nil {
		return err
	}
	out := ch.Out()
	if inserted != out.Rows {
		return fmt.Errorf("load the rows: the cluster took %d of the %d rows parsed", inserted, out.Rows)
	}
	ch.Step(ingest.StepInserted)

	reasons := make([]string, 0, len(out.Reasons))
	for r := range out.Reasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		rc, err := c.Conn.PrepareBatch(ctx, "INSERT INTO "+c.Table("reject_counts")+" (file_id, reason, n)")
		if err != nil {
			return err
		}
		for _, r := range reasons {
			if err := rc.Append(id, r, out.Reasons[r]); err != nil {
				return err
			}
		}
		if err := rc.Send(); err != nil {
			return fmt.Errorf("register the rejects: %w", err)
		}
	}
	if len(out.Samples) > 0 {
		rs, err := c.Conn.PrepareBatch(ctx, "INSERT INTO "+c.Table("rejects")+" (file_id, line, reason, message, excerpt)")
		if err != nil {
			return err
		}
		for _, s := range out.Samples {
			if err := rs.Append(id, int64(s.Line), s.Reason, s.Message, s.Excerpt); err != nil {
				return err
			}
		}
		if err := rs.Send(); err != nil {
			return fmt.Errorf("register the rejects: %w", err)
		}
	}
	ch.Step(ingest.StepRegistered)
	// The registry entry commits the chunk, if its claim and file are still this
	// loader's.
	for _, held := range []string{claimTable(int64(id)), c.fileLock} {
		if held == "" {
			continue
		}
		if err := c.holds(ctx, held); err != nil {
			return err
		}
	}
	reg, err := c.Conn.PrepareBatch(ctx, "INSERT INTO "+c.Table("files")+` (file_id, path, sha256, offset_bytes, bytes,
		first_line, lines_end, format, lines, rows, rejected, first_ts, last_ts, loaded_at, line_sum, duplicates)`)
	if err != nil {
		return err
	}
	e := ch.Entry()
	if err := reg.Append(id, e.Path, e.SHA256, e.Offset, e.End, e.FirstLine, e.LastLine, e.Format, e.Lines, e.Rows,
		e.Rejected, e.First, e.Last, e.LoadedAt, e.LineSum, int64(0)); err != nil {
		return err
	}
	if err := reg.Send(); err != nil {
		return fmt.Errorf("register the load: %w", err)
	}
	ch.Step(ingest.StepCommitted)
	return nil
}

// CheckCluster is Check on a cluster: per load id, the rows on the shards (count, line
// range, line sum) and the rejects against the registry.
func CheckCluster(ctx context.Context, c *Cluster) (ingest.Damage, error) {
	var d ingest.Damage
	// per load id: what the registry says (registered) and what is there
	type load struct {
		id, offset, bytes         int64
		first, last               int64
		registered                bool
		path                      string
		rows, lineSum, rejected   int64
		haveRows, sum, minL, maxL int64
		rejects, rejectRecords    int64
	}
	loads := map[int64]*load{}
	get := func(id int64) *load {
		l := loads[id]
		if l == nil {
			l = &load{}
			l.id = id
			loads[id] = l
		}
		return l
	}
	rows, err := c.Conn.Query(ctx, "SELECT toInt64(file_id), path, offset_bytes, bytes, first_line, lines_end, rows, rejected, line_sum FROM "+c.Table("files"))
	if err != nil {
		return d, fmt.Errorf("read the registry: %w", err)
	}
	var all []ingest.RegistryLoad
	for rows.Next() { // the registry first: loads is empty
		l := &load{registered: true}
		if err := rows.Scan(&l.id, &l.path, &l.offset, &l.bytes, &l.first, &l.last, &l.rows, &l.rejected, &l.lineSum); err != nil {
			rows.Close()
			return d, err
		}
		loads[l.id] = l
		all = append(all, ingest.NewRegistryLoad(l.id, l.offset, l.bytes, l.first, l.last))
	}
	rows.Close()
	rows, err = c.Conn.Query(ctx, "SELECT toInt64(file_id), toInt64(count()), toInt64(sum(line)), min(line), max(line) FROM "+c.Table("requests")+" GROUP BY file_id")
	if err != nil {
		return d, fmt.Errorf("count the rows: %w", err)
	}
	for rows.Next() {
		var id, n, sum, lo, hi int64
		if err := rows.Scan(&id, &n, &sum, &lo, &hi); err != nil {
			rows.Close()
			return d, err
		}
		l := get(id)
		l.haveRows, l.sum, l.minL, l.maxL = n, sum, lo, hi
	}
	rows.Close()
	for _, t := range []string{"reject_counts", "rejects"} {
		q := "SELECT toInt64(file_id), toInt64(sum(n)), toInt64(count()) FROM " + c.Table(t) + " GROUP BY file_id"
		if t == "rejects" {
			q = "SELECT toInt64(file_id), toInt64(0), toInt64(count()) FROM " + c.Table(t) + " GROUP BY file_id"
		}
		rows, err := c.Conn.Query(ctx, q)
		if err != nil {
			return d, fmt.Errorf("count the rejects: %w", err)
		}
		for rows.Next() {
			var id, n, recs int64
			if err := rows.Scan(&id, &n, &recs); err != nil {
				rows.Close()
				return d, err
			}
			l := get(id)
			l.rejects += n
			l.rejectRecords += recs
		}
		rows.Close()
	}
	ids := make([]int64, 0, len(loads))
	for id := range loads {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		l := loads[id]
		if !l.registered {
			d.Orphans = append(d.Orphans, ingest.Orphan{ID: id, Rows: l.haveRows, Rejects: l.rejectRecords})
			continue
		}
		outside := l.haveRows > 0 && (l.minL < l.first || l.maxL > l.last)
		if l.haveRows != l.rows || l.sum != l.lineSum || outside || l.rejects != l.rejected {
			d.Bad = append(d.Bad, ingest.BadLoad{ID: id, Path: l.path, FirstLine: l.first, LastLine: l.last, Registered: l.rows,
				Rows: l.haveRows, Lines: l.haveRows, Outside: outside, SumDiffers: l.sum != l.lineSum,
				RejectsRegistered: l.rejected, Rejects: l.rejects})
		}
	}
	ingest.MarkLater(all, d.Bad)
	if len(d.Orphans) == 0 {
		return d, nil
	}
	// Rows without an entry are a killed load's only when no live loader claims their id,
	// and when they are still without one: a chunk writes its entry, then drops its
	// claim, so the claims are read first, then the registry again.
	claims, err := c.claims(ctx)
	if err != nil {
		return d, err
	}
	now := map[int64]bool{}
	rows, err = c.Conn.Query(ctx, "SELECT toInt64(file_id) FROM "+c.Table("files"))
	if err != nil {
		return d, fmt.Errorf("read the registry: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return d, err
		}
		now[id] = true
	}
	rows.Close()
	dead := d.Orphans[:0]
	for _, o := range d.Orphans {
		if !claims[o.ID] && !now[o.ID] {
			dead = append(dead, o)
		}
	}
	d.Orphans = dead
	return d, nil
}

// RepairCluster deletes what d names, as Repair does: on every shard the rows of those
// load ids, then their rejects and registry entries. ClickHouse deletes by mutation; it
// waits for each to finish (at most 5 minutes), registry last, so that a repair killed
// half way is found again by the next check. It returns how many rows it deleted.
func RepairCluster(ctx context.Context, c *Cluster, d ingest.Damage) (int64, error) {
	ids := d.IDs()
	if len(ids) == 0 {
		return 0, nil
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = fmt.Sprint(id)
	}
	in := "(" + strings.Join(list, ", ") + ")"
	var deleted uint64
	if err := c.Conn.QueryRow(ctx, "SELECT count() FROM "+c.Table("requests")+" WHERE file_id IN "+in).Scan(&deleted); err != nil {
		return 0, err
	}
	for i, s := range c.Shards {
		if err := mutate(ctx, s, c.DB, "requests_local", "file_id IN "+in); err != nil {
			return 0, fmt.Errorf("repair shard %d: %w", i+1, err)
		}
	}
	for _, t := range []string{"reject_counts", "rejects", "files"} {
		if err := mutate(ctx, c.Conn, c.DB, t, "file_id IN "+in); err != nil {
			return 0, fmt.Errorf("repair %s: %w", t, err)
		}
	}
	for _, id := range ids { // a dead loader's claims
		c.dropClaim(ctx, id)
	}
	return int64(deleted), nil
}

// mutate deletes the rows of db.table where cond holds, and waits until the mutation is
// done.
func mutate(ctx context.Context, conn driver.Conn, db, table, cond string) error {
	if err := conn.Exec(ctx, "ALTER TABLE "+db+"."+table+" DELETE WHERE "+cond); err != nil {
		return err
	}
	for range 3000 {
		var pending uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0", db, table).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the delete from %s.%s did not finish within 5 minutes", db, table)
}
