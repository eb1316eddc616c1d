#!/usr/bin/env bash
# Times, in one run, reading a 1M-line retry-format log (cat, wc -l: the baselines) and
# retrylens ingest into a fresh DuckDB file, and prints each as lines/s and as a ratio
# to cat. Absolute times on a shared machine mean little; the ratios are the figure.
#
#   bash bench/ingest.sh [LINES]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/retrylens" ./cmd/retrylens
go run ./bench/genlog -n "$n" > "$dir/access.log"
echo "input: $n lines, $(du -h "$dir/access.log" | cut -f1)"

secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); awk -v d=$((e - s)) 'BEGIN { printf "%.3f", d / 1e9 }'; }
cat "$dir/access.log" > /dev/null # warm the page cache
t_cat=$(secs cat "$dir/access.log")
t_wc=$(secs wc -l "$dir/access.log")
t_ingest=$(secs "$dir/retrylens" ingest --quiet --db "$dir/bench.duckdb" "$dir/access.log")
rows=$("$dir/retrylens" report --db "$dir/bench.duckdb" --format json | grep -m1 '"requests"' | tr -dc 0-9)
[ "$rows" = "$n" ] || { echo "ingest loaded $rows rows, want $n" >&2; exit 1; }
printf '%-18s %8s s %12s lines/s %10s x cat\n' command time rate ratio
for k in cat wc ingest; do
  v=t_$k
  t=${!v}
  printf '%-18s %8s s %12.0f lines/s %10.1f x cat\n' "$k" "$t" "$(awk -v a="$n" -v b="$t" 'BEGIN { print a / b }')" "$(awk -v a="$t" -v b="$t_cat" 'BEGIN { print a / b }')"
done
