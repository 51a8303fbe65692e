#!/usr/bin/env bash
# Issue 53's measurement: `kbench serve` instances of one run, one per GPU, against one instance
# on one GPU, and the same stream with one instance killed (SIGKILL) mid-stream
# (benchmarks/serve_cluster_bench.py), on CUDA-L1's H100 release (.gpu/h100.json: 25 tasks round
# robin over the levels, 8 unique candidates each). From the repository root after
# `cargo build --release`:
#   OUT=DIR bash reports/serve-cluster-h200/run.sh ARM:GPUS[:CLIENTS]...
# e.g. `one:0:8 two:1,2:16` runs both arms at once on three GPUs (each instance 12 build jobs,
# 8 clients per instance), `kill:1,2:16` the kill arm. The arms' JSON and the table go to OUT.
set -u
W=/tmp/serve-cluster
mkdir -p "${OUT:?OUT: where the results go}" "$W"
[ -d "$W/cl1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$W/cl1" > "$W/import.txt" 2>&1
{ nvidia-smi; nproc; target/release/kbench --version; cat .gpu/commit.txt; } > "$OUT/machine.txt" 2>&1
for spec in "$@"; do
  IFS=: read -r arm gpus clients <<< "$spec"
  python3 benchmarks/serve_cluster_bench.py --submissions "$W/cl1/submissions" --tasks "$W/cl1/tasks" \
    --out "$W/bench" --arm "$arm" --gpus "$gpus" --clients "${clients:-8}" --jobs 12 \
    --limit-s "${LIMIT_S:-200}" --kill-at "${KILL_AT:-75}" -- --budget 1 --sandbox require \
    > "$W/$arm.txt" 2>&1 &
done
wait
python3 benchmarks/serve_cluster_bench.py --out "$W/bench" --summary | tee "$W/table.md"
cp "$W"/*.txt "$W/table.md" "$W"/bench/*.json "$OUT/" 2>/dev/null
for arm in one two kill; do
  tar -C "$W/bench" -czf "$OUT/$arm.logs.tgz" --ignore-failed-read "$arm"/i0.log "$arm"/i1.log \
    "$arm"/merged/results.json 2>/dev/null
done
