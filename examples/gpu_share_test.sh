#!/bin/sh
# gpu_share on two fake GPUs: four copies at 0.5 run at once, two per
# device, and each copy sees exactly one device in CUDA_VISIBLE_DEVICES.
set -eu
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each copy announces itself and waits until all four hold their share, so
# the shares are held at the same time.
out=$(CRONOQ_NUM_GPUS=2 "$bin" 0.5 4 sh -c '
  touch "$0/$$"
  while [ "$(ls "$0" | wc -l)" -lt 4 ]; do sleep 0.01; done
  echo "dev=$CUDA_VISIBLE_DEVICES"' "$dir")
echo "$out"
[ "$(echo "$out" | grep -c '^dev=0$')" -eq 2 ]
[ "$(echo "$out" | grep -c '^dev=1$')" -eq 2 ]
# Whole devices: one copy of two GPUs sees both.
out=$(CUDA_VISIBLE_DEVICES="GPU-a,GPU-b" "$bin" 2 1 sh -c 'echo "dev=$CUDA_VISIBLE_DEVICES"')
[ "$out" = "dev=GPU-a,GPU-b" ]
# A failing command still releases: the copies after it run, and the
# exit status says a copy failed.
if CRONOQ_NUM_GPUS=1 "$bin" 1 3 sh -c 'exit 3'; then exit 1; fi
echo ok
