#!/usr/bin/env bash
# One shard of a sharded kbench run, then the merge if it was the last to finish: the one step
# the Slurm array (slurm-shard.sbatch) and the Kubernetes Indexed Job (k8s-shards.yaml) run.
#
#   run-shard.sh INDEX COUNT SUBMISSIONS OUT [kbench eval flags...]
#
# Evaluates `--shard INDEX/COUNT` into OUT/shard-INDEX with the run's seed (SEED_FILE, default
# OUT/seed) and --resume, so a requeued, preempted or retried shard continues where it stopped.
# Then, under a lock on OUT/merge.lock, `kbench merge --if-complete --replace --seed-file` joins
# every shard into OUT/merged once all have finished (each shard's results.json must carry a MAC
# under the seed file's key, so a record edited on the shared volume is refused): whichever shard ends last (a rerun one included)
# writes the merged run, and OUT/merge.log holds its report, ending with the run's gate
# ("gate: passed" or "gate: failed ..."). Until then OUT/merge.log says which shards it waits for.
#
# Exit 0: the shard finished (exit 1 of its eval is the gate's judgement of its kernels, left to
# the merge). Otherwise kbench failed, in the eval (its code) or in a merge of finished shards
# (2, with OUT/merge.log saying why). KBENCH names the kbench binary (default: kbench on PATH).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 INDEX COUNT SUBMISSIONS OUT [kbench eval flags...]" >&2
  exit 2
fi
index=$1 count=$2 submissions=$3 out=$4
shift 4
kbench=${KBENCH:-kbench}
echo "kbench shard $index/$count: starts (restart ${SLURM_RESTART_COUNT:-0}) on $(hostname)" >&2
seed_file=${SEED_FILE:-$out/seed}
rc=0
"$kbench" eval "$submissions" --shard "$index/$count" --seed-file "$seed_file" \
  --out "$out/shard-$index" --resume "$@" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
runs=()
for ((i = 0; i < count; i++)); do runs+=("$out/shard-$i"); done
exec 9>"$out/merge.lock"
flock 9
rc=0
"$kbench" merge --if-complete --replace --seed-file "$seed_file" "${runs[@]}" --out "$out/merged" \
  > "$out/merge.log" 2>&1 || rc=$?
if [ "$rc" -gt 1 ]; then
  echo "kbench shard $index/$count: the merge failed (exit $rc): $out/merge.log" >&2
  exit "$rc"
fi
echo "kbench shard $index/$count: done; $(tail -n 1 "$out/merge.log")" >&2
