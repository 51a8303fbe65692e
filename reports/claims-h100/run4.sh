#!/usr/bin/env bash
# Round 4's calls: the whole table at one commit, on a machine with any number of GPUs (run from
# the repository root after `cargo build --release`, with .gpu/ holding CUDA-L1's H100 release
# (h100.json), a `kbench import good-kernels` tree (gk/), a `kbench import cuda-l2 --shapes ...`
# tree (l2/) and the nvidia-cutlass wheel (whl/)):
#   - the last GPU, one after another: the GPU corpus, good-kernels, the CUDA-L2 shapes (fp16),
#     the sandbox and in-process attacks;
#   - the other GPUs: CUDA-L1's 210 rows with KernelBench's eval as KernelBench runs it, the
#     150 and then 60 of them (two lists, so that a cut run's record says where it stopped);
# until LIMIT_S is spent. A call resumes the last on the same machine; on a fresh one it resumes
# from .gpu/state.tgz (the last call's OUT/state.tgz: the records and what is done), so a machine
# given back between calls loses nothing. Leaves back.tgz and state.tgz in OUT.
#   OUT=DIR bash reports/claims-h100/run4.sh LIMIT_S
set -u
end=$(( $(date +%s) + ${1:-560} ))
R=/tmp/claims4
mkdir -p "${OUT:?OUT: where back.tgz goes}"
if [ ! -d "$R" ]; then
  mkdir -p "$R"
  [ -f .gpu/state.tgz ] && tar -C "$R" -xzf .gpu/state.tgz
fi
left() { echo $(( end - $(date +%s) - 25 )); }
py=python3
n=$(nvidia-smi -L | wc -l)
last=$(( n - 1 ))
l1_gpus=$(seq -s, 0 $(( n > 1 ? n - 2 : 0 )))
{ nvidia-smi; nproc; target/release/kbench --version; cat .gpu/commit.txt; } > "$R/machine.txt" 2>&1
[ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1
if [ ! -f "$R/a.list" ]; then
  ls "$R/l1/submissions" | while read -r level; do
    ls "$R/l1/submissions/$level" | sed "s|^\([0-9]*\)_.*|${level#level}/\1|"
  done | sort -t/ -k1,1n -k2,2n > "$R/rows.txt"
  head -n 150 "$R/rows.txt" | paste -sd, > "$R/a.list"
  tail -n +151 "$R/rows.txt" | paste -sd, > "$R/b.list"
fi

# One kbench run, done once it ends within its limit (exit code 0 or 1).
run() {  # NAME MODE GPUS [TREE] [flags]
  local name=$1 mode=$2 gpus=$3
  shift 3
  [ -f "$R/$name.done" ] && return
  [ "$(left)" -gt 30 ] || return
  KBENCH_WORK=$R/w-$name KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh "$mode" "$R/$name" "$@" \
    --gpus "$gpus" >> "$R/$name.txt" 2>&1
  cat "$R/$name/$mode.console.txt" >> "$R/$name.consoles.txt"
  grep -q "exit code [01]," "$R/$name/$mode.console.txt" && touch "$R/$name.done"
}

side() {
  run corpus corpus "$last"
  run gk cuda-l1 "$last" .gpu/gk --budget 1 --sandbox require --kernelbench-eval
  # CUTLASS's headers for CUDA-L2's kernels: the wheel, without its Python dependencies.
  if ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("cutlass_library") is None)'; then
    "$py" -m pip install --no-deps --no-index -q .gpu/whl/*.whl > "$R/pip.txt" 2>&1 \
      || "$py" -m pip install --no-deps --no-index -q --break-system-packages .gpu/whl/*.whl >> "$R/pip.txt" 2>&1
  fi
  run l2 cuda-l1 "$last" .gpu/l2 --precision fp16 --budget 1 --sandbox require
  run attacks attacks "$last" --sandbox require
  [ -f "$R/attacks.done" ] && touch "$R/side.done"
}

l1() {  # NAME GPUS
  run "$1" cuda-l1 "$2" "$R/l1" --budget 1 --sandbox require --kernelbench-eval --only "$(cat "$R/$1.list")"
}
if [ "$n" -gt 1 ]; then
  side &
  l1 a "$l1_gpus"
  l1 b "$l1_gpus"
  wait
else
  side
  l1 a 0
  l1 b 0
fi

cd "$R" || exit 1
# What a fresh machine needs to resume: the records and the marks of what is done.
tar -czf "$OUT/state.tgz" --ignore-failed-read ./*.done ./*.list ./*.consoles.txt \
  $(ls -d w-*/*/results.json w-*/*/results.csv w-*/*/junit.xml 2>/dev/null)
rm -rf back && mkdir back && cp ./*.txt back/ 2>/dev/null
cp corpus/corpus.table.md back/ 2>/dev/null
for w in corpus:w-corpus/corpus attacks:w-attacks/attacks a:w-a/cuda-l1 b:w-b/cuda-l1 \
  gk:w-gk/cuda-l1 l2:w-l2/cuda-l1; do
  name=${w%%:*} dir=${w#*:}
  [ -f "$dir/results.json" ] && gzip -c "$dir/results.json" > "back/$name.results.json.gz"
  cp "$dir/results.csv" "back/$name.results.csv" 2>/dev/null
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" ./*/*.console.txt
