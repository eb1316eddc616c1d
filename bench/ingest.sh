#!/usr/bin/env bash
# End-to-end ingest against GoAccess, and against an earlier retrylens, on one generated
# log of the retry format (bench/genlog --seed 1). Each round runs, one after the other:
# cat (the floor of reading the file), GoAccess (Debian's package, the matching
# --log-format, JSON output), retrylens ingest into a fresh DuckDB file (the load and the
# report cache it builds: everything a report needs) and, with BASE set, the same for that
# commit, built from a temporary worktree. Rounds interleave the commands, so that a busy
# minute on this shared machine slows all of them; the figures are the medians and the
# spread (min-max) of lines/s, and the ratios of medians. Then it splits retrylens's time
# into the load and the report cache (from ingest's summary lines), prints peak memory and
# CPU time (GNU time), the time to append the log's last 1 % to a database holding the
# rest (as a share of the whole ingest), and measures the floor under any load into DuckDB here: DuckDB
# copying the same rows, parsed and in memory, into a fresh file (BenchmarkLoad1M/duckdb-copy),
# with the CPU time it takes beside the CPU time a 2x speed-up over BASE would allow.
#
#   bash bench/ingest.sh [LINES [ROUNDS]]       # default 1000000 lines, 3 rounds
#   BASE=d251cf8 bash bench/ingest.sh           # and against commit d251cf8
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/base.sh
. bench/base.sh
n=${1:-1000000}
rounds=${2:-3}
if ! command -v goaccess >/dev/null || [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq goaccess time >/dev/null
  else
    echo "bench: needs goaccess and GNU time (apt-get install goaccess time)" >&2
    exit 1
  fi
fi
dir=$(mktemp -d)
cleanup() {
  remove_base
  rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/retrylens" ./cmd/retrylens
cmds="cat goaccess retrylens"
if [ -n "${BASE:-}" ]; then
  build_base
  cmds="$cmds base"
fi
go run ./bench/genlog --lines "$n" --seed 1 --format retry > "$dir/access.log"
echo "input: $n lines, $(du -h "$dir/access.log" | cut -f1), retry format (bench/genlog --seed 1); $rounds rounds${BASE:+; base $BASE}"
cat "$dir/access.log" > /dev/null # warm the page cache
head -n $((n - n / 100)) "$dir/access.log" > "$dir/head.log"
tail -n $((n / 100)) "$dir/access.log" > "$dir/tail.log"

# run NAME CMD...: appends "seconds peak-KiB core-seconds" of one run to $dir/NAME.times.
run() {
  local name=$1; shift
  /usr/bin/time -f "%e %M %U %S" -o "$dir/t" "$@" > /dev/null 2> "$dir/$name.err" || { cat "$dir/$name.err" >&2; exit 1; }
  awk '{ print $1, $2, $3 + $4 }' "$dir/t" >> "$dir/$name.times"
}
# seconds of a Go duration as ingest prints it: 4.1s, 937ms, 1m2.345s.
secs() {
  awk '{ s = 0; d = $0
    while (match(d, /^[0-9.]+(h|ms|m|s)/)) {
      v = substr(d, RSTART, RLENGTH); d = substr(d, RLENGTH + 1)
      u = v; sub(/^[0-9.]+/, "", u); v += 0
      s += (u == "h") ? v * 3600 : (u == "m") ? v * 60 : (u == "ms") ? v / 1000 : v
    }
    print s }'
}
# phases NAME: appends "load-seconds cache-seconds" from ingest's summary ("loaded … in
# 4.1s (…)", "Report cache rebuilt in 1.5s.").
phases() {
  local load cache
  load=$(sed -n 's/^loaded .* in \([0-9hms.]*\) (.*/\1/p' "$dir/$1.err" | secs)
  cache=$(sed -n 's/^Report cache .* in \([0-9.]*\)s\./\1/p' "$dir/$1.err")
  if [ -z "$load" ] || [ -z "$cache" ]; then
    echo "bench: could not read the load and cache times from $1's summary:" >&2
    cat "$dir/$1.err" >&2
    exit 1
  fi
  echo "$load $cache" >> "$dir/$1.split"
}
for r in $(seq "$rounds"); do
  run cat cat "$dir/access.log"
  run goaccess goaccess "$dir/access.log" --log-format='%h %^[%d:%t %^] "%r" %s %b "%R" "%u" %^' \
    --date-format=%d/%b/%Y --time-format=%T --no-global-config -o "$dir/goaccess.json"
  for b in retrylens ${BASE:+base}; do
    rm -f "$dir/$b.duckdb" "$dir/$b.duckdb.wal"
    run "$b" "$dir/$b" ingest --db "$dir/$b.duckdb" --log-format retry "$dir/access.log"
    phases "$b"
    "$dir/$b" report --db "$dir/$b.duckdb" --format json -o "$dir/report.json"
    rows=$(grep -m1 '"requests"' "$dir/report.json" | tr -dc 0-9)
    [ "$rows" = "$n" ] || { echo "bench: $b loaded $rows rows, want $n" >&2; exit 1; }
    # The last 1 % appended to a database holding the rest (loaded untimed): what an
    # ingest of the lines written since the last one costs.
    rm -f "$dir/$b-append.duckdb" "$dir/$b-append.duckdb.wal"
    "$dir/$b" ingest -q --db "$dir/$b-append.duckdb" --log-format retry "$dir/head.log"
    run "$b-append" "$dir/$b" ingest --db "$dir/$b-append.duckdb" --log-format retry "$dir/tail.log"
  done
done

# median and spread of column COL of FILE
stats() {
  sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s %s\n", m, v[1], v[NR] }'
}
printf '%-10s %9s %22s %12s %8s\n' command seconds "lines/s (min-max)" "peak MiB" core-s
for k in $cmds; do
  read -r t lo hi < <(stats "$dir/$k.times" 1)
  read -r m _ _ < <(stats "$dir/$k.times" 2)
  read -r c _ _ < <(stats "$dir/$k.times" 3)
  eval "t_$k=$t"
  awk -v name="$k" -v t="$t" -v lo="$lo" -v hi="$hi" -v n="$n" -v m="$m" -v c="$c" 'BEGIN {
    if (t == 0) t = 0.01; if (lo == 0) lo = 0.01; if (hi == 0) hi = 0.01
    printf "%-10s %9.2f %9.0f (%.0f-%.0f) %12.1f %8.2f\n", name, t, n / t, n / hi, n / lo, m / 1024, c }'
