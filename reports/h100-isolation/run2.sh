#!/usr/bin/env bash
# The second call, at the final timing change (only what the candidate started beside its worker
# is stopped): GPU 0 the same 40 identities as run.sh, GPU 1 the attacks, then as much of the GPU
# corpus as the time left allows. Leaves back.tgz in OUT.
#   OUT=DIR bash reports/h100-isolation/run2.sh LIMIT_S
set -u
L=${1:-400}
R=/tmp/iso2
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
began=$(date +%s)
left() { echo $(( L - ($(date +%s) - began) )); }
{ nvidia-smi; nproc; target/release/kbench --version; } > "$R/machine.txt" 2>&1
IDENTITY=$(python3 - <<'PY'
import pathlib
tasks = sorted((int(p.parent.name[5:]), int(p.name.split("_")[0])) for p in pathlib.Path(".").glob("level[123]/*.py"))
print(",".join(f"{l}/{n}" for l, n in tasks[::6][:40]))
PY
)
KBENCH_WORK=$R/w0 KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh identity "$R/identity" --gpus 0 --only "$IDENTITY" > "$R/gpu0.txt" 2>&1 &
{
  KBENCH_WORK=$R/w1 KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh attacks "$R/attacks" --gpus 1
  KBENCH_WORK=$R/w1 KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh corpus "$R/corpus" --gpus 1 --timeout-call 30
} > "$R/gpu1.txt" 2>&1 &
wait
cd "$R" && rm -rf back && mkdir back && cp machine.txt gpu0.txt gpu1.txt back/
for n in identity corpus attacks; do
  cp "$n"/*.console.txt "$n"/*.table.md back/ 2>/dev/null
  for w in w0 w1; do [ -f "$w/$n/results.json" ] && gzip -c "$w/$n/results.json" > "back/$n.results.json.gz"; done
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" back/*.console.txt
