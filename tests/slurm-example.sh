#!/usr/bin/env bash
# CI: the Slurm examples as shipped, on a single-node Slurm started here (Debian's slurm-wlm and
# munge, installed when missing; the daemons are stopped on exit): the sharded run, then the
# service's instances (`bash tests/slurm-example.sh serve` runs the second alone).
#
# Shards: requests no node can meet (CPUs, GPUs) are refused at submission. The bundled CPU
# example runs as two array tasks
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

fail() { echo "slurm example: $*" >&2; tail -n 30 "$work"/run/*.log "$work"/serve*.log "$work/slurmctld.log" >&2 || true; exit 1; }
# The sharded run as shipped (benchmarks/shards/).
shards_example() {
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
}

# The service's instances as shipped (benchmarks/serve-cluster/): two instances of one run as
# two tasks of one Slurm job, a mixed stream (honest, wrong, crashing, hanging) sent through the
# client, which finds them through their announcements; one instance killed (SIGKILL) mid-stream.
# Every request must be answered exactly once, the merged record must hold each request once,
# and its verdicts must equal an eval of the same files with the same seed.
serve_example() {
  local sroot=$work/serve
  local fixtures=$root/tests/fixtures/cpu/level1/19_ReLU
  local sflags=(--device cpu --scale small --trials 2 --timeout-call 10 --max-samples 8)
  KBENCH_SERVE=$root/benchmarks/serve-cluster sbatch --ntasks=2 --cpus-per-task=1 \
    --time=00:30:00 --output="$work/serve.slurm.log" \
    benchmarks/serve-cluster/slurm-serve.sbatch "$sroot" --only 1/19 "${sflags[@]}" >/dev/null
  for _ in $(seq 600); do [ "$(ls "$sroot/endpoints" 2>/dev/null | wc -l)" -eq 2 ] && break; sleep 1; done
  [ "$(ls "$sroot/endpoints" | wc -l)" -eq 2 ] || fail "the two instances did not announce themselves in 600 s"
  local victim
  victim=$(ls "$sroot/endpoints" | sort | tail -n 1)
  PYTHONPATH=$root/clients/python/src "$KBENCH_PYTHON" - "$sroot" "$fixtures" "$victim" \
    > "$work/serve.stream.json" 2> "$work/serve.client.log" <<'PY' || fail "the stream: $(tail -n 20 "$work/serve.client.log")"
import json, os, signal, sys, threading
from concurrent.futures import ThreadPoolExecutor
from kbench_client import Client

sroot, fixtures, victim = sys.argv[1:4]
token = open(f"{sroot}/token").read().strip()
client = Client.from_announced(f"{sroot}/endpoints", token=token, retry_for=900)
names = ["honest_torch.py", "wrong_output.py", "cheat_exit_early.py", "host_infinite_loop.py"] * 3
done, lock, killed = [], threading.Lock(), threading.Event()

def kill_instance(name):
    """SIGKILL the kbench serve of instance `name` (found by its command line, as pkill -f would)."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"--instance" in argv and name.encode() in argv:
            os.kill(int(pid), signal.SIGKILL)
            found += 1
    assert found == 1, f"{found} processes of instance {name}"

def one(n):
    result = client.evaluate("1/19", open(f"{fixtures}/{names[n]}").read(), id=f"ci-{n}")
    with lock:
        done.append(n)
        if len(done) == 3 and not killed.is_set():
            # Mid-stream: one instance killed outright (no drain), requests in flight on it.
            kill_instance(victim)
            killed.set()
    return result

with ThreadPoolExecutor(4) as pool:
    results = list(pool.map(one, range(len(names))))
assert killed.is_set()
client.shutdown()
print(json.dumps({r.id: {"name": names[n], "verdict": r.verdict, "endpoint": r.endpoint, "replayed": r.replayed,
                         "served": r.served} for n, r in enumerate(results)}))
PY
  for _ in $(seq 120); do [ -z "$(squeue -h -n kbench-serve)" ] && break; sleep 1; done
  [ -z "$(squeue -h -n kbench-serve)" ] || fail "the service job did not end after its shutdown"
  local rc=0
  "$KBENCH" merge --seed-file "$sroot/seed" "$sroot"/instances/* --out "$sroot/merged" \
    > "$work/serve.merge.log" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || fail "the instances' merge: $(tail -n 5 "$work/serve.merge.log")"
  # The same files evaluated by eval, with the run's seed and flags.
  mkdir -p "$work/serve-eval/level1/19_ReLU"
  cp "$fixtures"/{honest_torch,wrong_output,cheat_exit_early,host_infinite_loop}.py "$work/serve-eval/level1/19_ReLU/"
  "$KBENCH" eval "$work/serve-eval" --seed-file "$sroot/seed" --out "$work/serve-eval.out" "${sflags[@]}" \
    > "$work/serve-eval.log" 2>&1 || [ $? -eq 1 ] || fail "the eval of the stream's files: $(tail -n 5 "$work/serve-eval.log")"
  "$KBENCH_PYTHON" - "$work/serve.stream.json" "$sroot/merged/results.json" "$work/serve-eval.out/results.json" \
    "$victim" <<'PY' || fail "the service's run"
import collections, json, sys
stream, merged, single = (json.load(open(p)) for p in sys.argv[1:4])
victim = sys.argv[4]
assert len(stream) == 12, sorted(stream)
ids = collections.Counter(e["served"]["id"] for e in merged["evaluations"])
assert ids == collections.Counter(stream.keys()), f"the merged record holds {ids}, the stream {sorted(stream)}"
by_sha = {e["sha256"]: e["verdict"] for e in single["evaluations"]}
for e in merged["evaluations"]:
    assert e["verdict"] == by_sha[e["sha256"]], (e["file"], e["verdict"], by_sha[e["sha256"]])
    assert e["verdict"] == stream[e["served"]["id"]]["verdict"], e["file"]
    assert e["served"]["node"] and e["served"]["instance"], e["served"]
assert merged.get("instance") is None and merged["command"][1] == "merge"
after = [r for r in stream.values() if r["served"]["instance"] != victim]
print(f"slurm example: 12 requests over 2 instances, {victim} killed mid-stream: each answered once "
      f"({len(after)} by the survivor, {sum(r['replayed'] for r in stream.values())} replayed), "
      f"the merged record holds each once, verdicts as eval's: {sorted(set(by_sha.values()))}")
PY
}

case ${1:-all} in
  all) shards_example; serve_example ;;
  shards) shards_example ;;
  serve) serve_example ;;
  *) fail "unknown part $1: all, shards or serve" ;;
esac
