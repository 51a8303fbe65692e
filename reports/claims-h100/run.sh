#!/usr/bin/env bash
# A sample of the per-system claims table on one GPU (run from the repository root after
# `cargo build --release`, with CUDA-L1's H100 release at .gpu/h100.json): 30 CUDA-L1 rows (the
# isolation report's 25, and level1/14, 1/15, 3/29, 2/5 and 2/9, which issue 50 names), judged
# with KernelBench's fp32 tolerance against the published table the import writes.
# Leaves back.tgz in OUT.   OUT=DIR bash reports/claims-h100/run.sh LIMIT_S
set -u
L=${1:-540}
R=/tmp/claims
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
{ nvidia-smi; nproc; target/release/kbench --version; } > "$R/machine.txt" 2>&1
[ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1
ROWS=2/34,2/49,2/62,2/72,2/74,2/85,2/91,3/17,1/13,1/46,2/13,2/6,1/43,1/23,2/97,2/40,1/20,3/33,1/9,2/99,1/32,1/33,1/35,1/65,3/26,1/14,1/15,3/29,2/5,2/9
KBENCH_WORK=$R/w KBENCH_LIMIT_S=$L bash benchmarks/gpu_run.sh cuda-l1 "$R/cuda-l1" "$R/l1" --only "$ROWS" \
  --budget 3 --sandbox require --kernelbench-tolerance 1e-4 > "$R/cuda-l1.txt" 2>&1
cd "$R" && rm -rf back && mkdir back && cp machine.txt import.txt cuda-l1.txt cuda-l1/*.console.txt back/
gzip -c w/cuda-l1/results.json > back/cuda-l1.results.json.gz
cp w/cuda-l1/results.csv w/cuda-l1/summary.json back/ 2>/dev/null
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" back/*.console.txt
