#!/usr/bin/env bash
# Round 5's calls (the next device time), on a machine with any number of GPUs, from the
# repository root after `cargo build --release`, with .gpu/ as for run4.sh: what round 4 left
# (reports/claims-h100/README.md, "Round 4"), at the commit that holds the fallback rebuild and
# the restructure (issue 52's "after"; round 4 is its "before"):
#   - the last GPU: the GPU corpus, the attacks, good-kernels under --compat;
#   - the other GPUs: the 12 CUDA-L1 rows round 4 read `environment` (the second build for
#     modules that fall back), then the 25 rows of prio.txt (round 3's sample);
# until LIMIT_S is spent; a fresh machine resumes from .gpu/state5.tgz (the last call's
# OUT/state.tgz). Leaves back.tgz and state.tgz in OUT. GPUS: the GPUs it may use (default all;
# `GPUS=3` beside other work).
#   OUT=DIR bash reports/claims-h100/run5.sh LIMIT_S
set -u
end=$(( $(date +%s) + ${1:-560} ))
R=/tmp/claims5
mkdir -p "${OUT:?OUT: where back.tgz goes}"
if [ ! -d "$R" ]; then
  mkdir -p "$R"
  [ -f .gpu/state5.tgz ] && tar -C "$R" -xzf .gpu/state5.tgz
fi
left() { echo $(( end - $(date +%s) - 25 )); }
IFS=, read -r -a mine <<< "${GPUS:-$(seq -s, 0 $(( $(nvidia-smi -L | wc -l) - 1 )))}"
n=${#mine[@]}
last=${mine[n - 1]}
l1_gpus=$(IFS=,; echo "${mine[*]:0:$(( n > 1 ? n - 1 : 1 ))}")
{ nvidia-smi; nproc; target/release/kbench --version; cat .gpu/commit.txt; } > "$R/machine.txt" 2>&1
[ -d "$R/l1" ] || target/release/kbench import cuda-l1 .gpu/h100.json "$R/l1" > "$R/import.txt" 2>&1
echo "1/35,1/41,1/42,1/48,1/65,1/82,1/96,2/4,2/21,2/35,2/47,3/32" > "$R/env.list"
cp .gpu/prio.txt "$R/prio.list"

# One kbench run, done once it ends within its limit (exit code 0 or 1).
run() {  # NAME MODE GPUS [TREE] [flags]
  local name=$1 mode=$2 gpus=$3
  shift 3
  [ -f "$R/$name.done" ] && return
  [ "$(left)" -gt 30 ] || return
  KBENCH_WORK=$R/w-$name KBENCH_LIMIT_S=$(left) bash benchmarks/gpu_run.sh "$mode" "$R/$name" "$@" \
    --gpus "$gpus" >> "$R/$name.txt" 2>&1
  cat "$R/$name/$mode.console.txt" >> "$R/$name.consoles.txt"
  cp "$R/$name/corpus.table.md" "$R/" 2>/dev/null
  grep -q "exit code [01]," "$R/$name/$mode.console.txt" && touch "$R/$name.done"
}
side() {
  run corpus corpus "$last"
  run attacks attacks "$last" --sandbox require
  run gk cuda-l1 "$last" .gpu/gk --budget 1 --sandbox require --kernelbench-eval --compat
}
l1() {  # NAME GPUS
  run "$1" cuda-l1 "$2" "$R/l1" --budget 1 --sandbox require --kernelbench-eval --only "$(cat "$R/$1.list")"
}
if [ "$n" -gt 1 ]; then
  side &
  l1 env "$l1_gpus"
  l1 prio "$l1_gpus"
  wait
else
  l1 env "$last"
  side
  l1 prio "$last"
fi

cd "$R" || exit 1
tar -czf "$OUT/state.tgz" --ignore-failed-read ./*.done ./*.consoles.txt ./corpus.table.md \
  $(ls -d w-*/*/results.json w-*/*/results.csv w-*/*/junit.xml 2>/dev/null)
rm -rf back && mkdir back && cp ./*.txt ./*.md back/ 2>/dev/null
for w in corpus:w-corpus/corpus attacks:w-attacks/attacks env:w-env/cuda-l1 prio:w-prio/cuda-l1 \
  gk:w-gk/cuda-l1; do
  name=${w%%:*} dir=${w#*:}
  [ -f "$dir/results.json" ] && gzip -c "$dir/results.json" > "back/$name.results.json.gz"
  cp "$dir/results.csv" "back/$name.results.csv" 2>/dev/null
done
tar -C back -czf "$OUT/back.tgz" .
grep -h "exit code" ./*/*.console.txt
