#!/usr/bin/env bash
# The runs of this report, from the repository root on a one-GPU machine, after `cargo build --release`.
#   bash reports/h100-output-placement/run.sh place          # the placement probe (about 26 GB of GPU memory)
#   bash reports/h100-output-placement/run.sh level1-33 OUT  # level1/33's identity six times, the process check always on
#   bash reports/h100-output-placement/run.sh identity OUT   # the 250 identities (resumable: run again)
set -uo pipefail
what=$1
case $what in
  place)
    python3 reports/h100-output-placement/place.py 6 ;;
  level1-33)
    out=$2; mkdir -p "$out"
    python3 benchmarks/identity.py /tmp/idsub >/dev/null
    for run in 1 2 3 4 5 6; do
      KBENCH_CACHE=/tmp/l33-cache target/release/kbench eval /tmp/idsub --python python3 --out "/tmp/l33-$run" \
        --only 1/33 --process-check always > "$out/level1-33-run$run.console.txt" 2>&1
      cp "/tmp/l33-$run/results.json" "$out/level1-33-run$run.results.json"
    done ;;
  identity)
    out=$2
    KBENCH_CACHE=/tmp/idw/cache KBENCH_WORK=/tmp/idw bash benchmarks/gpu_run.sh identity "$out" ;;
esac
