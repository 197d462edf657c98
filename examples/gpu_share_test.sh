#!/bin/sh
# gpu_share on two fake GPUs: four copies at 0.5 share them two by two, and
# each copy sees exactly one device in CUDA_VISIBLE_DEVICES.
set -eu
bin=$1
out=$(CRONOQ_NUM_GPUS=2 "$bin" 0.5 4 sh -c 'echo "dev=$CUDA_VISIBLE_DEVICES"')
echo "$out"
[ "$(echo "$out" | grep -c '^dev=0$')" -eq 2 ]
[ "$(echo "$out" | grep -c '^dev=1$')" -eq 2 ]
# Whole devices: one copy of two GPUs sees both.
out=$(CUDA_VISIBLE_DEVICES="GPU-a,GPU-b" "$bin" 2 1 sh -c 'echo "dev=$CUDA_VISIBLE_DEVICES"')
[ "$out" = "dev=GPU-a,GPU-b" ]
# A failing command still releases: the next copies run.
CRONOQ_NUM_GPUS=1 "$bin" 1 3 sh -c 'exit 3' && exit 1
echo ok
