#!/usr/bin/env bash
# The GPU runs whose results are committed under reports/: run on a machine with an NVIDIA GPU,
# torch and nvcc, from the repository root, after `cargo build --release`.
#
#   bash benchmarks/gpu_run.sh corpus RESULTS_DIR     # honest CUDA kernels (benchmarks/example/gpu)
#                                                     # and the GPU adversarial corpus: cheats,
#                                                     # honest kernels, faults (tests/fixtures/gpu)
#   bash benchmarks/gpu_run.sh identity RESULTS_DIR [kbench eval flags...]
#                                                     # each task's reference as its own submission
#   bash benchmarks/gpu_run.sh attacks RESULTS_DIR [flags...]
#                                                     # the sandbox and in-process attacks of
#                                                     # tests/fixtures/cpu (level1/19_ReLU/cheat_*)
#                                                     # and their honest control, on the GPU (the
#                                                     # libc-thread attacks write host memory: CPU only)
#   bash benchmarks/gpu_run.sh cuda-l1 RESULTS_DIR TREE [flags...]
#                                                     # a `kbench import cuda-l1` tree: its
#                                                     # submissions against its own references,
#                                                     # with its published.csv
#
# Writes to RESULTS_DIR the run's console output with its wall time, its results.csv, and a
# tarball of results.json, junit.xml and the workers' logs. In corpus mode also corpus.table.md:
# every file's verdict against the expected tables (benchmarks/corpus_table.py), and the script
# exits 1 when a file is not as expected. KBENCH_LIMIT_S bounds the run (the reports written so
# far are kept; --resume continues). kbench only reads the GPU's state.
set -euo pipefail
what=$1 results=$2
shift 2
mkdir -p "$results"
kbench=target/release/kbench
work=${KBENCH_WORK:-/tmp/kbench-gpu-run}
python=${KBENCH_PYTHON:-python3}
case $what in
  corpus) dir=$work/corpus-submission; rm -rf "$dir"; mkdir -p "$dir"; cp -r benchmarks/example/gpu/. tests/fixtures/gpu/. "$dir/" ;;
  identity) dir=$work/identity-submission; "$python" benchmarks/identity.py "$dir" >/dev/null ;;
  attacks) dir=$work/attacks-submission; rm -rf "$dir"; mkdir -p "$dir/level1/19_ReLU"
    for f in read_parent_memory kill_reference impersonate_reference outlive_run rewrite_worker_code \
      fake_kernel forge_times_gc forge_reply time_global work_after_the_call seed_precompute \
      plant_links_in_build linger_take_next_source slow_reference_processes; do
      cp "tests/fixtures/cpu/level1/19_ReLU/cheat_$f.py" "$dir/level1/19_ReLU/"
    done
    for f in wrong_list_output wrong_sparse_output \
      wrong_neg_bit_output honest_torch cheat_return_input; do
      cp "tests/fixtures/cpu/level1/19_ReLU/$f.py" "$dir/level1/19_ReLU/"
    done ;;
  cuda-l1) tree=$(realpath "$1"); shift; dir=$tree/submissions
    set -- --tasks "$tree/tasks" --published "$tree/published.csv" "$@" ;;
  *) echo "usage: $0 corpus|identity|attacks|cuda-l1 RESULTS_DIR [TREE] [flags]" >&2; exit 2 ;;
esac
"$kbench" doctor --python "$python" > "$results/doctor.txt" 2>&1 || true
start=$(date +%s)
set +e
timeout "${KBENCH_LIMIT_S:-0}" "$kbench" eval "$dir" --python "$python" --out "$work/$what" --resume "$@" \
  > "$results/$what.console.txt" 2>&1
code=$?
set -e
echo "exit code $code, wall time $(( $(date +%s) - start )) s" >> "$results/$what.console.txt"
cp "$work/$what/results.csv" "$results/$what.results.csv"
tar -C "$work/$what" -czf "$results/$what.tar.gz" results.json junit.xml logs
tail -n 30 "$results/$what.console.txt"
if [ "$what" = corpus ]; then
  set +e
  "$python" benchmarks/corpus_table.py "$work/$what/results.json" \
    benchmarks/example/gpu/expected.toml tests/fixtures/gpu/expected.toml > "$results/corpus.table.md"
  table=$?
  set -e
  tail -n 1 "$results/corpus.table.md"
  exit "$table"
fi
