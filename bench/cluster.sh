#!/usr/bin/env bash
# Reports of the generated 10M-line log (bench/genlog --seed 7: 100K routes) on a ClickHouse
# cluster against the same log in a DuckDB file. It starts SHARDS shards (default 2) of
# Debian's clickhouse-server on 127.0.0.1 (bench/chup, stopped when the script ends),
# ingests the log into the cluster and into a file (each timed: wall, peak RSS), then runs,
# in each round and interleaved, the whole report as a table and as JSON and one hour
# (12:00-13:00) as a table and as JSON on both, and prints per case the median and spread
# of the wall time, of the reporting process's CPU time (user and system), the peak RSS, whether the cluster wrote the file's bytes (the JSON's
# generated_at aside), and, from the first server's system.query_log, the bytes the case's
# last cluster report received against what the shards store (both uncompressed).
#
#   bash bench/cluster.sh [ROUNDS]                  # default 2 rounds
#   SHARDS=4 KEEP=/tmp/rl-cluster bash bench/cluster.sh   # keep (and reuse) log, file, shards
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cases.sh
. bench/cases.sh
rounds=${1:-2}
shards=${SHARDS:-2}
[ -x /usr/bin/time ] || { echo "bench: needs GNU time (apt-get install time)" >&2; exit 1; }
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
go build -o "$dir/rl" ./cmd/retrylens
go build -o "$dir/chup" ./bench/chup
[ -s "$dir/10m.log" ] || go run ./bench/genlog --lines 10000000 --seed 7 > "$dir/10m.log"

# The cluster runs while chup's input is open (fd 3).
rm -f "$dir/ch.in" "$dir/ch.url"
mkfifo "$dir/ch.in"
"$dir/chup" -dir "$dir/ch$shards" -shards "$shards" < "$dir/ch.in" > "$dir/ch.url" &
chup=$!
exec 3> "$dir/ch.in"
cleanup() {
  exec 3>&-
  wait "$chup" || true
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 120); do [ -s "$dir/ch.url" ] && break; sleep 1; done
url=$(cat "$dir/ch.url")
[ -n "$url" ] || { echo "bench: the cluster did not start" >&2; exit 1; }

/usr/bin/time -f "cluster ingest ($shards shards): %e s, peak %M KiB" "$dir/rl" ingest --quiet --db "$url" "$dir/10m.log"
/usr/bin/time -f "file ingest: %e s, peak %M KiB" "$dir/rl" ingest --quiet --db "$dir/file.duckdb" "$dir/10m.log"
echo "10M lines (genlog --seed 7), $rounds rounds, $shards shards; $(nproc) cores, $(date -u +%F), $(git rev-parse --short HEAD)"

# every shard's native port, from the cluster's own list; a shard's system tables are read
# through the first server (remote())
ports=$("$dir/rl" query --db "$url" --format tsv "SELECT port FROM system.clusters WHERE cluster = 'retrylens' ORDER BY shard_num" | tail -n +2)
on_shard() { "$dir/rl" query --db "$url" --format tsv "$(echo "$2" | sed "s#system\.\([a-z_]*\)#remote('127.0.0.1:$1', system, \1)#")" | tail -1; }
# bytes the reporter received between two times (what its queries returned, on the first
# server, uncompressed; they carry every shard's part), and the bytes the shards store
received_between() {
  local n
  n=$(on_shard "${ports%%[[:space:]]*}" "SELECT toInt64(sum(result_bytes)) FROM system.query_log WHERE type = 2 AND is_initial_query = 1 AND event_time >= toDateTime($1) AND event_time <= toDateTime($2)")
  echo "${n:-0}"
}
# what the answers and the cache stored at ingest take on the first server
cache=$(on_shard "${ports%%[[:space:]]*}" "SELECT toInt64(sum(data_uncompressed_bytes)) FROM system.parts WHERE active AND database = 'retrylens' AND table LIKE 'cache\\_%'")
echo "stored at ingest for reports (answers and cache, the first server): $((cache / 1048576)) MiB"
stored=0
for p in $ports; do
  n=$(on_shard "$p" "SELECT toInt64(sum(data_uncompressed_bytes)) FROM system.parts WHERE active AND database = 'retrylens' AND table = 'requests_local'")
  stored=$((stored + n))
done

rm -f "$dir"/*.times "$dir"/*.sent "$dir"/*.span
for r in $(seq "$rounds"); do
  for c in $cases; do
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M %U %S" -o "$dir/t" "$dir/rl" report --db "$dir/file.duckdb" $(args "$c") > "$dir/file.$c.out"
    cat "$dir/t" >> "$dir/file.$c.times"
    sleep 1
    start=$(date +%s)
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M %U %S" -o "$dir/t" "$dir/rl" report --db "$url" $(args "$c") > "$dir/cluster.$c.out"
    cat "$dir/t" >> "$dir/cluster.$c.times"
    echo "$start $(($(date +%s) + 1))" > "$dir/cluster.$c.span"
    sleep 1
  done
done
sleep 10 # the servers write their query_log every 7.5 s
for c in $cases; do
  # shellcheck disable=SC2046
  received_between $(cat "$dir/cluster.$c.span") > "$dir/cluster.$c.sent"
done
printf "%-11s %-8s %-20s %-18s %-18s %-14s %s\n" case where "wall s, median (range)" "CPU s (reporter)" "peak MiB" output "received / stored"
for c in $cases; do
  for w in file cluster; do
    wall=$(cut -d' ' -f1 "$dir/$w.$c.times" | stats)
    cpu=$(awk '{ print $3 + $4 }' "$dir/$w.$c.times" | stats)
    peak=$(awk '{ print int($2 / 1024) }' "$dir/$w.$c.times" | stats)
    same="" sent=""
    if [ "$w" = cluster ]; then
      if cmp -s <(grep -v '"generated_at"' "$dir/file.$c.out") <(grep -v '"generated_at"' "$dir/cluster.$c.out"); then
        same="same as file"
      else
        same="DIFFERS"
      fi
      b=$(cat "$dir/cluster.$c.sent")
      sent=$(awk -v b="$b" -v s="$stored" 'BEGIN { printf "%.1f MiB / %.0f MiB (%.2f %%)", b / 1048576, s / 1048576, 100 * b / s }')
    fi
    printf "%-11s %-8s %-20s %-18s %-18s %-14s %s\n" "$c" "$w" "$wall" "$cpu" "$peak" "$same" "$sent"
  done
done
