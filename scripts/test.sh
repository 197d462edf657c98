#!/usr/bin/env bash
# Build with warnings as errors and run every test; then list the tests
# that were skipped, each with its reason (a server or a toolchain that is
# missing: scripts/deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCRONOQ_WERROR=ON >/dev/null
cmake --build build -j "$(nproc)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
ctest --test-dir build --output-on-failure -j "$(nproc)" | tee "$out" ||
  status=$?
# ctest names the skipped tests; each one's reason is the last line it
# printed, kept in ctest's log.
mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$out")
if [ ${#skipped[@]} -gt 0 ]; then
  printf '\nSkipped, and why:\n'
  for t in "${skipped[@]}"; do
    reason=$(awk -v t="$t" '
      $0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" { on = 1; next }
      on && /^Output:/ { getline; out = 1; next }
      on && out && /^<end of output>/ { exit }
      on && out && NF { last = $0 }
      END { print last }' build/Testing/Temporary/LastTest.log)
    printf '  %s: %s\n' "$t" "${reason:-no reason printed}"
  done
fi
exit "$status"
