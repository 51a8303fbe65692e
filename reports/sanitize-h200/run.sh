#!/usr/bin/env bash
# Issue 54's measurement of `--sanitize` (docs/checks.md, "compute-sanitizer"), from the
# repository root after `cargo build --release`, with .gpu/ as for reports/claims-h100 (CUDA-L1's
# H100 release, good-kernels' import):
#   OUT=DIR GPUS=0,1 bash reports/sanitize-h200/run.sh LIMIT_S
# Runs, each an `eval` with --resume (a later call continues it), spread over GPUS:
#   planted-off  the three planted memory errors (tests/fixtures/gpu/level1/19_ReLU/memory_*),
#                without --sanitize: each must pass (the value checks cannot see them);
#   planted-on   the same with --sanitize: each must read incorrect, the right tool named;
#   honest-on    the GPU corpus's honest kernels (benchmarks/example/gpu and the honest rows of
#                tests/fixtures/gpu) with --sanitize: none may be flagged;
#   sample-on    a CUDA-L1 sample (level1/32, whose kernel is its own, and four rows of PyTorch
#                code: 1/19, 1/22, 2/12, 3/2) and good-kernels' Softmax (its task 1/6), with
#                --sanitize.
# Each run's console, results.json and the corpus tables go to OUT; each evaluation's seconds
# (with and without the tool) are the cost figure.
set -u
end=$(( $(date +%s) + ${1:-560} ))
W=/tmp/sanitize
mkdir -p "${OUT:?OUT: where the results go}" "$W"
IFS=, read -r -a gpus <<< "${GPUS:-0}"
k=target/release/kbench
{ nvidia-smi; nproc; $k --version; cat .gpu/commit.txt; command -v compute-sanitizer; ls /usr/local/cuda/bin/compute-sanitizer; } > "$OUT/machine.txt" 2>&1
# compute-sanitizer beside nvcc when it is not on PATH.
command -v compute-sanitizer >/dev/null || export PATH=$PATH:$(dirname "$(command -v nvcc)")
tree() {  # NAME FILE... : a submission tree of FILEs (paths under their corpus's root)
  local name=$1 root=$2
  shift 2
  for f in "$@"; do
    [ -f "$W/$name/$f" ] || { mkdir -p "$W/$name/$(dirname "$f")"; cp "$root/$f" "$W/$name/$f"; }
  done
}
tree planted tests/fixtures/gpu level1/19_ReLU/memory_oob_scratch_write.py \
  level1/19_ReLU/memory_shared_race.py level1/19_ReLU/memory_uninitialized_read.py
tree honest benchmarks/example/gpu $(cd benchmarks/example/gpu && find . -name '*.py' | sed 's|^\./||')
tree honest tests/fixtures/gpu $(cd tests/fixtures/gpu && find . -name 'honest_*.py' | sed 's|^\./||')
[ -d "$W/cl1" ] || $k import cuda-l1 .gpu/h100.json "$W/cl1" > "$W/import.txt" 2>&1
run() {  # NAME GPU [flags]
  local name=$1 gpu=$2
  shift 2
  local left=$(( end - $(date +%s) - 20 ))
  [ -f "$W/$name.done" ] || [ "$left" -lt 60 ] && return
  local s=$(date +%s)
  timeout "$left" $k eval "$@" --out "$W/$name" --resume --gpus "$gpu" --budget 1 \
    --sandbox require >> "$W/$name.console.txt" 2>&1
  local rc=$?
  echo "exit code $rc, $(( $(date +%s) - s )) s" >> "$W/$name.console.txt"
  [ "$rc" -le 1 ] && touch "$W/$name.done"
}
g() { echo "${gpus[$(( $1 % ${#gpus[@]} ))]}"; }
( run planted-off "$(g 0)" "$W/planted"; run planted-on "$(g 0)" "$W/planted" --sanitize ) &
( run honest-on "$(g 1)" "$W/honest" --sanitize ) &
( run sample-on "$(g 2)" "$W/cl1/submissions" --tasks "$W/cl1/tasks" --only 1/32,1/19,1/22,2/12,3/2 --sanitize
  run gk-on "$(g 2)" .gpu/gk/submissions --tasks .gpu/gk/tasks --only 1/6 --sanitize ) &
wait
cd "$W" || exit 1
for name in planted-off planted-on honest-on sample-on gk-on; do
  [ -f "$name/results.json" ] && gzip -c "$name/results.json" > "$OUT/$name.results.json.gz"
  cp "$name.console.txt" "$OUT/" 2>/dev/null
done
cd - >/dev/null || exit 1
t=benchmarks/corpus_table.py
[ -f "$W/planted-off/results.json" ] && python3 $t "$W/planted-off/results.json" tests/fixtures/gpu/expected.toml > "$OUT/planted-off.table.md"
[ -f "$W/planted-on/results.json" ] && python3 $t "$W/planted-on/results.json" tests/fixtures/gpu/expected-sanitize.toml > "$OUT/planted-on.table.md"
grep '/honest_' tests/fixtures/gpu/expected.toml > "$W/honest-expected.toml"
[ -f "$W/honest-on/results.json" ] && python3 $t "$W/honest-on/results.json" benchmarks/example/gpu/expected.toml \
  "$W/honest-expected.toml" > "$OUT/honest-on.table.md"
tail -n 3 "$OUT"/*.table.md 2>/dev/null
grep -h "exit code" "$W"/*.console.txt
