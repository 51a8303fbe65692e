#!/usr/bin/env bash
# Issue 30's GPU rows: part 1 = the attacks at --scale small, then the 250 identities until the
# call's time is spent; later parts continue the identities with --resume. The identity run
# folder travels back in $OUT (state.tar.gz) so that a fresh machine can continue it.
set -uo pipefail
part=$1 budget=${2:-585}
start=$(date +%s)
mkdir -p /tmp/r30
export KBENCH_CACHE=/tmp/kb30-cache
if [ ! -d /tmp/kb30-id ] && [ -f .gpu/state.tar.gz ]; then tar -C /tmp -xzf .gpu/state.tar.gz; fi
if [ "$part" = 1 ]; then
  KBENCH_WORK=/tmp/kb30-att KBENCH_LIMIT_S=200 bash benchmarks/gpu_run.sh attacks /tmp/r30/attacks-small --scale small | tail -4
fi
left=$(( budget - ($(date +%s) - start) - 25 ))
KBENCH_WORK=/tmp/kb30-id KBENCH_LIMIT_S=$left bash benchmarks/gpu_run.sh identity /tmp/r30/identity-$part | tail -4
tar -czf "$OUT/r30-$part.tar.gz" -C /tmp r30
tar -czf "$OUT/state.tar.gz" -C /tmp kb30-id/identity
ls -la "$OUT"
