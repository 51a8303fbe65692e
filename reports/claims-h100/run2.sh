#!/usr/bin/env bash
# This round's calls (run from the repository root after `cargo build --release`, with
# CUDA-L1's H100 release at .gpu/h100.json), each resuming the last on the same machine:
# the GPU corpus once (`profile.library_output`'s fixtures among it), then CUDA-L1's 210 rows
# with KernelBench's eval as KernelBench runs it, until LIMIT_S is spent.
# Leaves back.tgz in OUT.   OUT=DIR bash reports/claims-h100/run2.sh LIMIT_S
set -u
end=$(( $(date +%s) + ${1:-560} ))
R=/tmp/claims2
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
{ nvidia-smi; nproc; target/release/kbench --version; } > "$R/machine.txt" 2>&1
if [ ! -f "$R/corpus.done" ]; then
  KBENCH_WORK=$R/w KBENCH_LIMIT_S=$(( end - $(date +%s) - 30 )) bash benchmarks/gpu_run.sh corpus "$R/corpus" \
    > "$R/corpus.txt" 2>&1
  grep -q "exit code [01]," "$R/corpus/corpus.console.txt" && touch "$R/corpus.done"
fi
[ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1
left=$(( end - $(date +%s) - 30 ))
[ "$left" -gt 30 ] && KBENCH_WORK=$R/w KBENCH_LIMIT_S=$left bash benchmarks/gpu_run.sh cuda-l1 "$R/cuda-l1" "$R/l1" \
  --budget 1 --sandbox require --kernelbench-eval >> "$R/cuda-l1.txt" 2>&1
cd "$R" && rm -rf back && mkdir back && cp machine.txt import.txt corpus.txt cuda-l1.txt back/ 2>/dev/null
cp corpus/corpus.console.txt corpus/corpus.table.md back/ 2>/dev/null
cp cuda-l1/cuda-l1.console.txt back/ 2>/dev/null
for w in corpus cuda-l1; do
  [ -f "w/$w/results.json" ] && gzip -c "w/$w/results.json" > "back/$w.results.json.gz"
  cp "w/$w/results.csv" "back/$w.results.csv" 2>/dev/null
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" back/*.console.txt
tail -n 3 back/corpus.table.md 2>/dev/null
