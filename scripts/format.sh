#!/usr/bin/env bash
# Format the project's C and C++ sources and headers with clang-format
# (.clang-format), or with --check only list the files that differ.
#
# Usage: scripts/format.sh [--check] [FILE...]
#
#   --check   change nothing; print each file that clang-format would
#             change and exit 1 if there is one
#   FILE      only these (default: every .c, .h and .cpp file git knows
#             of, committed or not yet added, under src, include, tests,
#             fuzz, bench, tools, examples and bindings; ignored files,
#             build directories among them, are left out)
#
# The version is clang-format 14, as Debian 12 has it (another version can
# format the same file differently); CLANG_FORMAT names another binary.
set -euo pipefail
cd "$(dirname "$0")/.."

fmt=${CLANG_FORMAT:-clang-format}
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
    src include tests fuzz bench tools examples bindings |
    grep -E '\.(c|h|cpp)$' | sort -u)
fi
[ ${#files[@]} -gt 0 ] || exit 0

if [ $check = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$fmt" -i --style=file
  exit 0
fi
differ=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue # deleted in the work tree, not yet in the index
  if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then
    echo "$f"
    differ=1
  fi
done
if [ $differ = 1 ]; then
  echo "format: the files above differ from clang-format's output;" \
    "scripts/format.sh formats them" >&2
  exit 1
fi
echo "format: ${#files[@]} files as clang-format writes them"
