#!/usr/bin/env bash
# GPU run for reports/h100-cuda-l2: CUDA-L2's H100 kernels imported (kbench import cuda-l2),
# built against CUTLASS's headers from the nvidia-cutlass wheel carried here (no network),
# judged and timed by kbench eval with --published. From the repository root, with .gpu/cudal2
# carried and target/release/kbench built:
#
#   bash .gpu/cudal2/run.sh offline [LIMIT_S]   # kbench's offline protocol vs torch.matmul
#   bash .gpu/cudal2/run.sh server [LIMIT_S]    # --mode server (their server scenario)
#
# Each phase runs under `timeout LIMIT_S` (default 540) with --resume: call it again to go on
# (on the same warm machine; on a fresh one put the last $OUT/cudal2-PHASE.tar.gz at
# .gpu/cudal2/resume/ first). Writes $OUT/cudal2-PHASE.tar.gz: the run folder (results.json,
# results.csv, junit.xml, logs), its console output, kbench doctor's, and the import's
# kernels.csv and published tables.
set -uo pipefail
phase=${1:?usage: run.sh offline|server [LIMIT_S] [eval flags]}
limit=${2:-540}
shift 2 || shift $#
here=.gpu/cudal2
kb=$PWD/target/release/kbench
py=${KBENCH_PYTHON:-python3}
work=/tmp/cudal2
out=${OUT:-/tmp/cudal2-out}
mkdir -p "$work" "$out"
export KBENCH_CACHE=$work/cache

# CUTLASS's headers: the wheel installed without its Python dependencies (only the headers are
# used); where pip cannot install into this Python, the wheel unpacked and CUTLASS_DIR set.
wheel=$here/whl/nvidia_cutlass-4.2.0.0-py3-none-any.whl
if ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("cutlass_library") is None)'; then
  "$py" -m pip install --no-deps --no-index -q "$wheel" >"$work/pip.txt" 2>&1 \
    || "$py" -m pip install --no-deps --no-index -q --break-system-packages "$wheel" >>"$work/pip.txt" 2>&1 \
    || { mkdir -p "$work/cutlass" && "$py" -m zipfile -e "$wheel" "$work/cutlass" \
         && export CUTLASS_DIR=$work/cutlass/cutlass_library/source; }
fi
"$kb" doctor --python "$py" >"$work/doctor.txt" 2>&1
cat "$work/doctor.txt"

tree=$work/tree
if [ ! -d "$tree" ]; then
  "$kb" import cuda-l2 "$here/CUDA-L2" "$tree" --gpu h100 --shapes "$(cat "$here/shapes.txt")" \
    >"$work/import.txt" 2>&1 || { cat "$work/import.txt"; exit 1; }
fi
cat "$work/import.txt"

case $phase in
  offline) flags=(--published "$tree/published.csv") ;;
  server) flags=(--mode server --published "$tree/published-server.csv") ;;
  *) echo "usage: run.sh offline|server [LIMIT_S]" >&2; exit 2 ;;
esac
run=$work/$phase
if [ ! -d "$run" ] && [ -f "$here/resume/cudal2-$phase.tar.gz" ]; then
  tar -xzf "$here/resume/cudal2-$phase.tar.gz" -C "$work" "$phase"
fi
start=$(date +%s)
timeout "$limit" "$kb" eval "$tree/submissions" --tasks "$tree/tasks" --precision fp16 \
  --python "$py" --out "$run" --resume "${flags[@]}" "$@" >"$work/$phase.console.txt" 2>&1
code=$?
echo "exit code $code, wall time $(( $(date +%s) - start )) s" >>"$work/$phase.console.txt"
tail -n 40 "$work/$phase.console.txt"
cp "$tree/kernels.csv" "$tree/published.csv" "$tree/published-server.csv" "$work/" 2>/dev/null
tar -czf "$out/cudal2-$phase.tar.gz" -C "$work" "$phase" "$phase.console.txt" doctor.txt \
  import.txt kernels.csv published.csv published-server.csv
ls -la "$out"
