#!/bin/sh
# The runner against GNU parallel and xargs -P: N short jobs (`true`, each
# through /bin/sh -c, as all three run them) at the same concurrency, in
# the same run, timed with date(1); each tool runs REPS times, interleaved,
# and the median counts.
#
#   tools/runner/bench.sh [-n N] [-j J] [-r REPS] [--runner PATH]
#
# Defaults: 3000 jobs, -j 2, 5 repetitions, build/tools/runner/cronoq-run.
# It checks its results: every tool must exit 0, and the runner's JSON
# summary must count N jobs, all ok. GNU parallel and xargs are skipped
# when missing. It prints a Markdown table for bench/README.md.
set -eu

n=3000
j=2
reps=5
runner=build/tools/runner/cronoq-run
while [ $# -gt 0 ]; do
  case $1 in
  -n) n=$2; shift 2 ;;
  -j) j=$2; shift 2 ;;
  -r) reps=$2; shift 2 ;;
  --runner) runner=$2; shift 2 ;;
  *) echo "usage: $0 [-n N] [-j J] [-r REPS] [--runner PATH]" >&2; exit 2 ;;
  esac
done
[ -x "$runner" ] || { echo "no runner at $runner (build it first)" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/cronoq-run-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
seq "$n" >"$dir/args"

now() { date +%s.%N; }

# run TOOL: one timed run, its seconds appended to $dir/TOOL.
run() {
  case $1 in
  cronoq-run)
    start=$(now)
    "$runner" -j "$j" --no-progress --summary none --json "$dir/doc.json" \
      true {} :::: "$dir/args" >/dev/null
    end=$(now)
    grep -q "\"total\":$n,\"ok\":$n," "$dir/doc.json" ||
      { echo "cronoq-run did not run $n jobs, all ok" >&2; exit 1; }
    ;;
  parallel)
    start=$(now)
    parallel --will-cite -j "$j" true <"$dir/args" >/dev/null
    end=$(now)
    ;;
  xargs)
    start=$(now)
    xargs -P "$j" -n 1 sh -c 'true "$0"' <"$dir/args" >/dev/null
    end=$(now)
    ;;
  esac
  awk -v a="$end" -v b="$start" 'BEGIN { printf "%.6f\n", a - b }' >>"$dir/$1"
}

tools=cronoq-run
command -v parallel >/dev/null 2>&1 && tools="$tools parallel"
command -v xargs >/dev/null 2>&1 && tools="$tools xargs"
for i in $(seq "$reps"); do
  for t in $tools; do
    run "$t"
  done
done

# median FILE, min, max of the seconds in FILE.
stat() { sort -n "$1" | awk '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "%.2f %.2f %.2f", m, v[1], v[NR] }'; }

base=$(stat "$dir/cronoq-run" | cut -d' ' -f1)
echo "$n jobs (\`true\` through /bin/sh -c), -j $j, median of $reps runs, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
echo
echo "| tool | median s | min s | max s | jobs/s | time / cronoq-run's |"
echo "|---|---|---|---|---|---|"
for t in $tools; do
  set -- $(stat "$dir/$t")
  echo "$t $1 $2 $3" | awk -v n="$n" -v base="$base" '{
    printf "| %s | %.2f | %.2f | %.2f | %.0f | %.2f |\n",
      $1, $2, $3, $4, n / $2, $2 / base }'
done
