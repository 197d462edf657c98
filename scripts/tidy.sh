#!/usr/bin/env bash
# Run clang-tidy (.clang-tidy) over the library's sources, src/, with every
# enabled check an error; the headers of src/ and include/ are checked as
# the sources include them (HeaderFilterRegex).
#
# Usage: scripts/tidy.sh [FILE...]   (default: every .c file under src/)
#
# It configures a build directory of its own for its compile commands only
# (nothing is built), and keeps one command per source: the core is
# compiled twice, shared and static, and clang-tidy 14 given both would
# check each file twice, the second time with its va_list checker
# reporting every va_start()ed list as uninitialised.
#
# Environment: BUILD_DIR (default build-tidy), CLANG_TIDY (default
# clang-tidy, version 14 as Debian 12 has it), JOBS (default: the cores).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build-tidy}
tidy=${CLANG_TIDY:-clang-tidy}
jobs=${JOBS:-$(nproc)}

# Findings that wait for the owner of their file: the check named is off
# for that file alone, every other check stays on there. An entry goes once
# its finding is fixed.
declare -A waiting=(
  # An else-if chain whose first and fourth branches give the same answer
  # for different reasons; merging them would hide the order they rely on.
  [src/host.c]=-bugprone-branch-clone
  # The analyzer loses a resource's kind across calls under the lock and
  # passes m->devs as NULL to dev_snapshot().
  [src/stats.c]=-clang-analyzer-core.NonNullParamChecker
  # The analyzer does not follow the variadic lex_fail() and takes its
  # result for 1, then reads an item lex_next() never filled.
  [src/text/spec.c]=-clang-analyzer-core.UndefinedBinaryOperatorResult
)

CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build_dir" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCRONOQ_BUILD_TESTS=OFF \
  -DCRONOQ_BUILD_BENCH=OFF -DCRONOQ_BUILD_EXAMPLES=OFF -DCRONOQ_INSTALL=OFF \
  >/dev/null

# One compile command per file, the first one found.
mkdir -p "$build_dir/tidy"
/usr/bin/python3 - "$build_dir/compile_commands.json" \
  "$build_dir/tidy/compile_commands.json" <<'PY'
import json, sys
seen, out = set(), []
for entry in json.load(open(sys.argv[1])):
    if entry["file"] not in seen:
        seen.add(entry["file"])
        out.append(entry)
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find src -name '*.c' | sort)
fi
for f in $(printf '%s\n' "${!waiting[@]}" | sort); do
  echo "tidy: $f without ${waiting[$f]#-} (a finding for its owner)"
done

# One line per file: the file, then the checks it waits on (or "-").
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for f in "${files[@]}"; do
  printf '%s %s\n' "$f" "${waiting[$f]:--}"
done | xargs -L 1 -P "$jobs" sh -c '
  tidy=$1 dir=$2 file=$3 checks=$4
  if [ "$checks" = - ]; then
    exec "$tidy" -p "$dir" --quiet -warnings-as-errors="*" "$file"
  fi
  exec "$tidy" -p "$dir" --quiet -warnings-as-errors="*" \
    --checks="$checks" "$file"' sh "$tidy" "$build_dir/tidy" \
  >"$log" 2>&1 || status=$?
# "N warnings generated." counts the suppressed ones too: noise.
grep -v -E '^[0-9]+ (warnings?|errors?)( and [0-9]+ errors?)? generated\.$' \
  "$log" || true
if [ "$status" -ne 0 ]; then
  echo "tidy: clang-tidy reported findings (above)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} files clean"
