#!/usr/bin/env bash
# CI: the Slurm example as shipped, on a single-node Slurm started here (Debian's slurm-wlm and
# munge, installed when missing; the daemons are stopped on exit). Requests no node can meet
# (CPUs, GPUs) are refused at submission. The bundled CPU example runs as two array tasks
# through benchmarks/shards/slurm-submit.sh; one task is then requeued and another submitted
# again on its own (--only-shards): each resumes its finished shard and merges again. The
# merged run must give the same verdicts as an unsharded run with the same seed, and a shard's
# record edited after its run must be refused by the merge (its MAC). Needs root,
# the project venv and the debug binary that `cargo test` builds (or KBENCH).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export KBENCH=${KBENCH:-$root/target/debug/kbench}
export KBENCH_PYTHON=${KBENCH_PYTHON:-$root/.venv/bin/python}
export KBENCH_CACHE=${KBENCH_CACHE:-$root/target/kbench-test-cache}
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
work=$(mktemp -d /tmp/kbench-slurm.XXXXXX)
host=$(hostname)
export SLURM_CONF=$work/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=kbench-ci
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmdSpoolDir=$work/slurmd
StateSaveLocation=$work/slurmctld
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$work/slurmd" "$work/slurmctld"
# munge's key, log, seed and socket live in the work folder: nothing of the system's is touched.
(umask 077 && dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none)
stop() {
  for d in slurmd slurmctld; do
    [ -f "$work/$d.pid" ] && kill "$(cat "$work/$d.pid")" 2>/dev/null || true
  done
  [ -n "${munge_pid:-}" ] && kill "$munge_pid" 2>/dev/null || true
}
trap stop EXIT
socket=$work/munge.socket
munged --force --socket="$socket" --pid-file="$work/munged.pid" --key-file="$work/munge.key" \
  --log-file="$work/munged.log" --seed-file="$work/munged.seed"
munge_pid=$(cat "$work/munged.pid")
echo "AuthInfo=socket=$socket" >> "$SLURM_CONF"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 30); do sinfo -h -o '%T' 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo

fail() { echo "slurm example: $*" >&2; tail -n 30 "$work"/run/*.log "$work/slurmctld.log" >&2 || true; exit 1; }
flags=(--device cpu --scale small --max-samples 8)
# The unsharded run with the run's seed, to compare with.
mkdir -p "$work/run"
echo 8106604497 > "$work/run/seed"
"$KBENCH" eval benchmarks/example/cpu --seed-file "$work/run/seed" --out "$work/single" "${flags[@]}" \
  > "$work/single.log" 2>&1 || [ $? -eq 1 ] || fail "the unsharded run failed: $(tail -n 5 "$work/single.log")"

# Requests no node can meet are refused at submission, not left pending.
refused() {
  local why=$1; shift
  local o
  if o=$(bash benchmarks/shards/slurm-submit.sh "$@" benchmarks/example/cpu "$work/refused" 2>&1); then
    fail "slurm-submit.sh $* was accepted"
  fi
  [[ $o == *"$why"* ]] || fail "slurm-submit.sh $*: $o"
}
refused "the largest node has" --gpus-per-shard 0 --cpus-per-shard 999
refused "no node offers GPUs" --gpus-per-shard 1
[ -z "$(squeue -h)" ] || fail "a refused submission queued a job"

# The example as shipped: two shards on one CPU each, waiting for the run's gate.
gate=0
bash benchmarks/shards/slurm-submit.sh --shards 2 --gpus-per-shard 0 --cpus-per-shard 1 --time 00:20:00 \
  --wait benchmarks/example/cpu "$work/run" -- "${flags[@]}" || gate=$?
[ "$gate" -le 1 ] || fail "slurm-submit.sh exit $gate"
[ -f "$work/run/merged/results.json" ] || fail "no merged run"
# A requeued task (as after a node failure) resumes its finished shard and merges again.
[ -z "$(squeue -h)" ] || fail "jobs still queued after --wait"
job=$(scontrol show job -o | sed -n 's/^JobId=[0-9]* ArrayJobId=\([0-9]*\) ArrayTaskId=1 .*/\1/p' | head -n 1)
[ -n "$job" ] || fail "the array job is gone from slurmctld"
before=$(stat -c %Y "$work/run/merged/results.json")
sleep 1
scontrol requeue "${job}_1"
scontrol update JobId="${job}_1" StartTime=now
for _ in $(seq 300); do [ -z "$(squeue -h -j "$job")" ] && break; sleep 1; done
[ -z "$(squeue -h -j "$job")" ] || fail "the requeued task did not finish in 300 s"
grep -q 'starts (restart 1)' "$work/run/shard-1.slurm.log" || fail "shard 1 was not requeued"
[ "$(stat -c %Y "$work/run/merged/results.json")" -gt "$before" ] || fail "no merge after the requeue"
# A shard submitted again on its own (as after it failed) keeps the run's shard count and seed.
before=$(stat -c %Y "$work/run/merged/results.json")
sleep 1
bash benchmarks/shards/slurm-submit.sh --shards 2 --gpus-per-shard 0 --cpus-per-shard 1 --time 00:20:00 \
  --only-shards 0 --wait benchmarks/example/cpu "$work/run" >/dev/null || [ $? -eq 1 ] || fail "--only-shards 0 failed"
[ "$(grep -c 'shard 0/2: starts' "$work/run/shard-0.slurm.log")" -eq 2 ] || fail "shard 0 did not run again"
[ "$(stat -c %Y "$work/run/merged/results.json")" -gt "$before" ] || fail "no merge after the rerun"
"$KBENCH_PYTHON" - "$work/single/results.json" "$work/run/merged/results.json" <<'PY'
import json, sys
def verdicts(path):
    record = json.load(open(path))
    return record, {e["file"]: e["verdict"] for e in record["evaluations"]}
(single, a), (merged, b) = verdicts(sys.argv[1]), verdicts(sys.argv[2])
assert a and a == b, (a, b)
assert merged["config"] == single["config"], "settings differ"
assert merged.get("shard") is None and merged["command"][1] == "merge"
assert "--seed-file" in merged["command"] and "unauthenticated" not in merged, merged["command"]
print(f"slurm example: the merged run of 2 shards (one requeued, one resubmitted) matches the single run: {b}")
PY
# A shard's record edited after its run does not authenticate under the run's seed file: the
# merge refuses it, naming the shard, and writes nothing.
cp -r "$work/run/shard-0" "$work/edited"
sed -i 's/"run_id": "/"run_id": "edited-/' "$work/edited/results.json"
if "$KBENCH" merge --seed-file "$work/run/seed" "$work/edited" "$work/run/shard-1" \
  --out "$work/forged" > "$work/forged.log" 2>&1; then
  fail "a shard edited after its run was merged"
fi
grep -q "$work/edited: its results.json has a MAC that does not verify" "$work/forged.log" \
  || fail "the edited shard's refusal: $(cat "$work/forged.log")"
[ ! -e "$work/forged/results.json" ] || fail "a refused merge wrote a run"
echo "slurm example: a shard edited after its run is refused by the merge"
