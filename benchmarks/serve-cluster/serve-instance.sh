#!/usr/bin/env bash
# One instance of a kbench service run on a cluster: the one step the Slurm job
# (slurm-serve.sbatch) and the Kubernetes Deployment (k8s-serve.yaml) run.
#
#   serve-instance.sh ROOT [kbench serve flags...]
#
# Serves on 0.0.0.0:$PORT (default 0: any free port) as instance NAME (default: the host's name
# and the Slurm task's rank), into ROOT/instances/NAME with the run's seed (SEED_FILE, default
# ROOT/seed) and --resume (a requeued or restarted instance continues its record and answers
# the request ids it judged), and announces its URL in ROOT/endpoints/NAME until it drains
# (ADVERTISE: the host clients reach it by, default the host's name). GPU: the GPU it serves on
# (default: the one Slurm gave the task, CUDA_VISIBLE_DEVICES; none on the CPU). Off loopback the
# service needs a token: KBENCH_TOKEN, else the file ROOT/token. A SIGTERM drains it (new requests
# get a 503, those admitted get 20 s, its record and summary are written), well within Slurm's
# and Kubernetes' grace. KBENCH names the kbench binary (default: kbench on PATH).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 ROOT [kbench serve flags...]" >&2
  exit 2
fi
root=$1
shift
name=${NAME:-$(hostname)-${SLURM_PROCID:-0}}
if [ -z "${KBENCH_TOKEN:-}" ] && [ -s "$root/token" ]; then
  KBENCH_TOKEN=$(cat "$root/token")
  export KBENCH_TOKEN
fi
args=(serve --listen "0.0.0.0:${PORT:-0}" --instance "$name" --out "$root/instances/$name"
  --seed-file "${SEED_FILE:-$root/seed}" --announce "$root/endpoints/$name" --resume)
gpu=${GPU:-${CUDA_VISIBLE_DEVICES:-}}
[[ $gpu =~ ^[0-9]+$ ]] && args+=(--gpus "$gpu")
[ -n "${ADVERTISE:-}" ] && args+=(--advertise "$ADVERTISE")
echo "kbench serve instance $name: starts on $(hostname) (restart ${SLURM_RESTART_COUNT:-0})" >&2
exec "${KBENCH:-kbench}" "${args[@]}" "$@"
