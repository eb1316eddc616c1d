#!/usr/bin/env bash
# The whole job a user runs, against earlier commits, interleaved: ingest of a generated
# log into a fresh DuckDB file, the first reports (the whole table, one hour as a table,
# the whole JSON), and the appends: the log's last 1 % onto a database holding the rest,
# and its last 200 lines onto one holding all but those. The databases the appends start
# from are loaded once per build and copied each round, so that every round appends to the
# same state. Prints per build the median (min-max) of each step's wall seconds and peak
# memory, and each append as a share of that build's whole ingest.
#
#   BASE="6a09c38 02a9724" bash bench/append.sh [LINES [ROUNDS]]   # default 1000000, 3
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
rounds=${2:-3}
dir=$(mktemp -d)
worktrees=()
cleanup() {
  for w in "${worktrees[@]}"; do git worktree remove --force "$w" >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
builds="new"
go build -o "$dir/new" ./cmd/retrylens
for b in ${BASE:-}; do
  git worktree add --detach "$dir/src-$b" "$b" >/dev/null 2>&1
  worktrees+=("$dir/src-$b")
  (cd "$dir/src-$b" && go build -o "$dir/$b" ./cmd/retrylens)
  builds="$builds $b"
done
seed=1
[ "$n" -ge 10000000 ] && seed=7
go run ./bench/genlog --lines "$n" --seed "$seed" --format retry > "$dir/access.log"
tail1=$((n / 100))
head -n $((n - tail1)) "$dir/access.log" > "$dir/h1.log"
tail -n "$tail1" "$dir/access.log" > "$dir/t1.log"
head -n $((n - 200)) "$dir/access.log" > "$dir/h200.log"
tail -n 200 "$dir/access.log" > "$dir/t200.log"
# the log's second hour, on whole minutes
first=$(head -c 300 "$dir/access.log" | sed -n 's/.*\[\([^]]*\)\].*/\1/p' | head -1)
since=$(date -u -d "$(echo "$first" | sed 's#/# #g; s#:# #') + 1 hour" '+%Y-%m-%d %H:00' 2>/dev/null || echo "")
echo "input: $n lines (bench/genlog --seed $seed); builds: $builds; $rounds rounds"
for b in $builds; do
  "$dir/$b" ingest --db "$dir/$b-h1.duckdb" "$dir/h1.log" > /dev/null 2>&1
  "$dir/$b" ingest --db "$dir/$b-h200.duckdb" "$dir/h200.log" > /dev/null 2>&1
done
# run NAME STEP CMD...: appends "seconds peak-KiB" to $dir/NAME.STEP
run() {
  local name=$1 step=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$dir/t" "$@" > "$dir/out" 2> "$dir/err" || { cat "$dir/err" >&2; exit 1; }
  cat "$dir/t" >> "$dir/$name.$step"
}
for r in $(seq "$rounds"); do
  for b in $builds; do
    rm -f "$dir/whole.duckdb"
    run "$b" ingest "$dir/$b" ingest --db "$dir/whole.duckdb" "$dir/access.log"
    run "$b" table "$dir/$b" report --db "$dir/whole.duckdb"
    if [ -n "$since" ]; then
      until=$(date -u -d "$since UTC + 1 hour" '+%Y-%m-%d %H:%M')
      run "$b" hour "$dir/$b" report --db "$dir/whole.duckdb" --since "$since" --until "$until"
    fi
    run "$b" json "$dir/$b" report --db "$dir/whole.duckdb" --format json
    cp "$dir/$b-h1.duckdb" "$dir/a.duckdb"
    run "$b" append1 "$dir/$b" ingest --db "$dir/a.duckdb" "$dir/t1.log"
    cp "$dir/$b-h200.duckdb" "$dir/a.duckdb"
    run "$b" append200 "$dir/$b" ingest --db "$dir/a.duckdb" "$dir/t200.log"
  done
done
# spread FILE COL: the median (min-max) of column COL
spread() { sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { printf "%.2f (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
med() { sort -n -k1 "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-10s %-22s %-22s %-22s %-22s %-28s %-28s %s\n' build ingest table hour json "append 1%" "append 200" "peak MiB (ingest, 1%)"
for b in $builds; do
  whole=$(med "$dir/$b.ingest")
  share() { awk -v a="$(med "$dir/$b.$1")" -v w="$whole" 'BEGIN { printf "%.0f %%", 100 * a / w }'; }
  peak() { sort -n -k2 "$dir/$b.$1" | awk '{ v[NR] = $2 } END { printf "%.0f", v[int((NR + 1) / 2)] / 1024 }'; }
  printf '%-10s %-22s %-22s %-22s %-22s %-28s %-28s %s\n' "$b" "$(spread "$dir/$b.ingest" 1)" "$(spread "$dir/$b.table" 1)" \
    "$([ -f "$dir/$b.hour" ] && spread "$dir/$b.hour" 1)" "$(spread "$dir/$b.json" 1)" \
    "$(spread "$dir/$b.append1" 1), $(share append1)" "$(spread "$dir/$b.append200" 1), $(share append200)" "$(peak ingest), $(peak append1)"
done
