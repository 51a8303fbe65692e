#!/usr/bin/env bash
# The runs of this report, from the repository root on a one-GPU machine, after `cargo build --release`.
# BASE is a kbench binary built at the commit to compare with (here 796cc7f).
#   bash reports/h100-throughput-round3/run.sh profile OUT     # identity on the 25 many-candidate tasks
#   bash reports/h100-throughput-round3/run.sh many OUT BASE   # 8 candidates x 6 tasks, BASE then this build
#   bash reports/h100-throughput-round3/run.sh identity OUT    # the 250 identities (resumable: run again)
set -uo pipefail
what=$1 out=$2
mkdir -p "$out"
case $what in
  profile)
    python3 benchmarks/identity.py /tmp/idsub >/dev/null
    KBENCH_CACHE=/tmp/p1-cache timeout 300 target/release/kbench eval /tmp/idsub --python python3 --out /tmp/pA \
      --only 1/1,1/9,1/19,1/23,1/40,1/50,1/63,1/88,1/97,2/1,2/6,2/9,2/14,2/30,2/46,2/66,2/75,2/100,3/1,3/4,3/10,3/20,3/28,3/44,3/49 \
      > "$out/profile.console.txt" 2>&1
    cp /tmp/pA/results.json "$out/profile.results.json" ;;
  many)
    tasks=1/9,1/50,2/14,2/30,2/75,3/44
    KBENCH_CACHE=/tmp/mc-before-cache python3 benchmarks/many_candidates.py /tmp/mc-before --kbench "$3" --python python3 \
      --tasks $tasks --candidates 8 > "$out/many-before.console.txt" 2>&1
    KBENCH_CACHE=/tmp/mc-after-cache python3 benchmarks/many_candidates.py /tmp/mc-after --python python3 \
      --tasks $tasks --candidates 8 > "$out/many-after.console.txt" 2>&1 ;;
  identity)
    KBENCH_CACHE=/tmp/idw/cache KBENCH_WORK=/tmp/idw bash benchmarks/gpu_run.sh identity "$out" ;;
esac
