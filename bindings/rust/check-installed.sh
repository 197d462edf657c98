#!/bin/sh
# A program built against the INSTALLED library runs: installs the CMake
# build into a scratch prefix, then does what a user does there, with
# nothing of the build tree in sight. A project of its own (a path
# dependency on the crate, examples/linked.rs as its main.rs) is built with
# PKG_CONFIG_PATH naming the prefix and run:
#   - by default it links libcronoq.a (and libcronoq_fleet.a where the
#     prefix has it) statically, builds without a warning, and runs;
#   - with CRONOQ_LINK=shared the build warns that the program needs
#     LD_LIBRARY_PATH, and with it the program runs.
# The program checks that a fleet pool's library loads where it is linked.
#
#   bindings/rust/check-installed.sh BUILD_DIR
#
# Everything is written under BUILD_DIR/bindings/rust/installed. cargo is
# $CRONOQ_CARGO (default /usr/bin/cargo), offline; skips (77) as cargo.sh.
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/toolchain.sh"
cargo=${CRONOQ_CARGO:-/usr/bin/cargo}
need_cargo "$cargo"
for v in CRONOQ_LIB_DIR CRONOQ_FLEET_LIB_DIR CRONOQ_NO_FLEET CRONOQ_LINK \
  CRONOQ_INCLUDE_DIR PKG_CONFIG_LIBDIR LD_LIBRARY_PATH RUSTFLAGS; do
  unset "$v"
done

fail() {
  echo "FAIL: $1" >&2
  exit 1
}

work=$build/bindings/rust/installed
rm -rf "$work"
mkdir -p "$work/app/src"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" \
  || fail "cmake --install $build failed: $(cat "$work/install.log")"
pc=$(find "$work/prefix" -path '*/pkgconfig/cronoq.pc' | head -n 1)
[ -n "$pc" ] || fail "the install put no cronoq.pc in $work/prefix"
libdir=$(cd "$(dirname "$pc")/.." && pwd -P)
fleet=no
if [ -e "$libdir/libcronoq_fleet.a" ]; then
  fleet=yes
fi
echo "installed in $work/prefix; libdir $libdir; fleet library: $fleet"

# The user's project.
cd "$work/app"
cat >Cargo.toml <<EOF
[package]
name = "app"
version = "0.1.0"
edition = "2021"

[dependencies]
cronoq = { path = "$here/cronoq" }
EOF
cp "$here/cronoq/examples/linked.rs" src/main.rs
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export CARGO_HOME="$work/cargo-home"
export CARGO_TERM_COLOR=never

# run LOG COMMAND...: the command's output, also kept in LOG.
run() {
  log=$1
  shift
  echo "\$ $*"
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    fail "$* failed"
  fi
  cat "$log"
}

# Static, the default.
run build-static.log "$cargo" build --offline
if grep -n 'warning' build-static.log; then
  fail "the build against the installed library printed warnings"
fi
run run-static.log "$cargo" run --offline
grep -qF "linked: static libcronoq.a from $libdir (pkg-config cronoq)" run-static.log \
  || fail "the program did not link the installed libcronoq.a"
if [ $fleet = yes ]; then
  grep -qF "libcronoq_fleet.a from $libdir" run-static.log \
    || fail "the program did not link the installed libcronoq_fleet.a"
  grep -q "fleet pool: linked, no server: ok" run-static.log || fail "no fleet pool"
fi

# Shared, on request: the build says what the program needs to start.
run build-shared.log env CRONOQ_LINK=shared "$cargo" build --offline
grep -qF "LD_LIBRARY_PATH=$libdir" build-shared.log \
  || fail "linking the shared library from $libdir did not warn that it needs LD_LIBRARY_PATH"
run run-shared.log env LD_LIBRARY_PATH="$libdir" CRONOQ_LINK=shared "$cargo" run --offline
grep -qF "linked: dylib libcronoq.so from $libdir (pkg-config cronoq)" run-shared.log \
  || fail "the program did not link the installed libcronoq.so"
echo "ok: a program built against the installed library runs"
