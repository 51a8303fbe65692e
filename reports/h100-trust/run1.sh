#!/usr/bin/env bash
# One call on the device: BIN (new|old) runs PHASES (attacks corpus identity) with gpu_run.sh,
# each under its own time limit; everything to $OUT/BIN.tar.gz.
set -uo pipefail
bin=$1; shift
mkdir -p target/release
if [ "$bin" = old ]; then cp .gpu/kbench-old target/release/kbench; fi
export KBENCH_WORK=/tmp/kb-$bin KBENCH_CACHE=/tmp/kb-cache-$bin
for phase in "$@"; do
  case $phase in
    attacks) KBENCH_LIMIT_S=240 bash benchmarks/gpu_run.sh attacks /tmp/res-$bin ;;
    corpus) KBENCH_LIMIT_S=330 bash benchmarks/gpu_run.sh corpus /tmp/res-$bin ;;
    identity) KBENCH_LIMIT_S=150 bash benchmarks/gpu_run.sh identity /tmp/res-$bin --only 1/12,1/19,1/23,2/76,3/4 ;;
  esac
  tar -czf "$OUT/$bin.tar.gz" -C /tmp "res-$bin"
done
