#!/usr/bin/env bash
# Round 3's calls, on a machine with two GPUs (run from the repository root after
# `cargo build --release`, with .gpu/ holding CUDA-L1's H100 release (h100.json), a
# `kbench import good-kernels` tree (gk/), a `kbench import cuda-l2 --shapes ...` tree (l2/), the
# nvidia-cutlass wheel (whl/) and the CUDA-L1 rows to run first and next (prio.txt, rest.txt: task
# lists for --only)). Each call resumes the last on the same machine:
#   - GPU 1, one after another: the capture probe of level2/5 and 2/85, the GPU corpus,
#     good-kernels, the CUDA-L2 shapes (fp16);
#   - GPU 0 (both once GPU 1's work is done): CUDA-L1's rows in prio.txt, then rest.txt, with
#     KernelBench's eval as KernelBench runs it;
# until LIMIT_S is spent. Leaves back.tgz in OUT.   OUT=DIR bash reports/claims-h100/run3.sh LIMIT_S
set -u
end=$(( $(date +%s) + ${1:-560} ))
R=/tmp/claims3
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
left() { echo $(( end - $(date +%s) - 25 )); }
py=python3
{ nvidia-smi; nproc; target/release/kbench --version; cat .gpu/commit.txt; } > "$R/machine.txt" 2>&1
[ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1

# A tree's run on GPU 1, done once it ends within its limit (exit code 0 or 1).
tree_run() {  # NAME TREE [flags]
  local name=$1 tree=$2
  shift 2
  [ -f "$R/$name.done" ] && return
  [ "$(left)" -gt 30 ] || return
  KBENCH_WORK=$R/w-$name KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh cuda-l1 "$R/$name" "$tree" \
    --gpus 1 "$@" > "$R/$name.txt" 2>&1
  grep -q "exit code [01]," "$R/$name/cuda-l1.console.txt" && touch "$R/$name.done"
}

side() {
  if [ ! -f "$R/probe.done" ]; then
    for t in level2/5 level2/85; do
      CUDA_VISIBLE_DEVICES=1 timeout 120 "$py" reports/claims-h100/capture_probe.py "$R/l1" "$t" >> "$R/probe.txt" 2>&1
    done
    touch "$R/probe.done"
  fi
  if [ ! -f "$R/corpus.done" ] && [ "$(left)" -gt 30 ]; then
    KBENCH_WORK=$R/w-corpus KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh corpus "$R/corpus" --gpus 1 \
      > "$R/corpus.txt" 2>&1
    grep -q "exit code [01]," "$R/corpus/corpus.console.txt" && touch "$R/corpus.done"
  fi
  tree_run gk .gpu/gk --budget 1 --sandbox require --kernelbench-eval
  # CUTLASS's headers for CUDA-L2's kernels: the wheel, without its Python dependencies.
  if ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("cutlass_library") is None)'; then
    "$py" -m pip install --no-deps --no-index -q .gpu/whl/*.whl > "$R/pip.txt" 2>&1 \
      || "$py" -m pip install --no-deps --no-index -q --break-system-packages .gpu/whl/*.whl >> "$R/pip.txt" 2>&1
  fi
  tree_run l2 .gpu/l2 --precision fp16 --budget 1 --sandbox require
  [ -f "$R/l2.done" ] && touch "$R/side.done"
}

side &
# CUDA-L1's rows, a list at a time: done once its run ends within its limit.
l1_run() {  # NAME GPUS
  [ -f "$R/$1.done" ] && return
  [ "$(left)" -gt 30 ] || return
  KBENCH_WORK=$R/w-$1 KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh cuda-l1 "$R/$1" "$R/l1" \
    --budget 1 --sandbox require --kernelbench-eval --gpus "$2" --only "$(cat ".gpu/$1.txt")" >> "$R/$1.txt" 2>&1
  grep -q "exit code [01]," "$R/$1/cuda-l1.console.txt" && touch "$R/$1.done"
}
l1_run prio 0
gpus=0
[ -f "$R/side.done" ] && gpus=0,1
l1_run rest "$gpus"
wait

cd "$R" && rm -rf back && mkdir back && cp machine.txt import.txt probe.txt pip.txt ./*.txt back/ 2>/dev/null
cp corpus/corpus.console.txt corpus/corpus.table.md back/ 2>/dev/null
for name in prio rest gk l2; do
  cp "$name/cuda-l1.console.txt" "back/$name.console.txt" 2>/dev/null
done
for w in corpus:w-corpus/corpus prio:w-prio/cuda-l1 rest:w-rest/cuda-l1 gk:w-gk/cuda-l1 l2:w-l2/cuda-l1; do
  name=${w%%:*} dir=${w#*:}
  [ -f "$dir/results.json" ] && gzip -c "$dir/results.json" > "back/$name.results.json.gz"
  cp "$dir/results.csv" "back/$name.results.csv" 2>/dev/null
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" back/*.console.txt
ls "$R"/*.done 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' '
tail -n 2 back/corpus.table.md 2>/dev/null
cat back/probe.txt 2>/dev/null | cut -c1-400
