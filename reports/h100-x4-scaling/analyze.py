"""The tables of this report, from its records: python3 analyze.py (in this folder)."""

import collections
import gzip
import json
import re
import statistics

PARTS = ("load_s", "correctness_s", "trials_candidate_s", "trials_reference_s", "timing_s", "warmup_s", "output_checks_s", "process_check_s", "after_timing_s")


def evaluations(name):
    return json.load(gzip.open(f"{name}.results.json.gz"))["evaluations"]


def walls(name):
    """The kbench wall time of each call of an identity run, from its console."""
    return [int(s) for s in re.findall(r"^exit \d+ wall (\d+) s", open(f"{name}.console.txt").read(), re.M)]


def calibration(ev):
    labels = collections.Counter((e.get("timing") or {}).get("label", "untimed") for e in ev)
    widths = [e["timing"]["ci_half_width"] for e in ev if e.get("timing")]
    odd = [f"{e['file'].split('_')[0]} {e['timing']['label']} {e['timing']['speedup']:.3f}" for e in ev if (e.get("timing") or {}).get("label") != "same"]
    return f"{dict(labels)}, SAME {labels['same'] / len(ev):.1%}, median half-width {100 * statistics.median(widths):.3f} %; not SAME: {'; '.join(odd)}"


def two_gpus():
    print("## The 250 identities: one GPU (two half-runs) and two GPUs\n")
    one = evaluations("half0") + evaluations("half1")
    two = evaluations("two")
    one_wall = sum(walls("half0")) + sum(walls("half1"))
    two_wall = sum(walls("two"))
    print(f"one GPU: {len(one)} evaluated, calls {walls('half0')} + {walls('half1')} s = {one_wall} s, evaluations {sum(e['seconds'] for e in one):.1f} s")
    print(f"two GPUs: {len(two)} evaluated, calls {walls('two')} s = {two_wall} s, evaluations {sum(e['seconds'] for e in two):.1f} s")
    slots = collections.defaultdict(list)
    for e in two:
        slots[(e.get("timing") or {}).get("cpu")].append(e)
    for cpu, ev in sorted(slots.items(), key=str):
        widths = [e["timing"]["ci_half_width"] for e in ev if e.get("timing")]
        print(f"  slot timing on CPU {cpu}: {len(ev)} evaluations, {sum(e['seconds'] for e in ev):.1f} s, median half-width {100 * statistics.median(widths):.3f} %")
    print(f"speedup by wall time: {one_wall / two_wall:.2f}x; evaluations' seconds beside another GPU's: {sum(e['seconds'] for e in two) / sum(e['seconds'] for e in one) - 1:+.1%}")
    print(f"one GPU: {calibration(one)}")
    print(f"two GPUs: {calibration(two)}\n")
    print("| phase | one GPU | two GPUs (both slots) |\n| --- | --- | --- |")
    for p in PARTS:
        print(f"| {p} | {sum(e['phases'].get(p, 0) for e in one):.1f} | {sum(e['phases'].get(p, 0) for e in two):.1f} |")
    rest = lambda ev: sum(e["seconds"] - sum(e["phases"][p] for p in ("load_s", "correctness_s", "timing_s", "after_timing_s")) for e in ev)  # noqa: E731
    print(f"| in no phase (pool waits, the workers' end) | {rest(one):.1f} | {rest(two):.1f} |")
    print(f"| evaluations | {sum(e['seconds'] for e in one):.1f} | {sum(e['seconds'] for e in two):.1f} |\n")
    print("Warm-up (one GPU) by the reference's median call:")
    buckets = collections.defaultdict(list)
    for e in one:
        m = e["timing"]["reference"]["median_ms"]
        buckets["< 1 ms" if m < 1 else "1-5 ms" if m < 5 else "5-20 ms" if m < 20 else ">= 20 ms"].append(e["phases"]["warmup_s"])
    for k in ("< 1 ms", "1-5 ms", "5-20 ms", ">= 20 ms"):
        v = buckets[k]
        print(f"  {k}: {len(v)} tasks, {sum(v):.1f} s, median {statistics.median(v):.2f} s")
    top = sorted(one, key=lambda e: -e["phases"]["warmup_s"])[:12]
    print("  longest: " + ", ".join(f"{e['file'].split('_')[0]} {e['phases']['warmup_s']:.1f} s ({e['timing']['reference']['median_ms']:.2f} ms)" for e in top) + "\n")


def many():
    print("## 8 candidates on each of 25 tasks\n")
    runs = {n: evaluations(f"many-{n}") for n in ("after", "before0", "before1", "before2")}
    for n, ev in runs.items():
        wall = sum(json.load(open(f"many-{n}.calls.json")))
        busy = sum(e["seconds"] for e in ev)
        verdicts = dict(collections.Counter(e["verdict"] for e in ev))
        print(f"{n}: {len(ev)} candidates, wall {wall:.1f} s, busy {busy:.1f} s, per hour {3600 * len(ev) / wall:.0f} (wall) {3600 * len(ev) / busy:.0f} (busy), {verdicts}")

    def by_task(ev):
        tasks = collections.defaultdict(list)
        for e in ev:
            tasks[f"level{e['task']['level']}/{e['task']['number']}"].append(e)
        return tasks

    after = by_task(runs["after"])
    before = by_task(runs["before0"] + runs["before1"] + runs["before2"])
    print("\n| task | this code: candidates, mean s | 796cc7f: candidates, mean s | ratio |\n| --- | --- | --- | --- |")
    key = lambda t: tuple(int(x) for x in re.findall(r"\d+", t))  # noqa: E731
    for t in sorted(set(after) | set(before), key=key):
        a, b = after.get(t, []), before.get(t, [])
        mean = lambda ev: statistics.mean(e["seconds"] for e in ev)  # noqa: E731
        ratio = f"{mean(b) / mean(a):.2f}" if a and b else ""
        print(f"| {t} | {len(a)}, {mean(a):.2f} | {len(b)}, {mean(b):.2f} | {ratio} |" if a and b else f"| {t} | {len(a)}{f', {mean(a):.2f}' if a else ''} | {len(b)}{f', {mean(b):.2f}' if b else ''} | |")
    both = [t for t in after if t in before]
    complete = [t for t in both if len(after[t]) == 8 and len(before[t]) == 8]
    seconds = lambda runs_, ts: sum(e["seconds"] for t in ts for e in runs_[t])  # noqa: E731
    print(f"\ncomplete in both ({len(complete)} tasks, {8 * len(complete)} candidates in each run): {seconds(before, complete):.1f} s against {seconds(after, complete):.1f} s of busy time, {seconds(before, complete) / seconds(after, complete):.2f}x the candidates per GPU-hour")
    means = lambda runs_: sum(statistics.mean(e["seconds"] for e in runs_[t]) for t in both)  # noqa: E731
    print(f"reached by both ({len(both)} tasks): mean seconds per candidate summed over the tasks {means(before):.1f} against {means(after):.1f}, {means(before) / means(after):.2f}x")


two_gpus()
many()
