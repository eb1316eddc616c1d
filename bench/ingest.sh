#!/usr/bin/env bash
# Times, in one run on one generated log of the retry format: cat (the floor), GoAccess
# (Debian's package, the matching --log-format, JSON output) and retrylens ingest into a
# fresh DuckDB file; prints lines/s, each time as a ratio to cat, retrylens's speed as a
# ratio to GoAccess's, and peak memory (GNU time). Then it splits retrylens's time into the
# load and the report cache ingest builds after it, and measures the floor under any
# load into DuckDB here: DuckDB itself copying the same rows, already parsed and in
# memory, into a fresh file (ingest's BenchmarkLoad1M/duckdb-copy). Absolute times on a
# shared machine mean little; the ratios are the figures.
#
#   bash bench/ingest.sh [LINES]        # default 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
if ! command -v goaccess >/dev/null || [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq goaccess time >/dev/null
  else
    echo "bench: needs goaccess and GNU time (apt-get install goaccess time)" >&2
    exit 1
  fi
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/retrylens" ./cmd/retrylens
go run ./bench/genlog --lines "$n" --seed 1 --format retry > "$dir/access.log"
echo "input: $n lines, $(du -h "$dir/access.log" | cut -f1), retry format (bench/genlog --seed 1)"
cat "$dir/access.log" > /dev/null # warm the page cache

# run NAME CMD...: seconds and peak RSS (KiB) of one run.
run() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$dir/$name.time" "$@" > /dev/null 2> "$dir/$name.err" || { cat "$dir/$name.err" >&2; exit 1; }
  read -r secs kib < "$dir/$name.time"
  eval "t_$name=$secs m_$name=$kib"
}
run cat cat "$dir/access.log"
run goaccess goaccess "$dir/access.log" --log-format='%h %^[%d:%t %^] "%r" %s %b "%R" "%u" %^' \
  --date-format=%d/%b/%Y --time-format=%T --no-global-config -o "$dir/goaccess.json"
run retrylens "$dir/retrylens" ingest --db "$dir/bench.duckdb" --log-format retry "$dir/access.log"

"$dir/retrylens" report --db "$dir/bench.duckdb" --format json -o "$dir/report.json"
rows=$(grep -m1 '"requests"' "$dir/report.json" | tr -dc 0-9)
[ "$rows" = "$n" ] || { echo "bench: ingest loaded $rows rows, want $n" >&2; exit 1; }
printf '%-10s %9s %14s %10s %12s\n' command seconds lines/s "x cat" "peak MiB"
for k in cat goaccess retrylens; do
  t=t_$k m=m_$k
  awk -v name="$k" -v t="${!t}" -v n="$n" -v c="$t_cat" -v m="${!m}" \
    'BEGIN { if (t == 0) t = 0.01; if (c == 0) c = 0.01; printf "%-10s %9.2f %14.0f %10.1f %12.1f\n", name, t, n / t, t / c, m / 1024 }'
done
awk -v g="$t_goaccess" -v r="$t_retrylens" 'BEGIN { printf "retrylens/GoAccess speed: %.2fx\n", g / r }'

# The load and the cache, as ingest reported them: "loaded … in 4.1s (…)" (a Go duration:
# also 937ms or 1m2.345s), "Report cache rebuilt in 1.5s."
load=$(sed -n 's/^loaded .* in \([0-9hms.]*\) (.*/\1/p' "$dir/retrylens.err" | awk '{
  s = 0; d = $0
  while (match(d, /^[0-9.]+(h|ms|m|s)/)) {
    v = substr(d, RSTART, RLENGTH); d = substr(d, RLENGTH + 1)
    u = v; sub(/^[0-9.]+/, "", u); v += 0
    s += (u == "h") ? v * 3600 : (u == "m") ? v * 60 : (u == "ms") ? v / 1000 : v
  }
  print s }')
cache=$(sed -n 's/^Report cache .* in \([0-9.]*\)s\./\1/p' "$dir/retrylens.err")
if [ -z "$load" ] || [ -z "$cache" ]; then
  echo "bench: could not read the load and cache times from retrylens's summary:" >&2
  cat "$dir/retrylens.err" >&2
  exit 1
fi
RETRYLENS_BENCH_LOG="$dir/access.log" go test ./ingest -run '^$' -bench 'Load1M/duckdb-copy$' -benchtime 1x > "$dir/floor.txt"
floor=$(awk '/duckdb-copy-/ { for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i }' "$dir/floor.txt")
awk -v n="$n" -v l="$load" -v c="$cache" -v f="$floor" 'BEGIN {
  printf "retrylens load %.2f s (%.0f lines/s) + report cache %.2f s\n", l, n / l, c
  printf "floor: DuckDB copying the same rows from memory into a fresh file, %.0f rows/s (%.2f s)\n", f, n / f
  printf "retrylens load / floor: %.0f %%\n", 100 * (n / l) / f
}'
