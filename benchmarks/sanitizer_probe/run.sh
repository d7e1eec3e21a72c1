#!/bin/bash
# On a machine with an NVIDIA GPU and the CUDA toolkit: builds the probe and
# runs each kernel under compute-sanitizer racecheck in both report modes.
#   bash benchmarks/sanitizer_probe/run.sh OUTDIR
set -u
here=$(dirname "$0"); out=${1:-/tmp/probe}; mkdir -p "$out"
nvcc -O2 -lineinfo -arch=native -o "$out/racecheck_probe" "$here/racecheck_probe.cu" || exit 2
for k in same_value_in_warp different_values_in_warp same_value_across_warps read_then_write \
         read_then_same_value_write clean; do
  for mode in analysis hazard; do
    compute-sanitizer --tool racecheck --racecheck-report $mode "$out/racecheck_probe" $k > "$out/$k.$mode.txt" 2>&1
  done
done
compute-sanitizer --version > "$out/version.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt" 2>&1
