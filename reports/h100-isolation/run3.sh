#!/usr/bin/env bash
# This report's runs on one GPU at the final commit, two calls (run again to resume):
#   identity:  40 tasks' identities (every sixth of the 250) alone on the GPU, then 25 CUDA-L1 H100
#              rows (the eight that use torch.compile among them), imported from .gpu/;
#   corpus:    the GPU corpus (benchmarks/gpu_run.sh corpus), with the attacks beside it.
# Leaves back.tgz in OUT: consoles, records, the machine's description.
#   OUT=DIR bash reports/h100-isolation/run3.sh LIMIT_S identity|corpus
set -u
L=${1:-560} what=${2:?identity or corpus}
R=/tmp/iso
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
began=$(date +%s)
left() { echo $(( L - ($(date +%s) - began) )); }
[ -s "$R/machine.txt" ] || { nvidia-smi; nproc; target/release/kbench --version; } > "$R/machine.txt" 2>&1
IDENTITY=$(python3 - <<'PY'
import pathlib
tasks = sorted((int(p.parent.name[5:]), int(p.name.split("_")[0])) for p in pathlib.Path(".").glob("level[123]/*.py"))
print(",".join(f"{l}/{n}" for l, n in tasks[::6][:40]))
PY
)
L1=2/34,2/49,2/62,2/72,2/74,2/85,2/91,3/17,1/13,1/46,2/13,2/6,1/43,1/23,2/97,2/40,1/20,3/33,1/9,2/99,1/32,1/33,1/35,1/65,3/26
case $what in
  identity)
    [ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1
    KBENCH_WORK=$R/w KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh identity "$R/identity" --only "$IDENTITY" > "$R/identity.txt" 2>&1
    KBENCH_WORK=$R/w KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh cuda-l1 "$R/cuda-l1" "$R/l1" --only "$L1" \
      --budget 3 --sandbox require --kernelbench-tolerance 1e-4 > "$R/cuda-l1.txt" 2>&1
    names="identity cuda-l1" ;;
  corpus)
    KBENCH_WORK=$R/wa KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh attacks "$R/attacks" > "$R/attacks.txt" 2>&1 &
    KBENCH_WORK=$R/w KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh corpus "$R/corpus" --timeout-call 30 > "$R/corpus.txt" 2>&1
    wait
    names="corpus attacks" ;;
esac
cd "$R" && rm -rf back && mkdir back && cp machine.txt back/ && cp import.txt back/ 2>/dev/null
for n in $names; do
  cp "$n.txt" "$n"/*.console.txt "$n"/*.table.md back/ 2>/dev/null
  for w in w wa; do [ -f "$w/$n/results.json" ] && gzip -c "$w/$n/results.json" > "back/$n.results.json.gz"; done
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" back/*.console.txt
