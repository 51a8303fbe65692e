"""Candidates per hour through `kbench serve` instances of one run, one per GPU, against one
instance on one GPU, and the same stream with one instance killed halfway.

    python3 benchmarks/serve_cluster_bench.py --submissions TREE/submissions --tasks TREE/tasks \
        --out DIR --arm one|two|kill [--gpus 0,1] [--jobs J] [--task-count 25] [--candidates 8] \
        [--clients 8] [--limit-s S] [--kill-at S] [--kbench target/release/kbench] [-- EXTRA FLAGS]

The stream is serve_bench.py's (TASK_COUNT tasks round robin over the levels, CANDIDATES each,
every candidate made unique per arm by a trailing comment so each is built). `one` starts one
instance on the first of --gpus; `two` one per GPU of the first two; `kill` is `two` with the
second instance killed (SIGKILL: no drain) KILL_AT seconds after the start. Each instance is
`serve --instance iN --out DIR/ARM/instances/iN --seed-file DIR/ARM/seed --announce
DIR/ARM/endpoints/iN --gpus G --jobs J`, a node of its own in all but the host (J build jobs each:
give each instance the same share of the host's CPUs in every arm). CLIENTS clients send through
one `Client.from_announced`, each request with its id; sending stops after LIMIT_S and the
requests in flight are waited for. The rate counts answered requests from the instances'
readiness to the last reply (the set-up, `ready_s`, apart: a later arm reads the task facts an
earlier one computed). Then the instances are shut down and `kbench merge` joins
their records: each request id must appear once. Writes DIR/ARM.json; `--summary` prints the
table of every arm DIR holds.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python" / "src"))
from kbench_client import Client, ServiceError  # noqa: E402
from serve_bench import ROOT, candidates_by_task, choose, unique, work  # noqa: E402


def start(args, arm_dir: Path, name: str, gpu: str, extra: list[str]) -> subprocess.Popen:
    """One instance of the arm's run, on `gpu`."""
    return subprocess.Popen(
        [
            args.kbench,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--instance",
            name,
            "--out",
            str(arm_dir / "instances" / name),
            "--seed-file",
            str(arm_dir / "seed"),
            "--announce",
            str(arm_dir / "endpoints" / name),
            "--gpus",
            gpu,
            "--jobs",
            str(args.jobs),
            "--tasks",
            str(args.tasks),
            "--only",
            args.only,
            "--queue",
            "256",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(arm_dir / f"{name}.log", "w"),
    )


def wait_announced(arm_dir: Path, count: int, instances: list, within: float = 600) -> None:
    until = time.monotonic() + within
    while time.monotonic() < until:
        if len(list((arm_dir / "endpoints").glob("*"))) >= count:
            return
        if any(p.poll() is not None for p in instances):
            sys.exit(f"an instance ended during its set-up: see {arm_dir}/*.log")
        time.sleep(0.5)
    sys.exit(f"the instances did not announce themselves within {within:.0f} s")


def stream(args, client: Client, items: list, started: float, ready: float) -> dict:
    """Send the stream through `client`, CLIENTS at a time, until LIMIT_S after the instances
    were ready (`ready`, a time like `started`): each reply's verdict, instance, time (from
    `started`) and whether it was replayed, by request id."""
    todo: queue.Queue = queue.Queue()
    for n in range(len(items)):
        todo.put(n)
    replies: dict = {}
    lock = threading.Lock()

    def send():
        while not (args.limit_s and time.monotonic() - ready > args.limit_s):
            try:
                n = todo.get_nowait()
            except queue.Empty:
                return
            item = items[n]
            rid = f"{args.arm}-{n}"
            sent = time.monotonic()
            try:
                r = client.evaluate(f"{item['level']}/{item['number']}", unique(item["source"], args.arm, n), id=rid)
                reply = {"verdict": r.verdict, "instance": r.served.get("instance"), "gpu": r.served.get("gpu"), "replayed": r.replayed}
            except ServiceError as e:
                reply = {"verdict": f"refused {e.status}", "message": e.message[:300]}
            reply.update(n=n, sent_s=sent - started, replied_s=time.monotonic() - started)
            with lock:
                if rid in replies:
                    reply["answered_twice"] = True
                replies[rid] = reply

    threads = [threading.Thread(target=send) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return replies


def run_arm(args, items: list, extra: list[str]) -> dict:
    arm_dir = args.out / args.arm
    shutil.rmtree(arm_dir, ignore_errors=True)
    (arm_dir / "endpoints").mkdir(parents=True)
    (arm_dir / "seed").write_text(f"{int.from_bytes(os.urandom(7), 'little')}\n")
    os.chmod(arm_dir / "seed", 0o600)
    gpus = args.gpus.split(",")[: 1 if args.arm == "one" else 2]
    started = time.monotonic()
    instances = [start(args, arm_dir, f"i{k}", gpu, extra) for k, gpu in enumerate(gpus)]
    wait_announced(arm_dir, len(instances), instances)
    ready = time.monotonic() - started
    client = Client.from_announced(str(arm_dir / "endpoints"), timeout=7200, retry_for=1800)
    killed: dict = {}
    done = threading.Event()

    def kill_when_due():
        # The `kill` arm's second instance, KILL_AT seconds in, wherever its requests are.
        while args.arm == "kill" and not done.wait(0.5):
            if time.monotonic() - started >= args.kill_at:
                instances[-1].send_signal(signal.SIGKILL)
                killed["at_s"] = time.monotonic() - started
                return

    threading.Thread(target=kill_when_due, daemon=True).start()
    replies = stream(args, client, items, started, started + ready)
    done.set()
    last = max((r["replied_s"] for r in replies.values()), default=0.0)
    # The rate counts from the instances' readiness: their set-up (task facts, read from the
    # cache by a later arm) is the same whatever the number of instances.
    serving = last - ready
    client.shutdown()
    for p in instances:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
    merged = arm_dir / "merged"
    merge = subprocess.run(
        [args.kbench, "merge", "--seed-file", str(arm_dir / "seed"), *map(str, sorted((arm_dir / "instances").iterdir())), "--out", str(merged)],
        capture_output=True,
        text=True,
    )
    record = json.loads((merged / "results.json").read_text()) if (merged / "results.json").exists() else {"evaluations": []}
    in_record = collections.Counter((e.get("served") or {}).get("id") for e in record["evaluations"])
    answered = [rid for rid, r in replies.items() if not r["verdict"].startswith("refused")]
    return {
        "arm": args.arm,
        "gpus": gpus,
        "jobs_per_instance": args.jobs,
        "ready_s": ready,
        "first_reply_s": min((r["replied_s"] for r in replies.values()), default=None),
        "seconds": serving,
        "answered": len(answered),
        "sent": len(replies),
        "candidates_per_hour": len(answered) * 3600 / serving if serving > 0 else None,
        "killed_at_s": killed.get("at_s"),
        "answered_twice": sum(bool(r.get("answered_twice")) for r in replies.values()),
        "lost": [rid for rid in answered if in_record[rid] == 0],
        "duplicated_in_record": [rid for rid, c in in_record.items() if c > 1],
        "merge_log": (merge.stdout + merge.stderr)[-2000:],
        "replies": replies,
    }


def summary(out: Path) -> None:
    arms = {arm: json.loads((out / f"{arm}.json").read_text()) for arm in ("one", "two", "kill") if (out / f"{arm}.json").exists()}
    print("| arm | GPUs | answered | seconds | candidates per hour | ready s | first reply s | lost | duplicated |\n|---|---|---|---|---|---|---|---|---|")
    for name, a in arms.items():
        rate = f"{a['candidates_per_hour']:.0f}" if a["candidates_per_hour"] else "-"
        killed = f" (one killed at {a['killed_at_s']:.0f} s)" if a.get("killed_at_s") else ""
        print(
            f"| {name}{killed} | {','.join(a['gpus'])} | {a['answered']} of {a['sent']} sent | {a['seconds']:.0f} | {rate} | {a['ready_s']:.0f} | {a['first_reply_s'] or 0:.0f} | {len(a['lost'])} | {len(a['duplicated_in_record'])} |"
        )
    if "one" in arms and "two" in arms and arms["one"]["candidates_per_hour"]:
        print(f"\ntwo / one: {arms['two']['candidates_per_hour'] / arms['one']['candidates_per_hour']:.2f}x")
    by_n = collections.defaultdict(dict)
    for name, a in arms.items():
        for r in a["replies"].values():
            by_n[r["n"]][name] = r["verdict"]
    differ = {n: v for n, v in by_n.items() if len(set(v.values())) > 1}
    print(f"candidates judged by more than one arm: {sum(len(v) > 1 for v in by_n.values())}; verdicts that differ: {len(differ)} {differ if differ else ''}")


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--submissions", type=Path)
    p.add_argument("--tasks", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--arm", choices=["one", "two", "kill"])
    p.add_argument("--gpus", default="0,1")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    p.add_argument("--task-count", type=int, default=25)
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--limit-s", type=float, help="send nothing new after this many seconds")
    p.add_argument("--kill-at", type=float, default=120.0)
    p.add_argument("--kbench", default=str(ROOT / "target" / "release" / "kbench"))
    p.add_argument("--summary", action="store_true", help="print the table of the arms OUT holds")
    args = p.parse_args(argv)
    if args.summary:
        return summary(args.out)
    if not (args.arm and args.submissions and args.tasks):
        p.error("--arm, --submissions and --tasks are needed to run an arm")
    args.out.mkdir(parents=True, exist_ok=True)
    args.tasks = args.tasks.resolve()
    found = candidates_by_task(args.submissions)
    tasks = choose(found, args.task_count)
    args.only = ",".join(f"{level}/{number}" for level, number, _ in tasks)
    result = run_arm(args, work(found, tasks, args.candidates), extra)
    (args.out / f"{args.arm}.json").write_text(json.dumps(result, indent=1))
    summary(args.out)


if __name__ == "__main__":
    main()
