#!/usr/bin/env bash
# Issue 54 on one H100: `--sanitize` and `--profile ncu` (docs/checks.md, "compute-sanitizer"
# and "Nsight Compute"), from the repository root after `cargo build --release`, with
# CUDA-L1's H100 release (L1=FILE, default .gpu/h100.json as for reports/claims-h100, else
# shared/corpora/cuda-l1/h100.json), compute-sanitizer and ncu beside nvcc:
#   OUT=DIR bash reports/sanitize-h100/run.sh LIMIT_S
# Runs on one GPU (GPU=N, default 0; SANDBOX=off to tell the sandbox's part in a profiler's
# failure from the tool's), one after another, each an `eval --resume` that a later
# call continues (state under /tmp/sanitize-h100; a fresh machine resumes from .gpu/sanitize-h100.tgz,
# the last call's OUT/state.tgz), until LIMIT_S is spent:
#   planted-off  the three planted memory errors (tests/fixtures/gpu/level1/19_ReLU/memory_*) and
#                their honest control (benchmarks/example/gpu/level1/19_ReLU/honest_cuda.py)
#                without --sanitize: all four pass (the value checks cannot see the errors);
#   planted-on   the same with --sanitize: the three incorrect, each by the tool that sees it
#                (tests/fixtures/gpu/expected-sanitize.toml), the control pass;
#   planted-ncu  the same with --profile ncu, the first (short) look at the profiler: all four
#                pass, each with `profile.ncu` and its kernels (a `skip` says why not); where
#                nothing was profiled, planted-ncu-open runs the same with --sandbox off, and the
#                corpus and sample runs under --profile ncu are left out;
#   sample-both  a CUDA-L1 sample (level1/32, 1/19, 1/22, 2/12, 3/2, 1/1, 2/76) with --sanitize
#                and --profile ncu in one pass: each passing or timed evaluation's kernels and
#                the reference's (results.json `ncu`, results.csv `ncu_*`, report.html's
#                roofline); each option's cost in cost.tsv's columns (sample-on, --sanitize
#                alone, where planted-ncu profiled nothing);
#   corpus-both  the GPU corpus's files that both tools reach and that must pass or be timed
#                (benchmarks/example/gpu, and tests/fixtures/gpu's files expected `pass` or
#                `contract`, the planted errors aside) the same way: every verdict as without
#                them (expected.toml), no honest kernel flagged (corpus-on where planted-ncu
#                profiled nothing). The rest of the corpus is left out, to spend the device
#                time on the files the options are about: it ends `cheat`, `incorrect`,
#                `runtime_error` or `timeout`, where neither tool runs, or `no_kernel` as a
#                cheat (library output, try/except, a process beside) whose own kernel, where
#                it has one, is a copy or decoration;
#   refused-on   tests/fixtures/gpu's honest_shape_refusal.py with --sanitize: its kernel
#                refuses the task's small size, so each tool's trial runs again at the run's
#                size (the evidence says so), and its kernel is checked: pass, no report.
# To OUT: each run's console (its wall time last), results.json.gz, results.csv, report.html,
# the workers' and tools' logs (NAME.logs.tgz), the corpus tables (NAME.table.md) and cost.tsv:
# each evaluation's seconds and the seconds of its sanitizer.* and profile.ncu checks, the cost
# figure beside planted-off's (the same files without the tool).
set -u
end=$(( $(date +%s) + ${1:-560} ))
W=/tmp/sanitize-h100
gpu=${GPU:-0}
k=target/release/kbench
mkdir -p "${OUT:?OUT: where the results go}"
if [ ! -d "$W" ]; then
  mkdir -p "$W"
  [ -f .gpu/sanitize-h100.tgz ] && tar -C "$W" -xzf .gpu/sanitize-h100.tgz
fi
# The tools beside nvcc when they are not on PATH.
command -v ncu >/dev/null && command -v compute-sanitizer >/dev/null ||
  export PATH=$PATH:$(dirname "$(command -v nvcc)")
{ nvidia-smi; nproc; $k --version; git rev-parse HEAD; command -v compute-sanitizer ncu; ncu --version
  compute-sanitizer --version; $k doctor; } > "$OUT/machine.txt" 2>&1
tree() {  # NAME ROOT FILE... : a submission tree of FILEs (paths under ROOT)
  local name=$1 root=$2
  shift 2
  for f in "$@"; do
    [ -f "$W/$name/$f" ] || { mkdir -p "$W/$name/$(dirname "$f")"; cp "$root/$f" "$W/$name/$f"; }
  done
}
R=level1/19_ReLU
tree planted tests/fixtures/gpu $R/memory_oob_scratch_write.py $R/memory_shared_race.py \
  $R/memory_uninitialized_read.py
tree planted benchmarks/example/gpu $R/honest_cuda.py
tree refused tests/fixtures/gpu $R/honest_shape_refusal.py
# The corpus's files that must pass or be timed (the expected tables' `pass` and `contract`).
grep -hE '^"' tests/fixtures/gpu/expected.toml | grep -v '19_ReLU/memory_' |
  grep -E 'expected = "(pass|contract)"' > "$W/corpus.toml"