done
awk -v g="$t_goaccess" -v r="$t_retrylens" 'BEGIN { printf "retrylens/GoAccess speed: %.2fx\n", g / r }'
if [ -n "${BASE:-}" ]; then
  awk -v b="$t_base" -v r="$t_retrylens" -v base="$BASE" 'BEGIN { printf "retrylens/%s speed: %.2fx\n", base, b / r }'
fi
for k in retrylens ${BASE:+base}; do
  read -r a alo ahi < <(stats "$dir/$k-append.times" 1)
  eval "w=\$t_$k"
  awk -v name="$k" -v a="$a" -v lo="$alo" -v hi="$ahi" -v w="$w" 'BEGIN {
    printf "%-10s append of the last 1 %%: %.2f s (%s-%s), %.0f %% of the whole ingest\n", name, a, lo, hi, 100 * a / w }'
done
for k in retrylens ${BASE:+base}; do
  read -r l llo lhi < <(stats "$dir/$k.split" 1)
  read -r c clo chi < <(stats "$dir/$k.split" 2)
  printf '%-10s load %.2f s (%s-%s), report cache %.2f s (%s-%s)\n' "$k" "$l" "$llo" "$lhi" "$c" "$clo" "$chi"
done
RETRYLENS_BENCH_LOG="$dir/access.log" go test ./ingest -run '^$' -bench 'Load1M/duckdb-copy$' -benchtime 1x > "$dir/floor.txt"
floor=$(awk '/duckdb-copy-/ { for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i }' "$dir/floor.txt")
floorcpu=$(awk '/duckdb-copy-/ { for (i = 1; i < NF; i++) if ($(i+1) == "core-s") print $i }' "$dir/floor.txt")
read -r l _ _ < <(stats "$dir/retrylens.split" 1)
awk -v n="$n" -v l="$l" -v f="$floor" -v fc="$floorcpu" 'BEGIN {
  printf "floor: DuckDB copying the same rows from memory into a fresh file, %.0f rows/s (%.2f s, %.2f core-s)\n", f, n / f, fc
  printf "retrylens load / floor: %.0f %%\n", 100 * (n / l) / f
}'
# Every command here keeps the machine's cores busy, so CPU time bounds wall time: a
# speed-up of 2x over BASE needs the whole ingest in half BASE's wall time on these cores.
if [ -n "${BASE:-}" ]; then
  awk -v b="$t_base" -v cores="$(nproc)" -v fc="$floorcpu" -v base="$BASE" 'BEGIN {
    printf "2x of %s: %.2f s, at most %.2f core-s on %d cores; the floor alone takes %.2f\n", base, b / 2, cores * b / 2, cores, fc }'
fi
