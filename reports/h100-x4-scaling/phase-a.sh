#!/usr/bin/env bash
# Phase A (run again to resume): the task facts once (all CPUs), then at once: the 250 identities
# on one GPU as two half-runs (GPU 0: even positions, GPU 3: odd), and on two GPUs (1,2), each run
# on 16 host CPUs per GPU, local to its GPU.   OUT=DIR bash reports/h100-x4-scaling/phase-a.sh LIMIT_S
set -u
L=${1:-560}
R=/tmp/x4
mkdir -p "$R" "$OUT"
began=$(date +%s)
[ -d "$R/idsub" ] || python3 benchmarks/identity.py "$R/idsub" > /dev/null
if [ ! -s "$R/cpus" ]; then
  python3 "$(dirname "$0")/cpusets.py" > "$R/cpus"
  { nvidia-smi topo -m; nproc; nvidia-smi; } > "$R/machine.txt" 2>&1
fi
mapfile -t C < "$R/cpus"
echo "cpus: ${C[*]}"
if [ ! -f "$R/facts.done" ]; then
  s=$(date +%s)
  KBENCH_CACHE="$R/cache-facts" target/release/kbench list --meta --python python3 > "$R/facts.console.txt" 2>&1
  echo "exit $? wall $(( $(date +%s) - s )) s" >> "$R/facts.console.txt"
  for n in half0 half1 two; do rm -rf "$R/cache-$n"; cp -r "$R/cache-facts" "$R/cache-$n"; done
  touch "$R/facts.done"
fi
read -r even odd < <(python3 -c "
t=[f'{l}/{n}' for l,m in ((1,100),(2,100),(3,50)) for n in range(1,m+1)]
print(','.join(t[0::2]), ','.join(t[1::2]))")
done_() { grep -qE "^exit (0|1|2) " "$R/$1.console.txt" 2>/dev/null; }
id_run() {  # name cpus gpus [flags]
  local name=$1 cpus=$2 gpus=$3; shift 3
  done_ "$name" && return
  local s=$(date +%s) left=$(( L - ($(date +%s) - began) ))
  [ "$left" -lt 30 ] && return
  KBENCH_CACHE="$R/cache-$name" taskset -c "$cpus" timeout "$left" target/release/kbench eval "$R/idsub" \
    --python python3 --out "$R/$name" --resume --gpus "$gpus" "$@" >> "$R/$name.console.txt" 2>&1
  echo "exit $? wall $(( $(date +%s) - s )) s" >> "$R/$name.console.txt"
}
id_run half0 "${C[0]}" 0 --only "$even" &
id_run half1 "${C[3]}" 3 --only "$odd" &
id_run two "${C[1]},${C[2]}" 1,2 &
wait
cd "$R" && cp ./*.console.txt machine.txt cpus "$OUT/" 2>/dev/null
for d in half0 half1 two; do [ -f "$d/results.json" ] && gzip -c "$d/results.json" > "$OUT/$d.results.json.gz"; done
grep -h "^exit\|^\[" ./*.console.txt | tail -n 12
