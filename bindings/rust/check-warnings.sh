#!/bin/sh
# The crates build without a warning, on Debian's toolchain (rustc 1.63,
# cargo 1.65: $CRONOQ_CARGO, default /usr/bin/cargo) and on a current one,
# whose rustc checks cfg names (1.80 and later: $CRONOQ_CURRENT_CARGO,
# default rustup's ~/.cargo/bin/cargo; skipped, saying so, where it is
# absent). Every target (libraries, tests, examples) and the
# documentation are built through cargo.sh, so against the same library.
#
#   bindings/rust/check-warnings.sh BUILD_DIR
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/toolchain.sh"
debian=${CRONOQ_CARGO:-/usr/bin/cargo}
need_cargo "$debian"
current=${CRONOQ_CURRENT_CARGO:-${HOME:-/nonexistent}/.cargo/bin/cargo}
log=$build/bindings/rust/warnings.log
mkdir -p "$(dirname "$log")"
status=0
for cargo in "$debian" "$current"; do
  if [ "$cargo" = "$current" ] && { [ ! -x "$cargo" ] || [ ! -x "$(dirname "$cargo")/rustc" ]; }; then
    echo "SKIP (this part): no current toolchain at $cargo (set CRONOQ_CURRENT_CARGO)"
    continue
  fi
  echo "== $("$cargo" --version) with $("$(dirname "$cargo")/rustc" --version)"
  for command in "build --all-targets" "doc --no-deps"; do
    # shellcheck disable=SC2086 # the command is two words on purpose
    if ! CRONOQ_CARGO=$cargo "$here/cargo.sh" "$build" $command >"$log" 2>&1; then
      cat "$log"
      echo "FAIL: cargo $command failed" >&2
      exit 1
    fi
    if grep -n 'warning' "$log"; then
      echo "FAIL: cargo $command printed warnings" >&2
      status=1
    else
      echo "cargo $command: no warnings"
    fi
  done
done
exit $status
