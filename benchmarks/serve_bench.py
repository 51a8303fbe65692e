"""Candidates per hour through `kbench serve` against one-candidate `kbench eval` calls of the
same work, and the time from request to reply of a level-1 kernel whose build is cached.

    python3 benchmarks/serve_bench.py --submissions TREE/submissions --tasks TREE/tasks \
        --out DIR [--task-count 25] [--candidates 8] [--clients 4] [--kbench target/release/kbench] \
        [--cached-repeats 10] [-- EXTRA KBENCH FLAGS]

TREE is a mirrored layout (`levelL/N_Name.py` or `levelL/N_Name/*.py`, e.g. `kbench import`'s
OUT/submissions with its OUT/tasks). TASK_COUNT tasks with candidates are taken round robin over
the levels; each gets CANDIDATES candidates, its files in turn. Every candidate is made unique per
arm (a trailing comment), so both arms build every one: no arm reads the other's builds. The serve
arm counts from the service's start (probe and task facts included) to its last reply, CLIENTS
clients sending at once; the eval arm runs one `kbench eval FILE --task L/N` per candidate, one
after another, as a loop that calls eval per candidate does. Then CACHED_REPEATS requests, one at
a time, send the first level-1 candidate again (its build cached): their median time to reply.
Writes DIR/serve_bench.json and prints a Markdown summary; verdicts that differ between the arms
are listed (timing-dependent ones, e.g. a timeout near its limit, can).
"""

from __future__ import annotations

import argparse
import json
import queue
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
    files = args.out / "eval-files"
    files.mkdir(parents=True, exist_ok=True)
    verdicts, started = [], time.monotonic()
    for n, item in enumerate(items):
        path = files / f"{n:04d}_{item['name']}.py"
        path.write_text(unique(item["source"], "eval", n))
        out = args.out / "eval-runs" / f"{n:04d}"
        subprocess.run(
            [args.kbench, "eval", str(path), "--task", f"{item['level']}/{item['number']}",
             "--tasks", str(args.tasks), "--out", str(out), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        )
        try:
            record = json.loads((out / "results.json").read_text())
            verdicts.append(record["evaluations"][0]["verdict"])
        except (OSError, ValueError, IndexError, KeyError):
            verdicts.append("kbench_failed")
    return {"seconds": time.monotonic() - started, "verdicts": verdicts}


def serve_arm(args, items: list[dict], tasks: list, extra: list[str]) -> dict:
    only = ",".join(f"{level}/{number}" for level, number, _ in tasks)
    started = time.monotonic()
    service = subprocess.Popen(
        [args.kbench, "serve", "--listen", "127.0.0.1:0", "--tasks", str(args.tasks), "--only", only,
         "--out", str(args.out / "serve-run"), "--queue", str(max(64, len(items))), *extra],
        stdout=subprocess.PIPE, stderr=open(args.out / "serve.log", "w"), text=True,
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
        while True:
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
        "ready_s": ready,
        "verdicts": verdicts,
        "latency_s": latency,
        "cached_level1_s": cached,
        "cached_task": f"level{item['level']}/{item['name']}" if first_l1 is not None else None,
    }


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
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
    p.add_argument("--skip-eval", action="store_true", help="only the serve arm")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.tasks = args.tasks.resolve()

    found = candidates_by_task(args.submissions)
    tasks = choose(found, args.task_count)
    items = work(found, tasks, args.candidates)
    served = serve_arm(args, items, tasks, extra)
    evaluated = None if args.skip_eval else eval_arm(args, items, extra)

    per_hour = lambda arm: len(items) * 3600 / arm["seconds"]  # noqa: E731
    report = {
        "command": [sys.executable, *sys.argv],
        "kbench_flags": extra,
        "tasks": [f"level{level}/{name}" for level, _, name in tasks],
        "candidates": len(items),
        "clients": args.clients,
        "serve": {**served, "candidates_per_hour": per_hour(served)},
        "eval": None if evaluated is None else {**evaluated, "candidates_per_hour": per_hour(evaluated)},
    }
    differ = []
    if evaluated is not None:
        report["ratio"] = report["serve"]["candidates_per_hour"] / report["eval"]["candidates_per_hour"]
        differ = [
            {"task": f"level{i['level']}/{i['name']}", "index": i["index"], "serve": s, "eval": e}
            for i, s, e in zip(items, served["verdicts"], evaluated["verdicts"])
            if s != e
        ]
        report["verdicts_differ"] = differ
    (args.out / "serve_bench.json").write_text(json.dumps(report, indent=1))

    print("| arm | candidates | seconds | candidates per hour |\n|---|---|---|---|")
    print(f"| serve ({args.clients} clients) | {len(items)} | {served['seconds']:.0f} | {per_hour(served):.0f} |")
    if evaluated is not None:
        print(f"| eval, one candidate per call | {len(items)} | {evaluated['seconds']:.0f} | {per_hour(evaluated):.0f} |")
        print(f"\nserve / eval: {report['ratio']:.2f}x; verdicts that differ: {len(differ)} of {len(items)}")
    print(f"service ready after {served['ready_s']:.1f} s (probe, task facts)")
    if served["cached_level1_s"]:
        print(
            f"median request to reply, {served['cached_task']} with its build cached "
            f"({len(served['cached_level1_s'])} requests): {statistics.median(served['cached_level1_s']):.2f} s"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
