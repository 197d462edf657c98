#!/bin/sh
# The tokio example (examples-tokio/) runs as its README-style comment
# says: `cargo run` in its directory, offline, with tokio from Debian's
# packages, against a redis-server that this script starts (a temporary
# directory, a Unix socket, no TCP port) and stops by its PID.
#
#   bindings/rust/check-tokio.sh BUILD_DIR
#
# Skips (77, or fails under CRONOQ_REQUIRE_RUST=1) with a message where
# cargo, a crate of the example's Cargo.lock (apt-get install
# librust-tokio-dev), the build's fleet library or redis-server is
# missing. cargo's output goes under BUILD_DIR/bindings/rust.
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
example=$here/examples-tokio
. "$here/toolchain.sh"
cargo=${CRONOQ_CARGO:-/usr/bin/cargo}
need_cargo "$cargo"
registry=/usr/share/cargo/registry
# Each crate that the lock file takes from crates.io must be in Debian's
# registry, at the locked version.
missing=$(awk -v reg="$registry" '
  /^name = / { gsub(/"/, "", $3); name = $3 }
  /^version = / { gsub(/"/, "", $3); version = $3 }
  /^source = "registry/ { cmd = "test -d " reg "/" name "-" version
                          if (system(cmd) != 0) printf "%s-%s ", name, version }
' "$example/Cargo.lock")
if [ -n "$missing" ]; then
  skip "not in $registry: ${missing}(apt-get install librust-tokio-dev; the lock file is Debian 12's)"
fi
if [ ! -e "$build/src/fleet/libcronoq_fleet.a" ]; then
  skip "$build has no libcronoq_fleet.a (fleet pools need hiredis: apt-get install libhiredis-dev)"
fi
if ! command -v redis-server >/dev/null 2>&1; then
  skip "redis-server not found (apt-get install redis-server)"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/cronoq-tokio.XXXXXX")
redis-server --port 0 --unixsocket "$dir/redis.sock" --save "" --appendonly no \
  --maxmemory-policy noeviction --loglevel warning --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
tries=0
while [ ! -S "$dir/redis.sock" ]; do
  tries=$((tries + 1))
  if [ $tries -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
    cat "$dir/redis.log"
    echo "FAIL: redis-server did not start" >&2
    exit 1
  fi
  sleep 0.1
done

cd "$example"
export CARGO_HOME="$build/bindings/rust/cargo-home"
export CARGO_TERM_COLOR=never
export CRONOQ_LIB_DIR="$build"
export CRONOQ_INCLUDE_DIR="$here/../../include"
jobs=24
echo "\$ cargo run --offline -- unix://$dir/redis.sock tokio-example $jobs new"
if ! "$cargo" run --offline --locked --target-dir "$build/bindings/rust/target-tokio" \
  -- "unix://$dir/redis.sock" tokio-example $jobs new >"$dir/run.log" 2>&1; then
  cat "$dir/run.log"
  echo "FAIL: the tokio example failed" >&2
  exit 1
fi
cat "$dir/run.log"
if grep -n 'warning' "$dir/run.log"; then
  echo "FAIL: the example's build printed warnings" >&2
  exit 1
fi
grep -q "^$jobs jobs done by 4 tasks sharing one pool; at most [12] of 2 seats" "$dir/run.log" \
  || { echo "FAIL: no summary of $jobs jobs" >&2; exit 1; }
grep -q "leases lost: 0$" "$dir/run.log" || { echo "FAIL: leases were lost" >&2; exit 1; }
echo "ok: a tokio service shares one fleet pool"
