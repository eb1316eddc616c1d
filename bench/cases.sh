# Sourced by bench/report.sh and bench/cluster.sh: the reports of the generated 10M-line
# log both time, and the median and spread of a column of numbers.
cases="table json hour-table hour-json"
args() {
  case $1 in
    table) echo "--format table" ;;
    json) echo "--format json" ;;
    hour-table) echo "--format table --since 2026-11-29T12:00:00Z --until 2026-11-29T13:00:00Z" ;;
    hour-json) echo "--format json --since 2026-11-29T12:00:00Z --until 2026-11-29T13:00:00Z" ;;
  esac
}
stats() { sort -n | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