tree corpus benchmarks/example/gpu $(cd benchmarks/example/gpu && find . -name '*.py' | sed 's|^\./||')
tree corpus tests/fixtures/gpu $(cut -d'"' -f2 "$W/corpus.toml")
l1=${L1:-.gpu/h100.json}
[ -f "$l1" ] || l1=shared/corpora/cuda-l1/h100.json
[ -d "$W/cl1" ] || $k import cuda-l1 "$l1" "$W/cl1" > "$W/import.txt" 2>&1
run() {  # NAME TREE [flags]: one eval, done once it ends within its limit (exit code 0 or 1)
  local name=$1 dir=$2
  shift 2
  local left=$(( end - $(date +%s) - 30 ))
  [ -f "$W/$name.done" ] || [ "$left" -lt 60 ] && return
  local s=$(date +%s)
  timeout "$left" $k eval "$dir" "$@" --out "$W/$name" --resume --gpus "$gpu" --budget 1 \
    --sandbox "${SANDBOX:-require}" >> "$W/$name.console.txt" 2>&1
  local rc=$?
  echo "exit code $rc, wall time $(( $(date +%s) - s )) s" >> "$W/$name.console.txt"
  [ "$rc" -le 1 ] && touch "$W/$name.done"
}
sample=(--tasks "$W/cl1/tasks" --only 1/32,1/19,1/22,2/12,3/2,1/1,2/76)
run planted-off "$W/planted"
run planted-on "$W/planted" --sanitize
# The profiler's first look, short deadlines (a tool that cannot reach its target must not
# hold the GPU for long): where it profiled nothing, the same without the sandbox (the planted
# files are the project's own) tells the sandbox's part, and the longer --profile runs are left.
run planted-ncu "$W/planted" --profile ncu --timeout-call 30 --timeout-load 120
profiled() {  # NAME: whether any evaluation of the run holds the tool's kernels
  python3 -c 'import json, sys; sys.exit(not any(e.get("ncu") for e in json.load(open(sys.argv[1]))["evaluations"]))' \
    "$W/$1/results.json" 2>/dev/null
}
profiled planted-ncu || SANDBOX=off run planted-ncu-open "$W/planted" --profile ncu --timeout-call 30 --timeout-load 120
# Both options in one pass over the corpus and the sample: each check's seconds tell their costs.
if profiled planted-ncu; then
  run sample-both "$W/cl1/submissions" "${sample[@]}" --sanitize --profile ncu
  run corpus-both "$W/corpus" --sanitize --profile ncu
else
  run sample-on "$W/cl1/submissions" "${sample[@]}" --sanitize
  run corpus-on "$W/corpus" --sanitize
fi
run refused-on "$W/refused" --sanitize

# The tables: the expected verdicts of the files each run evaluated.
t=benchmarks/corpus_table.py
grep -E "19_ReLU/memory_|^\"level1/19_ReLU/honest_cuda.py\"" tests/fixtures/gpu/expected.toml \
  benchmarks/example/gpu/expected.toml -h > "$W/planted-off.toml"
grep -h "^\"level1/19_ReLU/honest_cuda.py\"" benchmarks/example/gpu/expected.toml > "$W/control.toml"
table() {  # NAME TOML...
  local name=$1
  shift
  [ -f "$W/$name/results.json" ] && python3 $t "$W/$name/results.json" "$@" > "$OUT/$name.table.md"
}
table planted-off "$W/planted-off.toml"
table planted-on tests/fixtures/gpu/expected-sanitize.toml "$W/control.toml"
table planted-ncu "$W/planted-off.toml"
table planted-ncu-open "$W/planted-off.toml"
table corpus-on benchmarks/example/gpu/expected.toml "$W/corpus.toml"
table corpus-both benchmarks/example/gpu/expected.toml "$W/corpus.toml"
grep -h "^\"level1/19_ReLU/honest_shape_refusal.py\"" tests/fixtures/gpu/expected.toml > "$W/refused.toml"
table refused-on "$W/refused.toml"
for name in planted-off planted-on planted-ncu planted-ncu-open corpus-on corpus-both sample-on sample-both refused-on; do
  d=$W/$name
  cp "$d.console.txt" "$OUT/" 2>/dev/null
  [ -f "$d/results.json" ] || continue
  gzip -c "$d/results.json" > "$OUT/$name.results.json.gz"
  cp "$d/results.csv" "$OUT/$name.results.csv" 2>/dev/null
  cp "$d/report.html" "$OUT/$name.report.html" 2>/dev/null
  tar -C "$d" -czf "$OUT/$name.logs.tgz" logs 2>/dev/null
done
# The cost figure: each evaluation's seconds, and its tools' seconds.
python3 - "$W" > "$OUT/cost.tsv" <<'COST'
import json, sys
from pathlib import Path
print("run\ttask\tfile\tverdict\tseconds\tsanitizer_s\tncu_s")
for d in sorted(Path(sys.argv[1]).iterdir()):
    record = d / "results.json"
    if not record.is_file():
        continue
    for e in json.loads(record.read_text())["evaluations"]:
        checks = e.get("checks", [])
        tool = lambda prefix: sum(c.get("seconds", 0.0) for c in checks if c["name"].startswith(prefix))
        task = f"{e['task']['level']}/{e['task']['number']}"
        print(f"{d.name}\t{task}\t{e['file']}\t{e['verdict']}\t{e['seconds']:.1f}\t{tool('sanitizer.'):.1f}\t{tool('profile.ncu'):.1f}")
COST
cd "$W" || exit 1
tar -czf "$OUT/state.tgz" --ignore-failed-read ./*.done ./*.console.txt \
  $(ls -d ./*/results.json ./*/results.csv ./*/junit.xml 2>/dev/null)
tail -n 3 "$OUT"/*.table.md 2>/dev/null
grep -h "exit code" ./*.console.txt
