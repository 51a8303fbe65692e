"""Candidates per hour through `kbench serve` against one-candidate `kbench eval` calls of the
same work, and the time from request to reply of a level-1 kernel whose build is cached.

    python3 benchmarks/serve_bench.py --submissions TREE/submissions --tasks TREE/tasks \
        --out DIR [--task-count 25] [--candidates 8] [--clients 4] [--kbench target/release/kbench] \
        [--cached-repeats 10] [--eval-sample K] [--skip-eval] [-- EXTRA KBENCH FLAGS]

TREE is a mirrored layout (`levelL/N_Name.py` or `levelL/N_Name/*.py`, e.g. `kbench import`'s
OUT/submissions with its OUT/tasks). TASK_COUNT tasks with candidates are taken round robin over
the levels; each gets CANDIDATES candidates, its files in turn. Every candidate is made unique per
arm (a trailing comment), so both arms build every one: no arm reads the other's builds. The serve
arm counts from the service's start (probe and task facts included) to its last reply, CLIENTS
clients sending at once; the eval arm runs one `kbench eval FILE --task L/N` per candidate, one
after another, as a loop that calls eval per candidate does (with --eval-sample K, K of them
evenly spaced, whose mean time per call gives the arm's rate). Then CACHED_REPEATS requests, one at
a time, send the first level-1 candidate again (its build cached): their median time to reply.
Writes DIR/serve_bench.json and prints a Markdown summary; verdicts that differ between the arms
are listed (timing-dependent ones, e.g. a timeout near its limit, can).
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from kbench_client import Client, ServiceError  # noqa: E402


def candidates_by_task(submissions: Path) -> dict[tuple[int, int, str], list[Path]]:
    """(level, number, task name) -> its candidate files, in name order."""
    found: dict[tuple[int, int, str], list[Path]] = {}
    for level_dir in sorted(submissions.glob("level*")):
        level = int(level_dir.name.removeprefix("level"))
        for entry in sorted(level_dir.iterdir()):
            name = entry.name.removesuffix(".py")
            number = name.split("_", 1)[0]
            if not number.isdigit():
                continue
            files = sorted(entry.glob("*.py")) if entry.is_dir() else [entry]
            if files:
                found[(level, int(number), name)] = files
    return found


def choose(found: dict, count: int) -> list:
    """`count` tasks round robin over the levels, each level's in order."""
    by_level: dict[int, list] = {}
    for key in sorted(found):
        by_level.setdefault(key[0], []).append(key)
    chosen = []
    while len(chosen) < count and any(by_level.values()):
        for level in sorted(by_level):
            if by_level[level] and len(chosen) < count:
                chosen.append(by_level[level].pop(0))
    return chosen


def work(found: dict, tasks: list, per_task: int) -> list[dict]:
    """The candidates, interleaved over the tasks as a stream of requests would be."""
    items = []
    for i in range(per_task):
        for key in tasks:
            files = found[key]
            source = files[i % len(files)].read_text()
            items.append({"level": key[0], "number": key[1], "name": key[2], "index": i, "source": source})
    return items


def unique(source: str, arm: str, n: int) -> str:
    return f"{source}\n# serve_bench {arm} candidate {n}\n"


