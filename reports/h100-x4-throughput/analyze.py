"""The tables of this report, from its records and those of ../h100-x4-scaling (the same kind of
machine, the session before, at 610fe7b): python3 analyze.py (in this folder)."""

import collections
import gzip
import json
import re
import statistics

LAST = "../h100-x4-scaling/"
PARTS = ("load_s", "correctness_s", "trials_candidate_s", "trials_reference_s", "timing_s", "warmup_s", "output_checks_s", "process_check_s", "after_timing_s")
TASKS = "1/1,1/9,1/19,1/23,1/40,1/50,1/63,1/88,1/97,2/1,2/6,2/9,2/14,2/30,2/46,2/66,2/75,2/100,3/1,3/4,3/10,3/20,3/28,3/44,3/49".split(",")


def evaluations(*paths):
    return [e for p in paths for e in json.load(gzip.open(p))["evaluations"]]


def task(e):
    return f"level{e['task']['level']}/{e['task']['number']}"


def calibration(ev):
    labels = collections.Counter((e.get("timing") or {}).get("label", "untimed") for e in ev)
    widths = [e["timing"]["ci_half_width"] for e in ev if e.get("timing")]
    odd = [f"{task(e)} {e['timing']['speedup']:.3f}" for e in ev if (e.get("timing") or {}).get("label") != "same"]
    return f"{dict(labels)}, SAME {labels['same'] / len(ev):.1%}, median half-width {100 * statistics.median(widths):.3f} %; not SAME: {', '.join(odd)}"


def sampled(ev):
    """Timing's sampled rounds: timing less its set-up, warm-up, output checks and process check."""
    return sum(e["phases"]["timing_s"] - e["phases"]["warmup_s"] - e["phases"]["output_checks_s"] - e["phases"]["process_check_s"] for e in ev)


def identities():
    print("## The 250 identities on two GPUs\n")
    now, last = evaluations("two.results.json.gz"), evaluations(LAST + "two.results.json.gz")
    walls = [int(s) for s in re.findall(r"^call \d+ wall (\d+) s", open("two.console.txt").read(), re.M)]
    print(f"this code: {len(now)} evaluated, kbench calls {walls} s = {sum(walls)} s")
    print(f"this code: {calibration(now)}")
    print(f"610fe7b:   {calibration(last)}\n")
    print("| phase | 610fe7b (last report) | this code | ratio |\n| --- | --- | --- | --- |")
    for p in PARTS:
        a, b = (sum(e["phases"].get(p, 0) for e in ev) for ev in (last, now))
        print(f"| {p} | {a:.1f} | {b:.1f} | {b / a if a else 0:.2f} |")
    a, b = sampled(last), sampled(now)
    print(f"| - sampled rounds | {a:.1f} | {b:.1f} | {b / a:.2f} |")
    a, b = (sum(e["seconds"] for e in ev) for ev in (last, now))
    print(f"| evaluations | {a:.1f} | {b:.1f} | {b / a:.2f} |\n")
    before = {task(e): e for e in last}
    ratio = lambda p: statistics.median(e["phases"][p] / before[task(e)]["phases"][p] for e in now if before[task(e)]["phases"][p] > 0)  # noqa: E731
    print("median per-task ratio (this code / 610fe7b): " + ", ".join(f"{p} {ratio(p):.2f}" for p in ("load_s", "trials_candidate_s", "trials_reference_s", "warmup_s", "after_timing_s")))
    print("\nWarm-up by the reference's median call (seconds summed; 610fe7b -> this code):")
    buckets = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in now:
        m = e["timing"]["reference"]["median_ms"]
        b = buckets["< 1 ms" if m < 1 else "1-5 ms" if m < 5 else "5-20 ms" if m < 20 else ">= 20 ms"]
        b[0] += 1
        b[1] += before[task(e)]["phases"]["warmup_s"]
        b[2] += e["phases"]["warmup_s"]
    for k in ("< 1 ms", "1-5 ms", "5-20 ms", ">= 20 ms"):
        n, a, b = buckets[k]
        print(f"  {k}: {n} tasks, {a:.1f} -> {b:.1f} s")
    print()


def many():
    print("## 8 candidates on each of the 25 tasks\n")
    after = collections.defaultdict(list)
    for e in evaluations("many-after0.results.json.gz", "many-after1.results.json.gz"):
        after[task(e)].append(e)
    base_now, base_last = collections.defaultdict(list), collections.defaultdict(list)
    for e in evaluations("many-before0.results.json.gz", "many-before1.results.json.gz"):
        base_now[task(e)].append(e)
    for e in evaluations(*(f"{LAST}many-before{i}.results.json.gz" for i in range(3))):
        base_last[task(e)].append(e)
    print("| task | this code: candidates, seconds | 796cc7f: candidates, seconds, run | 796cc7f per candidate / this code's |\n| --- | --- | --- | --- |")
    per_a, per_b, full = {}, {}, []
    verdicts = collections.Counter()
    for t in (f"level{s}" for s in TASKS):
        a = after[t]
        b, where = (base_now[t], "this report") if len(base_now[t]) >= len(base_last[t]) else (base_last[t], "last report")
        verdicts.update(e["verdict"] for e in a)
        per_a[t] = sum(e["seconds"] for e in a) / len(a)
        per_b[t] = sum(e["seconds"] for e in b) / len(b)
        if len(a) == 8 and len(b) == 8:
            full.append(t)
        print(f"| {t} | {len(a)}, {sum(e['seconds'] for e in a):.1f} | {len(b)}, {sum(e['seconds'] for e in b):.1f}, {where} | {per_b[t] / per_a[t]:.2f} |")
    busy_a = sum(e["seconds"] for t in after for e in after[t])
    n_a = sum(len(v) for v in after.values())
    print(f"\nthis code: {n_a} candidates, {busy_a:.1f} s of busy time, {3600 * n_a / busy_a:.0f} per GPU-hour; verdicts {dict(verdicts)}")
    labels = collections.Counter((e.get("timing") or {}).get("label", "untimed") for v in after.values() for e in v)
    print(f"this code's labels: {dict(labels)}")
    a_full = sum(8 * per_a[t] for t in full)
    b_full = sum(8 * per_b[t] for t in full)
    print(f"the {len(full)} tasks with all 8 candidates in both: {a_full:.1f} s against {b_full:.1f} s, {b_full / a_full:.2f}x the candidates per GPU-hour")
    a_all = sum(8 * per_a[t] for t in per_a)
    b_all = sum(8 * per_b[t] for t in per_b)
    print(f"all 25, each task's seconds per candidate times 8: {a_all:.1f} s against {b_all:.1f} s, {b_all / a_all:.2f}x")
    for t in (t for t in per_b if t not in full):
        print(f"  not in full: {t}, 796cc7f {len(base_now[t]) or len(base_last[t])} candidates, {per_b[t]:.1f} s each")
    wrong = [(task(e), e["file"], e["verdict"], e["reason"][:120]) for v in list(base_now.values()) + list(base_last.values()) for e in v if e["verdict"] != "no_kernel"]
    print("796cc7f's other verdicts: " + "; ".join(" ".join(w) for w in wrong))


identities()
many()
