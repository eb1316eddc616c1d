#!/usr/bin/env bash
# Reports of the generated 10M-line log (bench/genlog --seed 7: 100K routes), against an
# earlier retrylens. It ingests the log with each binary into a database of its own (in a
# kept one this loads nothing and brings the cache, and the answers stored for whole
# reports, up to date for that binary), then runs, in each round and interleaved: the whole report as a table (top 10 endpoints),
# the whole report as JSON (every endpoint), and one hour (12:00-13:00) as a table and as
# JSON, each with this tree's binary and BASE's. It prints per case the median and the
# spread (min-max) of the wall time and the peak RSS (GNU time), and whether both
# binaries wrote the same bytes (the JSON's generated_at aside).
#
#   BASE=02a9724 bash bench/report.sh [ROUNDS]      # default 3 rounds
#   KEEP=/tmp/rl-bench bash bench/report.sh          # keep (and reuse) the log and databases there
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cases.sh
. bench/cases.sh
# shellcheck source=bench/base.sh
. bench/base.sh
rounds=${1:-3}
[ -x /usr/bin/time ] || { echo "bench: needs GNU time (apt-get install time)" >&2; exit 1; }
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
cleanup() {
  remove_base
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/new" ./cmd/retrylens
bins="new"
if [ -n "${BASE:-}" ]; then
  build_base
  bins="new base"
fi
[ -s "$dir/10m.log" ] || go run ./bench/genlog --lines 10000000 --seed 7 > "$dir/10m.log"
for b in $bins; do
  /usr/bin/time -f "$b ingest: %e s, peak %M KiB" "$dir/$b" ingest --quiet --db "$dir/$b.duckdb" "$dir/10m.log"
done
echo "10M lines (genlog --seed 7), $rounds rounds${BASE:+, base $BASE}; $(nproc) cores, $(date -u +%F), $(git rev-parse --short HEAD)"

for r in $(seq "$rounds"); do
  for c in $cases; do
    for b in $bins; do
      # shellcheck disable=SC2046
      /usr/bin/time -f "%e %M" -o "$dir/t" "$dir/$b" report --db "$dir/$b.duckdb" $(args "$c") > "$dir/$b.$c.out"
      cat "$dir/t" >> "$dir/$b.$c.times"
    done
  done
done
printf "%-11s %-6s %-22s %-28s %s\n" case binary "wall s, median (range)" "peak MiB, median (range)" output
for c in $cases; do
  for b in $bins; do
    same=""
    if [ "$b" = base ]; then
      if cmp -s <(grep -v '"generated_at"' "$dir/new.$c.out") <(grep -v '"generated_at"' "$dir/base.$c.out"); then same="same as new"; else same="DIFFERS"; fi
    fi
    printf "%-11s %-6s %-22s %-28s %s\n" "$c" "$b" "$(cut -d' ' -f1 "$dir/$b.$c.times" | stats)" \
      "$(awk '{ print int($2 / 1024) }' "$dir/$b.$c.times" | stats)" "$same"
  done
done
rm -f "$dir"/*.times