def eval_arm(args, items: list[dict], extra: list[str]) -> dict:
    """One `kbench eval` per candidate, one after another: every candidate, or with
    --eval-sample K, K of them evenly spaced (their mean time per call stands for all). Each
    call's time and verdict are kept in its folder, so a later call of this script continues
    where --limit-s stopped it."""
    files = args.out / "eval-files"
    files.mkdir(parents=True, exist_ok=True)
    count = min(args.eval_sample or len(items), len(items))
    indices = sorted({round(k * len(items) / count) for k in range(count)})
    verdicts: list = [None] * len(items)
    seconds: list[float] = []
    started = time.monotonic()
    for n in indices:
        item = items[n]
        out = args.out / "eval-runs" / f"{n:04d}"
        kept = out / "call.json"
        if not kept.exists():
            if args.limit_s and time.monotonic() - started > args.limit_s:
                continue
            path = files / f"{n:04d}_{item['name']}.py"
            path.write_text(unique(item["source"], "eval", n))
            shutil.rmtree(out, ignore_errors=True)
            sent = time.monotonic()
            subprocess.run(
                [args.kbench, "eval", str(path), "--task", f"{item['level']}/{item['number']}", "--tasks", str(args.tasks), "--out", str(out), *extra],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            try:
                record = json.loads((out / "results.json").read_text())
                verdict = record["evaluations"][0]["verdict"]
            except (OSError, ValueError, IndexError, KeyError):
                verdict = "kbench_failed"
            kept.write_text(json.dumps({"seconds": time.monotonic() - sent, "verdict": verdict}))
        call = json.loads(kept.read_text())
        verdicts[n] = call["verdict"]
        seconds.append(call["seconds"])
    return {
        "calls": len(seconds),
        "of": len(indices),
        "seconds": sum(seconds),
        "candidates_per_hour": len(seconds) * 3600 / sum(seconds) if seconds else None,
        "verdicts": verdicts,
    }


def serve_arm(args, items: list[dict], tasks: list, extra: list[str]) -> dict:
    only = ",".join(f"{level}/{number}" for level, number, _ in tasks)
    shutil.rmtree(args.out / "serve-run", ignore_errors=True)
    started = time.monotonic()
    service = subprocess.Popen(
        [args.kbench, "serve", "--listen", "127.0.0.1:0", "--tasks", str(args.tasks), "--only", only, "--out", str(args.out / "serve-run"), "--queue", str(max(64, len(items))), *extra],
        stdout=subprocess.PIPE,
        stderr=open(args.out / "serve.log", "w"),
        text=True,
    )
    url = service.stdout.readline().strip()
    if not url.startswith("http"):
        sys.exit(f"kbench serve did not start: see {args.out / 'serve.log'}")
    ready = time.monotonic() - started
    client = Client(url, timeout=7200)
    todo: queue.Queue = queue.Queue()
    for n, item in enumerate(items):
        todo.put(n)
    verdicts: list = [None] * len(items)
    latency: list = [None] * len(items)

    def send():
        while not (args.limit_s and time.monotonic() - started > args.limit_s):
            try:
                n = todo.get_nowait()
            except queue.Empty:
                return
            item = items[n]
            sent = time.monotonic()
            try:
                result = client.evaluate(f"{item['level']}/{item['number']}", unique(item["source"], "serve", n))
                verdicts[n] = result.verdict
            except ServiceError as e:
                verdicts[n] = f"refused {e.status}"
            latency[n] = time.monotonic() - sent

    threads = [threading.Thread(target=send) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    answered = sum(v is not None for v in verdicts)
    cached = []
    first_l1 = next((n for n, item in enumerate(items) if item["level"] == 1), None)
    if first_l1 is not None:
        item = items[first_l1]
        for _ in range(args.cached_repeats):
            sent = time.monotonic()
            client.evaluate(f"{item['level']}/{item['number']}", unique(item["source"], "serve", first_l1))
            cached.append(time.monotonic() - sent)
    client.shutdown()
    service.wait(timeout=600)
    return {
        "seconds": seconds,
        "answered": answered,
        "candidates_per_hour": answered * 3600 / seconds,
        "ready_s": ready,
        "verdicts": verdicts,
        "latency_s": latency,
        "cached_level1_s": cached,
        "cached_task": f"level{item['level']}/{item['name']}" if first_l1 is not None else None,
    }


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--submissions", type=Path, required=True)
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--task-count", type=int, default=25)
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--cached-repeats", type=int, default=10)
    p.add_argument("--kbench", default=str(ROOT / "target" / "release" / "kbench"))
    p.add_argument("--arm", choices=["serve", "eval", "both"], default="both")
    p.add_argument("--eval-sample", type=int, help="eval calls for only this many candidates, evenly spaced")
    p.add_argument("--limit-s", type=float, help="send or start nothing new after this many seconds")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.tasks = args.tasks.resolve()

    found = candidates_by_task(args.submissions)
    tasks = choose(found, args.task_count)
    items = work(found, tasks, args.candidates)
    if args.arm in ("serve", "both"):
        (args.out / "serve.json").write_text(json.dumps(serve_arm(args, items, tasks, extra), indent=1))
    if args.arm in ("eval", "both"):
        (args.out / "eval.json").write_text(json.dumps(eval_arm(args, items, extra), indent=1))
    summarize(args, items, tasks, extra)


def summarize(args, items: list[dict], tasks: list, extra: list[str]) -> None:
    """serve_bench.json and the table, from whichever arms OUT holds."""
    arms = {arm: json.loads((args.out / f"{arm}.json").read_text()) for arm in ("serve", "eval") if (args.out / f"{arm}.json").exists()}
    served, evaluated = arms.get("serve"), arms.get("eval")
    report = {
        "command": [sys.executable, *sys.argv],
        "kbench_flags": extra,
        "tasks": [f"level{level}/{name}" for level, _, name in tasks],
        "candidates": len(items),
        "clients": args.clients,
        **arms,
    }
    print("| arm | candidates | seconds | candidates per hour |\n|---|---|---|---|")
    if served:
        print(f"| serve ({args.clients} clients) | {served['answered']} of {len(items)} | {served['seconds']:.0f} | {served['candidates_per_hour']:.0f} |")
    if evaluated and evaluated["calls"]:
        print(f"| eval, one candidate per call | {evaluated['calls']} of {evaluated['of']} | {evaluated['seconds']:.0f} | {evaluated['candidates_per_hour']:.0f} |")
    if served and evaluated and evaluated["calls"]:
        report["ratio"] = served["candidates_per_hour"] / evaluated["candidates_per_hour"]
        report["verdicts_differ"] = [
            {"task": f"level{i['level']}/{i['name']}", "index": i["index"], "serve": s, "eval": e}
            for i, s, e in zip(items, served["verdicts"], evaluated["verdicts"])
            if e is not None and s is not None and s != e
        ]
        compared = sum(e is not None and s is not None for s, e in zip(served["verdicts"], evaluated["verdicts"]))
        print(f"\nserve / eval: {report['ratio']:.2f}x; verdicts that differ: {len(report['verdicts_differ'])} of {compared}")
    if served:
        print(f"service ready after {served['ready_s']:.1f} s (probe, task facts)")
        if served["cached_level1_s"]:
            print(f"median request to reply, {served['cached_task']} with its build cached ({len(served['cached_level1_s'])} requests): {statistics.median(served['cached_level1_s']):.2f} s")
    (args.out / "serve_bench.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
