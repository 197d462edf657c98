#!/bin/sh
# The driver of cronoq-run's tests, run by ctest as runner_<CHECK>:
#
#   sh check.sh path/to/cronoq-run FILE CHECK
#
# FILE is one of the test files beside this one (scheduling.sh, ...), in
# which every function is a test named after the behaviour it checks;
# CMake registers each of them (tools/runner/CMakeLists.txt). The helpers
# are in lib.sh. A test prints "ok: CHECK" and exits 0, or prints why it
# failed and exits 1.
set -u
here=$(dirname "$0")
bin=$1
file=$2
check=$3
if ! grep -q "^$check() {\$" "$here/$file" 2>/dev/null; then
  echo "no test '$check' in $here/$file"
  exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/cronoq-run-test.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
. "$here/lib.sh"
. "$here/$file"
"$check"
echo "ok: $check"
