#!/usr/bin/env bash
# This session's second round of GPU checks. A: the six identities that ran out of memory, and
# level1/19; B: the attacks at --scale small; C: the CUDA-L2 offline run (resumed by later calls);
# D: the GPU corpus.
set -uo pipefail
start=$(date +%s)
mkdir -p /tmp/s2
export KBENCH_CACHE=/tmp/s2-cache
for part in "$@"; do
  case $part in
    A) KBENCH_WORK=/tmp/s2-id KBENCH_LIMIT_S=200 bash benchmarks/gpu_run.sh identity /tmp/s2/identity-oom \
         --only 1/25,1/30,1/34,1/35,1/36,1/37,1/19 | tail -12 ;;
    B) KBENCH_WORK=/tmp/s2-att KBENCH_LIMIT_S=200 bash benchmarks/gpu_run.sh attacks /tmp/s2/attacks-small --scale small | tail -5 ;;
    C*) left=$(( ${part#C} - ($(date +%s) - start) )); OUT=/tmp/s2 bash .gpu/cudal2/run.sh offline "$left" --only 1/18,1/997,1/289,1/675 | tail -45 ;;
    S*) left=$(( ${part#S} - ($(date +%s) - start) )); OUT=/tmp/s2 bash .gpu/cudal2/run.sh server "$left" \
          --only 1/3,1/101,1/163,1/911,1/734 | tail -45 ;;
    D*) left=$(( ${part#D} - ($(date +%s) - start) )); KBENCH_WORK=/tmp/s2-corpus KBENCH_LIMIT_S=$left bash benchmarks/gpu_run.sh corpus /tmp/s2/corpus | tail -5 ;;
  esac
done
tar -czf "$OUT/s2.tar.gz" -C /tmp s2
ls -la "$OUT"
