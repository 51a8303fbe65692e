#!/usr/bin/env bash
# One call of this session's runs on a 4-GPU machine (run again to resume; each GPU's queue goes
# on where it stopped). 16 host CPUs per GPU, local to it (../h100-x4-scaling/cpusets.py).
#   GPUs 0,1: the 250 identities on two GPUs (one run), then the GPU corpus on them;
#   GPU 2, 3: 8 candidates on each of the 25 tasks at this code (alternate tasks), then the base
#             build (796cc7f) on the tasks the last report's base runs did not finish.
#   BASE=BIN OUT=DIR bash reports/h100-x4-throughput/run.sh LIMIT_S
set -u
L=${1:-560}
R=/tmp/x4
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R" "$OUT"
began=$(date +%s)
cp "${BASE:?BASE: a kbench binary built at 796cc7f}" "$R/kbench-base"
left() { echo $(( L - ($(date +%s) - began) )); }
[ -d "$R/idsub" ] || python3 benchmarks/identity.py "$R/idsub" > /dev/null
if [ ! -s "$R/cpus" ]; then
  python3 "$HERE/../h100-x4-scaling/cpusets.py" > "$R/cpus"
  { nvidia-smi topo -m; nproc; nvidia-smi; target/release/kbench --version; } > "$R/machine.txt" 2>&1
fi
mapfile -t C < "$R/cpus"
if [ ! -f "$R/facts.done" ]; then
  s=$(date +%s)
  KBENCH_CACHE="$R/cache-facts" target/release/kbench list --meta --python python3 > "$R/facts.console.txt" 2>&1
  echo "exit $? wall $(( $(date +%s) - s )) s" >> "$R/facts.console.txt"
  for n in two corpus; do rm -rf "$R/cache-$n"; cp -r "$R/cache-facts" "$R/cache-$n"; done
  touch "$R/facts.done"
fi
done_() { grep -qE "^(exit|done) " "$R/$1.console.txt" 2>/dev/null; }
id_run() {  # name cpus gpus [flags]
  local name=$1 cpus=$2 gpus=$3 s=$(date +%s); shift 3
  done_ "$name" && return
  [ "$(left)" -lt 30 ] && return 1
  KBENCH_CACHE="$R/cache-$name" taskset -c "$cpus" timeout "$(left)" target/release/kbench eval "$R/idsub" \
    --python python3 --out "$R/$name" --resume --gpus "$gpus" "$@" >> "$R/$name.console.txt" 2>&1
  local rc=$?
  echo "call $rc wall $(( $(date +%s) - s )) s" >> "$R/$name.console.txt"
  [ $rc -eq 124 ] && return 1
  echo "exit $rc" >> "$R/$name.console.txt"
}
corpus_run() {  # cpus gpus
  local s=$(date +%s)
  done_ corpus && return
  [ "$(left)" -lt 200 ] && return 1
  KBENCH_CACHE="$R/cache-corpus" KBENCH_WORK="$R/corpus-work" KBENCH_LIMIT_S=$(( $(left) - 10 )) taskset -c "$1" \
    bash benchmarks/gpu_run.sh corpus "$R/corpus" --gpus "$2" >> "$R/corpus.console.txt" 2>&1
  echo "done $? wall $(( $(date +%s) - s )) s" >> "$R/corpus.console.txt"
}
many_run() {  # name kbench gpu tasks
  local s=$(date +%s) resume=
  done_ "$1" && return
  [ "$(left)" -lt 30 ] && return 1
  [ -d "$R/$1/submission" ] && resume=--resume
  # This build's task facts, computed once; the base build computes its own.
  [ "$2" = target/release/kbench ] && [ ! -d "$R/mc-cache-$1" ] && cp -r "$R/cache-facts" "$R/mc-cache-$1"
  KBENCH_CACHE="$R/mc-cache-$1" taskset -c "${C[$3]}" python3 benchmarks/many_candidates.py "$R/$1" --kbench "$2" \
    --python python3 --limit-s "$(left)" --tasks "$4" $resume -- --gpus "$3" >> "$R/$1.console.txt" 2>&1
  local rc=$?
  echo "call $rc wall $(( $(date +%s) - s )) s" >> "$R/$1.console.txt"
  # kbench is stopped at the call's limit; one that ended with time to spare finished.
  [ "$(left)" -lt 20 ] && return 1
  echo "done" >> "$R/$1.console.txt"
}
T=1/1,1/9,1/19,1/23,1/40,1/50,1/63,1/88,1/97,2/1,2/6,2/9,2/14,2/30,2/46,2/66,2/75,2/100,3/1,3/4,3/10,3/20,3/28,3/44,3/49
read -r a0 a1 < <(python3 -c "t='$T'.split(','); print(','.join(t[0::2]), ','.join(t[1::2]))")
{ id_run two "${C[0]},${C[1]}" 0,1 && corpus_run "${C[0]},${C[1]}" 0,1; } &
{ many_run after0 target/release/kbench 2 "$a0" && many_run before0 "$R/kbench-base" 2 2/100,3/10,1/19,1/23,2/9; } &
{ many_run after1 target/release/kbench 3 "$a1" && many_run before1 "$R/kbench-base" 3 3/44,3/49,1/50,3/20,2/46; } &
wait
cd "$R" && mkdir -p back && cp ./*.console.txt machine.txt cpus back/ 2>/dev/null
[ -f two/results.json ] && gzip -c two/results.json > back/two.results.json.gz
for n in after0 after1 before0 before1; do
  [ -f "$n/out/results.json" ] && gzip -c "$n/out/results.json" > "back/many-$n.results.json.gz"
  cp "$n/calls.json" "back/many-$n.calls.json" 2>/dev/null
done
[ -d corpus ] && cp corpus/corpus.table.md corpus/corpus.results.csv back/ 2>/dev/null
tar -C back -czf "$OUT/back.tgz" .
grep -h "^exit\|^call\|^done\|^candidates:" ./*.console.txt | tail -n 20
