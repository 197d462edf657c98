#!/usr/bin/env bash
# The main job: install what is missing, build in Release (cronoq-bench, and
# the simulator's own command build-release/tools/sim/cronoq-sim), run the bench.
# Arguments go to cronoq-bench (e.g. --quick, --full, --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCRONOQ_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j "$(nproc)" --target cronoq-bench cronoq-sim >/dev/null
exec build-release/bench/cronoq-bench "$@"
