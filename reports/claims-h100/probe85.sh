#!/usr/bin/env bash
# level2/85 inside kbench's candidate worker (issue 50: its `Offset increment outside graph
# capture` is unexplained; reports/claims-h100/README.md, rounds 3 and 5): the submission as
# CUDA-L1 published it, but each `except Exception:` that swallows an error first prints it with
# its traceback to the worker's log, so the log says what failed inside its CUDA-graph capture
# under kbench (outside kbench the capture fails in inductor and the generator is left usable:
# probe2.txt). From the repository root after `cargo build --release`, with .gpu/h100.json:
#   OUT=DIR bash reports/claims-h100/probe85.sh      # leaves OUT/probe85.tgz; about two minutes
set -u
P=${P:-/tmp/probe85}
k=target/release/kbench
rm -rf "$P" && mkdir -p "$P/subs/level2"
$k import cuda-l1 .gpu/h100.json "$P/l1" > "$P/import.txt" 2>&1
f=$(ls "$P"/l1/submissions/level2/85_*.py)
python3 - "$f" "$P/subs/level2/$(basename "$f")" <<'PY'
import re
import sys

src = open(sys.argv[1]).read()
said = "import sys, traceback; traceback.print_exc(file=sys.stderr); sys.stderr.flush()"
out, n = re.subn(r"except Exception:\n([ \t]+)", lambda m: f"except Exception:\n{m.group(1)}{said}\n{m.group(1)}", src)
assert n > 0, "no swallowed exception found"
open(sys.argv[2], "w").write(out)
print(f"{n} except clause(s) made to print")
PY
timeout 300 $k eval "$P/subs" --tasks "$P/l1/tasks" --only 2/85 --budget 1 --sandbox require \
  --out "$P/out" > "$P/console.txt" 2>&1
echo "exit code $?" >> "$P/console.txt"
tar -C "$P" -czf "${OUT:?}/probe85.tgz" console.txt subs out/logs out/results.json
tail -n 5 "$P/console.txt"
