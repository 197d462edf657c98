#!/usr/bin/env bash
# Installs the Debian packages that libcronoq and every documented part of
# it need, if any are missing: the build, the tests (cmocka), the libuv
# adapter and cronoq-run (libuv), fleet pools (hiredis, and redis-server for
# their tests and examples), the Python binding and its tests (python3,
# pytest, venv, prometheus-client for the metrics test), the Rust binding
# (Debian's cargo and rustc, and tokio for its service example) and GNU
# parallel (cronoq-run's tests compare with it). Run by scripts/bench.sh and scripts/test.sh.
# Usage: scripts/deps.sh [extra packages...]
set -euo pipefail
packages=(build-essential cmake pkg-config libcmocka-dev libuv1-dev
  libhiredis-dev redis-server python3 python3-pytest python3-venv
  python3-prometheus-client cargo rustc librust-tokio-dev parallel "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends "${missing[@]}"
