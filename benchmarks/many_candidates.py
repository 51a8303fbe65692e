"""Many candidates per task: K candidates on each of T tasks, evaluated by kbench, in
candidates per hour.

    python3 benchmarks/many_candidates.py WORK [--kbench BIN] [--python PY] [--tasks 1/19,2/14]
        [--candidates 8] [--tasks-dir DIR] [--limit-s S] [--resume] [-- KBENCH_EVAL_FLAGS...]

Writes WORK/submission/level<L>/<task>/cand<k>.py: the task's reference as ModelNew (as
benchmarks/identity.py does), each candidate with a comment of its own, so each is a
submission of its own (its own hash, build and record); runs `kbench eval` on it into
WORK/out (an existing WORK/submission and WORK/out are removed first, unless --resume: then kbench resumes the run in
WORK/out). --limit-s stops kbench (SIGTERM, as `timeout` does) after S seconds; its reports so
far are kept. Prints the candidates per hour by kbench's wall clock (start to exit, task facts
included, summed over the calls of a resumed run), by the slot's busy time (the evaluations'
own seconds summed: one slot, one lane), and the phases summed over the evaluations from
results.json.

The default tasks are 25 of levels 1-3 (the worker-profile set and level2/1). Run it with the
binary before and after a change on the same machine, one after the other.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

TASKS = "1/1,1/9,1/19,1/23,1/40,1/50,1/63,1/88,1/97,2/1,2/6,2/9,2/14,2/30,2/46,2/66,2/75,2/100,3/1,3/4,3/10,3/20,3/28,3/44,3/49"
PHASES = (
    "gpu_wait_s",
    "worker_startup_s",
    "load_s",
    "correctness_s",
    "trials_candidate_s",
    "trials_reference_s",
    "timing_s",
    "warmup_s",
    "output_checks_s",
    "process_check_s",
    "after_timing_s",
)


def task_file(tasks_dir, spec):
    """The task file of ``L/N`` in the tree."""
    level, number = spec.split("/")
    found = sorted((tasks_dir / f"level{level}").glob(f"{int(number)}_*.py"))
    if not found:
        sys.exit(f"no task {spec} in {tasks_dir}")
    return found[0]


def write_submission(root, tasks_dir, specs, candidates):
    """K copies of each task's reference as ModelNew, in a folder of candidates per task."""
    for spec in specs:
        task = task_file(tasks_dir, spec)
        folder = root / task.parent.name / task.stem
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(candidates):
            (folder / f"cand{k}.py").write_text(f"{task.read_text()}\n\n# candidate {k}\nModelNew = Model\n")


def summary(record, wall_s):
    """What a run gave: candidates per hour and the phases summed over its evaluations."""
    evals = record["evaluations"]
    busy = sum(e.get("seconds", 0.0) for e in evals)
    lines = [
        f"candidates: {len(evals)}",
        f"kbench wall time: {wall_s:.1f} s",
        f"candidates per hour (kbench's wall time): {3600 * len(evals) / wall_s:.0f}",
        f"candidates per hour (the slot's busy time, {busy:.1f} s): {3600 * len(evals) / max(busy, 1e-9):.0f}",
    ]
    verdicts = {}
    for e in evals:
        verdicts[e["verdict"]] = verdicts.get(e["verdict"], 0) + 1
    lines.append("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
    labels = {}
    for e in evals:
        label = (e.get("timing") or {}).get("label") or "untimed"
        labels[label] = labels.get(label, 0) + 1
    lines.append("labels: " + ", ".join(f"{v} {n}" for v, n in sorted(labels.items())))
    lines.append(f"evaluations' own time: {busy:.1f} s ({busy / max(len(evals), 1):.2f} s each)")
    for phase in PHASES:
        total = sum((e.get("phases") or {}).get(phase) or 0.0 for e in evals)
        lines.append(f"  {phase}: {total:.1f} s ({total / max(len(evals), 1):.2f} s each)")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path)
    parser.add_argument("--kbench", default="target/release/kbench")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--tasks-dir", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--limit-s", type=float, default=None)
    parser.add_argument("--resume", action="store_true")
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(flags) - (1 if flags else 0)])
    specs = args.tasks.split(",")
    submission, out, calls = args.work / "submission", args.work / "out", args.work / "calls.json"
    if args.resume:
        flags = ["--resume", *flags]
    else:
        for path in (submission, out):
            shutil.rmtree(path, ignore_errors=True)
        calls.unlink(missing_ok=True)
        write_submission(submission, args.tasks_dir, specs, args.candidates)
    command = [args.kbench, "eval", str(submission), "--python", args.python, "--out", str(out), *flags]
    print("$", " ".join(command), flush=True)
    started = time.monotonic()
    kbench = subprocess.Popen(command)
    try:
        kbench.wait(timeout=args.limit_s)
    except subprocess.TimeoutExpired:
        kbench.terminate()
        kbench.wait()
    walls = json.loads(calls.read_text()) if calls.exists() else []
    walls.append(time.monotonic() - started)
    calls.write_text(json.dumps(walls))
    wall_s = sum(walls)
    results = out / "results.json"
    if not results.exists():
        sys.exit(f"kbench exited {kbench.returncode} without {results}")
    print(summary(json.loads(results.read_text()), wall_s))


if __name__ == "__main__":
    main()
