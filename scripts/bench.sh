#!/usr/bin/env bash
# The main job: install what is missing, build in Release (cronoq-bench, and
# the simulator's own command build-release/tools/sim/cronoq-sim), run the bench.
# Arguments go to cronoq-bench (e.g. --quick, --full, --json out.json).
#
# Exit status: cronoq-bench's. It is 0 when the bench ran and every result
# it checked was right, whatever its goals: a goal it missed is a figure,
# marked MISSED and counted in the summary it ends with, not a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

say() { printf 'bench.sh: %s\n' "$*"; }

# The build's progress on one line on a terminal, its last percentage
# otherwise; its whole output only when it fails.
progress() {
  local line pct=""
  while IFS= read -r line; do
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=${BASH_REMATCH[1]}
      if [ -t 1 ]; then printf '\r  built %3s%%' "$pct"; fi
    fi
  done
  if [ -t 1 ]; then printf '\n'; elif [ -n "$pct" ]; then say "built ${pct}%"; fi
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
say "configuring a Release build in build-release"
if ! cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release \
  -DCRONOQ_BUILD_TESTS=OFF >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
say "building cronoq-bench and cronoq-sim (a minute or two the first time)"
if ! cmake --build build-release -j "$(nproc)" --target cronoq-bench \
  cronoq-sim 2>&1 | tee "$log" | progress; then
  cat "$log"
  exit 1
fi
say "running: cronoq-bench $*"
exec build-release/bench/cronoq-bench "$@"
