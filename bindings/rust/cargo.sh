#!/bin/sh
# Runs Debian's cargo on the Rust binding against a libcronoq built by CMake.
#
#   bindings/rust/cargo.sh BUILD_DIR test
#   bindings/rust/cargo.sh BUILD_DIR run --release --example bench -- --quick
#
# BUILD_DIR holds libcronoq.a (the top of a CMake build tree, such as
# build/); cargo's output goes to BUILD_DIR/bindings/rust/target and its home
# to BUILD_DIR/bindings/rust/cargo-home, so nothing is written to the source
# tree or to ~/.cargo. Always offline and with the committed Cargo.lock.
#
# cargo is $CRONOQ_CARGO, by default /usr/bin/cargo (rustc 1.63, as in CI),
# never the first cargo on PATH. When it is missing this exits 77 (ctest's
# skip code) with a message, unless CRONOQ_REQUIRE_RUST=1 (CI), where it
# fails.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR CARGO_COMMAND [ARGS...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
. "$here/toolchain.sh"
cargo=${CRONOQ_CARGO:-/usr/bin/cargo}
need_cargo "$cargo"
command=$1
shift
export CARGO_HOME="$build/bindings/rust/cargo-home"
export CARGO_TERM_COLOR=never
export CRONOQ_LIB_DIR="$build"
export CRONOQ_INCLUDE_DIR="$here/../../include"
exec "$cargo" "$command" --offline --locked \
  --manifest-path "$here/Cargo.toml" --target-dir "$build/bindings/rust/target" "$@"
