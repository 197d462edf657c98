# shellcheck shell=sh
# Sourced by the Rust binding's test scripts (cargo.sh, check-*.sh): how a
# check that cannot run says so. ctest counts exit 77 as a skip; CI sets
# CRONOQ_REQUIRE_RUST=1, where a skip is a failure.

# skip MESSAGE: exit 77 with "SKIP: MESSAGE", or fail under
# CRONOQ_REQUIRE_RUST=1.
skip() {
  if [ "${CRONOQ_REQUIRE_RUST:-0}" = 1 ]; then
    echo "FAIL: $1 (CRONOQ_REQUIRE_RUST=1)" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}

# need_cargo CARGO: skip unless CARGO and the rustc beside it exist; then
# RUSTC and RUSTDOC name the tools beside it, so that a cargo never runs
# another toolchain's rustc or rustdoc found on the PATH (whose metadata
# it cannot read).
need_cargo() {
  if [ ! -x "$1" ] || [ ! -x "$(dirname "$1")/rustc" ]; then
    skip "$1 or rustc beside it not found (apt-get install cargo rustc)"
  fi
  RUSTC="$(dirname "$1")/rustc"
  RUSTDOC="$(dirname "$1")/rustdoc"
  export RUSTC RUSTDOC
}
