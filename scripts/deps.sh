#!/usr/bin/env bash
# Installs the Debian packages libcronoq builds with, if any are missing.
# Usage: scripts/deps.sh [extra packages...]
set -euo pipefail
packages=(build-essential cmake pkg-config libcmocka-dev libuv1-dev "$@")
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
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends "${missing[@]}"
