#!/usr/bin/env bash
# Phase B (run again to resume): 8 candidates on each of the 25 tasks: GPU 3 this build (all 25),
# GPUs 0,1,2 the base build (796cc7f), a third of the tasks each; 16 host CPUs per GPU (the CPU
# sets phase A chose).   BASE=BIN OUT=DIR bash reports/h100-x4-scaling/phase-b.sh LIMIT_S
set -u
L=${1:-560}
R=/tmp/x4
mkdir -p "$R" "$OUT"
began=$(date +%s)
cp "${BASE:?BASE: a kbench binary built at 796cc7f}" "$R/kbench-base"
mapfile -t C < "$R/cpus"
T=1/1,1/9,1/19,1/23,1/40,1/50,1/63,1/88,1/97,2/1,2/6,2/9,2/14,2/30,2/46,2/66,2/75,2/100,3/1,3/4,3/10,3/20,3/28,3/44,3/49
read -r t0 t1 t2 < <(python3 -c "t='$T'.split(','); print(*(','.join(t[i::3]) for i in range(3)))")
many_run() {  # name kbench gpu tasks
  local s=$(date +%s) left=$(( L - ($(date +%s) - began) )) resume=
  [ "$left" -lt 30 ] && return
  [ -d "$R/$1/submission" ] && resume=--resume
  KBENCH_CACHE="$R/mc-cache-$1" taskset -c "${C[$3]}" python3 benchmarks/many_candidates.py "$R/$1" --kbench "$2" \
    --python python3 --limit-s "$left" --tasks "$4" $resume -- --gpus "$3" >> "$R/$1.console.txt" 2>&1
  echo "call $? wall $(( $(date +%s) - s )) s" >> "$R/$1.console.txt"
}
many_run after target/release/kbench 3 "$T" &
many_run before0 "$R/kbench-base" 0 "$t0" &
many_run before1 "$R/kbench-base" 1 "$t1" &
many_run before2 "$R/kbench-base" 2 "$t2" &
wait
cd "$R" && for n in after before0 before1 before2; do
  cp "$n.console.txt" "$OUT/many-$n.console.txt"; [ -f "$n/out/results.json" ] && gzip -c "$n/out/results.json" > "$OUT/many-$n.results.json.gz"
  cp "$n/calls.json" "$OUT/many-$n.calls.json" 2>/dev/null
done
grep -h "^candidates:\|^call" "$R"/after.console.txt "$R"/before*.console.txt
