#!/usr/bin/env bash
# Final GPU checks of issue 30: A = the GPU corpus; B = the attacks at --scale small (short
# calls: bursts), by the new binary and by the old one.
set -uo pipefail
part=$1
mkdir -p /tmp/r3
if [ "$part" = A ]; then
  KBENCH_WORK=/tmp/kb3-corpus KBENCH_CACHE=/tmp/kb3-cache KBENCH_LIMIT_S=450 bash benchmarks/gpu_run.sh corpus /tmp/r3/corpus | tail -3
else
  KBENCH_WORK=/tmp/kb3-small KBENCH_CACHE=/tmp/kb3-cache KBENCH_LIMIT_S=115 bash benchmarks/gpu_run.sh attacks /tmp/r3/attacks-small --scale small | tail -3
  cp .gpu/kbench-old target/release/kbench
  KBENCH_WORK=/tmp/kb3-small-old KBENCH_CACHE=/tmp/kb3-cache-old KBENCH_LIMIT_S=100 bash benchmarks/gpu_run.sh attacks /tmp/r3/attacks-small-old --scale small | tail -3
fi
tar -czf "$OUT/r3-$part.tar.gz" -C /tmp r3
