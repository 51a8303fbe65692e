#!/usr/bin/env bash
# The runs of this report, from the repository root, after `cargo build --release`.
# BASE is a kbench binary built at the commit to compare with (here 796cc7f, the code issue 33 was filed against).
#   bash reports/h100-many-candidates-memo/run.sh many OUT BASE  # one GPU: 8 candidates x 6 tasks, BASE then this build
#   bash reports/h100-many-candidates-memo/run.sh two-gpus OUT   # two GPUs: level2/1-60's identities on GPU 0, then on 0,1
#   bash reports/h100-many-candidates-memo/run.sh corpus OUT     # one GPU: the GPU adversarial corpus against its tables
set -uo pipefail
what=$1 out=$2
mkdir -p "$out"
case $what in
  many)
    tasks=1/9,1/50,2/14,2/30,2/75,3/44
    KBENCH_CACHE=/tmp/mc-before-cache python3 benchmarks/many_candidates.py /tmp/mc-before --kbench "$3" --python python3 \
      --tasks $tasks --candidates 8 > "$out/many-before.console.txt" 2>&1
    KBENCH_CACHE=/tmp/mc-after-cache python3 benchmarks/many_candidates.py /tmp/mc-after --python python3 \
      --tasks $tasks --candidates 8 > "$out/many-after.console.txt" 2>&1
    cp /tmp/mc-before/out/results.json "$out/many-before.results.json"
    cp /tmp/mc-after/out/results.json "$out/many-after.results.json" ;;
  two-gpus)
    python3 benchmarks/identity.py /tmp/idsub >/dev/null
    only=$(seq -s, -f "2/%g" 1 60)
    for g in 0 0,1; do
      n=${g/,/_} start=$(date +%s)
      KBENCH_CACHE=/tmp/x2-cache target/release/kbench eval /tmp/idsub --python python3 --out "/tmp/x2-$n" \
        --only "$only" --gpus "$g" > "$out/two-gpus-$n.console.txt" 2>&1
      echo "exit code $?, wall time $(( $(date +%s) - start )) s" >> "$out/two-gpus-$n.console.txt"
      cp "/tmp/x2-$n/results.json" "$out/two-gpus-$n.results.json"
    done ;;
  corpus)
    KBENCH_CACHE=/tmp/corpus-cache bash benchmarks/gpu_run.sh corpus "$out" ;;
esac
