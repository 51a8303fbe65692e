#!/bin/bash
# Run kbench over a Slurm cluster: a job array with one shard per array task (run-shard.sh);
# whichever task ends last merges the shards into OUT/merged. There is no separate merge job,
# so a requeued or rerun task needs no dependency fixed by hand.
#
#   bash benchmarks/shards/slurm-submit.sh [options] SUBMISSIONS OUT [-- kbench eval flags...]
#
#   --shards N          array tasks, one shard each (default 4)
#   --gpus-per-shard G  GPUs per task (default 1 on a cluster with GPU resources, else 0: then
#                       pass `-- --device cpu`)
#   --cpus-per-shard C  CPUs per task (default 8, or the largest node's count if smaller)
#   --time T            time limit per task (default 04:00:00)
#   --partition P       partition (default: the cluster's)
#   --only-shards LIST  submit only these array indices again (e.g. 2 or 1,3), reusing OUT's seed
#                       and eval flags: reruns a failed shard; the run's shard count stays N
#   --wait              wait for the array, print the merge's report, exit with the run's gate
#
# SUBMISSIONS and OUT must be on a file system every node sees (with working flock). kbench
# must be on PATH on the nodes, or KBENCH its path, with its Python (KBENCH_PYTHON or the
# --python eval flag). The run's seed is drawn once into OUT/seed (kept on a resubmission).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '6,17p' "$0" >&2; exit 2; }
shards=4 gpus= cpus= time=04:00:00 partition= only= wait=
while [ $# -gt 0 ]; do
  case $1 in
    --shards) shards=$2; shift 2 ;;
    --gpus-per-shard) gpus=$2; shift 2 ;;
    --cpus-per-shard) cpus=$2; shift 2 ;;
    --time) time=$2; shift 2 ;;
    --partition) partition=$2; shift 2 ;;
    --only-shards) only=$2; shift 2 ;;
    --wait) wait=1; shift ;;
    -h|--help) usage ;;
    --) break ;;
    -*) echo "slurm-submit.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage
submissions=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
[ "${1:-}" = -- ] && shift
# What the cluster offers, so a request it can never meet fails here rather than pending forever.
node_cpus=$(sinfo -h -o '%c' ${partition:+-p "$partition"} | sort -n | tail -n 1)
node_gres=$(sinfo -h -o '%G' ${partition:+-p "$partition"} | sort -u | tr '\n' ' ')
if [ -z "$gpus" ]; then
  case $node_gres in *gpu*) gpus=1 ;; *) gpus=0 ;; esac
fi
if [ "$gpus" -gt 0 ] && [[ $node_gres != *gpu* ]]; then
  echo "slurm-submit.sh: no node offers GPUs (gres: ${node_gres:-none}): pass --gpus-per-shard 0 and -- --device cpu" >&2
  exit 2
fi
cpus=${cpus:-$(( node_cpus < 8 ? node_cpus : 8 ))}
if [ "$cpus" -gt "$node_cpus" ]; then
  echo "slurm-submit.sh: --cpus-per-shard $cpus: the largest node has $node_cpus CPUs" >&2
  exit 2
fi
mkdir -p "$out"
if [ -n "$only" ]; then
  [ -f "$out/seed" ] || { echo "slurm-submit.sh: --only-shards: $out holds no run (no seed)" >&2; exit 2; }
else
  # One seed for all shards, drawn here unless OUT has one: records hold only its SHA-256.
  [ -f "$out/seed" ] || (umask 077 && od -An -N8 -tu8 /dev/urandom | tr -d ' ' > "$out/seed")
  # The eval flags, NUL-separated so any argument survives.
  if [ $# -gt 0 ]; then printf '%s\0' "$@" > "$out/eval.args"; else : > "$out/eval.args"; fi
fi
options=(--parsable --array="${only:-0-$((shards - 1))}" --output="$out/shard-%a.slurm.log"
  --cpus-per-task="$cpus" --time="$time"
  --export="ALL,SHARDS=$shards,SUBMISSIONS=$submissions,OUT=$out,KBENCH_SHARDS=$here")
[ "$gpus" -gt 0 ] && options+=(--gpus="$gpus")
[ -n "$partition" ] && options+=(--partition="$partition")
if [ -z "$wait" ]; then
  array=$(sbatch "${options[@]}" "$here/slurm-shard.sbatch")
  echo "submitted array job $array ($shards shards); the merged run will be $out/merged (see $out/merge.log)"
  exit 0
fi
rc=0
sbatch --wait "${options[@]}" "$here/slurm-shard.sbatch" >/dev/null || rc=$?
[ -f "$out/merge.log" ] && cat "$out/merge.log"
[ "$rc" -eq 0 ] || { echo "slurm-submit.sh: an array task failed (exit $rc): see $out/shard-*.slurm.log" >&2; exit 2; }
grep -q '^gate: passed' "$out/merge.log"
