#!/usr/bin/env bash
# One call of this report's runs on a one-GPU machine (run again to resume where it stopped):
#   1. doing the work twice (benchmarks/identity.py --twice) on level1/1, 2/76 and 3/10;
#   2. the 250 identities on the one GPU (`--resume`);
#   3. 8 candidates (the task's reference each) on level3/1 and level3/2, as long as time is left
#      (benchmarks/many_candidates.py; this report's run had 220 s for it, in a call of its own).
# Each call leaves back.tgz in OUT: consoles, records, the machine's description.
#   OUT=DIR bash reports/h100-one-gpu/run.sh LIMIT_S
set -u
L=${1:-560}
R=/tmp/one
mkdir -p "$R" "${OUT:?OUT: where back.tgz goes}"
began=$(date +%s)
left() { echo $(( L - ($(date +%s) - began) )); }
done_() { grep -qE "^exit " "$R/$1.console.txt" 2>/dev/null; }
[ -s "$R/machine.txt" ] || { nvidia-smi; nproc; target/release/kbench --version; } > "$R/machine.txt" 2>&1
run() {  # name submission [kbench eval flags]
  local name=$1 sub=$2 s=$(date +%s); shift 2
  done_ "$name" && return
  [ "$(left)" -lt 30 ] && return 1
  KBENCH_CACHE="$R/cache" timeout "$(left)" target/release/kbench eval "$sub" \
    --python python3 --out "$R/$name" --resume "$@" >> "$R/$name.console.txt" 2>&1
  local rc=$?
  echo "call $rc wall $(( $(date +%s) - s )) s" >> "$R/$name.console.txt"
  [ $rc -eq 124 ] && return 1
  echo "exit $rc" >> "$R/$name.console.txt"
}
[ -d "$R/twsub" ] || python3 benchmarks/identity.py "$R/twsub" --twice > /dev/null
[ -d "$R/idsub" ] || python3 benchmarks/identity.py "$R/idsub" > /dev/null
many() {
  [ -f "$R/many.console.txt" ] && return
  [ "$(left)" -lt 60 ] && return 1
  KBENCH_CACHE="$R/cache" python3 benchmarks/many_candidates.py "$R/many" --kbench target/release/kbench \
    --python python3 --limit-s "$(( $(left) - 10 ))" --tasks 3/1,3/2 -- --gpus 0 > "$R/many.console.txt" 2>&1
}
run twice "$R/twsub" --only 1/1,2/76,3/10 && run one "$R/idsub" && many
cd "$R" && rm -rf back && mkdir back && cp ./*.console.txt machine.txt back/
for n in twice one; do [ -f "$n/results.json" ] && gzip -c "$n/results.json" > "back/$n.results.json.gz"; done
[ -f many/out/results.json ] && gzip -c many/out/results.json > back/many.results.json.gz && cp many/calls.json back/many.calls.json
tar -C back -czf "$OUT/back.tgz" .
grep -h "^exit\|^call" ./*.console.txt | tail -n 6
