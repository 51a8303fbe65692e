"""Summarize an identity calibration run (each task's reference as its own submission).

    python3 benchmarks/calibration_table.py OFFLINE_RESULTS_JSON [KERNELBENCH_RESULTS_JSON]

(either may be gzipped: a name ending in .gz)

Prints Markdown: decision labels (an identity must be SAME), the CI half-widths, the
evaluations that were not SAME, the wall-time split and each evaluation's fixed cost, and, given a `--mode kernelbench` run of
the same submissions, the two modes side by side on the tasks both evaluated (upstream's
statistic is the ratio of means; its spread is what the calibration shows). Standard library only.
"""

import gzip
import json
import statistics
import sys
from collections import Counter


def load(path):
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        record = json.load(f)
    return {e["file"]: e for e in record["evaluations"]}, record


def quantiles(values):
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return f"median {statistics.median(values):.4f}, p90 {pick(0.9):.4f}, max {values[-1]:.4f}"


# stats.rs HOST_SPEED_ERROR: kbench allows for at most this relative error when a forward
# synchronizes with the host inside (the warning below says so). Records since the rule carry the
# error they allowed for (`host_error`, narrowed by the arms' busy shares); older ones lack it.
HOST_SPEED_ERROR = 0.25
HOST_SYNC_WARNING = "a host synchronization inside"


def host_bound_label(t):
    """The label kbench gives now (stats::decide_within): a host-synchronizing forward's interval
    is widened by the host-speed error before it is judged against the band. Records that carry
    `host_error` were labeled so; older ones get the whole error."""
    if "host_error" in t or not any(HOST_SYNC_WARNING in w for w in t["warnings"]):
        return t["label"]
    low, high, delta = t["speedup_ci_low"] / (1 + HOST_SPEED_ERROR), t["speedup_ci_high"] * (1 + HOST_SPEED_ERROR), t["delta"]
    if low > 1 + delta:
        return "faster"
    if high < 1 - delta:
        return "slower"
    return "same" if low >= 1 - delta and high <= 1 + delta else "inconclusive"


def labels(evals):
    timed = [e for e in evals.values() if e.get("timing")]
    counts = Counter(e["timing"]["label"] for e in timed)
    same = counts.get("same", 0)
    print(f"- evaluations: {len(evals)}, timed: {len(timed)}")
    print(f"- labels: {dict(sorted(counts.items()))}; SAME {same}/{len(timed)} = {100 * same / max(len(timed), 1):.1f} %")
    print(f"- CI half-width of the speedup (relative): {quantiles([e['timing']['ci_half_width'] for e in timed])}")
    spread = [abs(e["timing"]["speedup"] - 1) for e in timed]
    print(f"- |speedup - 1|: {quantiles(spread)}")
    relabeled = Counter(host_bound_label(e["timing"]) for e in timed)
    print(f"- labels with the host-speed allowance applied to host-synchronizing forwards: {dict(sorted(relabeled.items()))}")
    stopped = Counter(e["timing"]["stopped"] for e in timed)
    print(f"- sampling stopped by: {dict(sorted(stopped.items()))}")
    untimed = [e for e in evals.values() if not e.get("timing")]
    return timed, untimed


def exceptions(timed, untimed):
    print("\n| file | verdict | label | speedup [95 % CI] | method | stopped | note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for e in sorted(untimed, key=lambda e: e["file"]):
        print(f"| {e['file']} | {e['verdict']} | - | - | - | - | {e['reason'][:120]} |")
    for e in sorted(timed, key=lambda e: e["file"]):
        t = e["timing"]
        if t["label"] == "same":
            continue
        note = "; ".join(w[:100] for w in t["warnings"][:2])
        ci = f"{t['speedup']:.3f} [{t['speedup_ci_low']:.3f}, {t['speedup_ci_high']:.3f}]"
        print(f"| {e['file']} | {e['verdict']} | {t['label']} | {ci} | {t['method']} | {t['stopped']} | {note} |")


def process_checks(timed):
    checked = sorted((e for e in timed if e["timing"].get("process")), key=lambda e: e["file"])
    print(f"\n## Process checks ({len(checked)} of {len(timed)} timings)\n")
    if not checked:
        return
    print("| file | measured [95 % CI] | reference in its own worker over in the candidate's [CI] | reported [CI] | label |")
    print("| --- | --- | --- | --- | --- |")
    for e in checked:
        t, p = e["timing"], e["timing"]["process"]
        print(
            f"| {e['file']} | {t['speedup']:.3f} [{p['measured_ci_low']:.3f}, {p['measured_ci_high']:.3f}]"
            f" | {p['ratio']:.3f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}]"
            f" | [{t['speedup_ci_low']:.3f}, {t['speedup_ci_high']:.3f}] | {t['label']} |"
        )


def walltime(evals):
    phases = Counter()
    for e in evals.values():
        for key in ("load_s", "correctness_s", "timing_s", "gpu_wait_s"):
            phases[key] += e["phases"].get(key) or 0.0
    builds = sum((e.get("build") or {}).get("seconds", 0.0) for e in evals.values())
    total = sum(e["seconds"] for e in evals.values())
    print(
        f"\nWall time of the evaluations (summed): {total:.0f} s = load {phases['load_s']:.0f} s"
        f" + correctness and checks {phases['correctness_s']:.0f} s + timing {phases['timing_s']:.0f} s"
        f" + waiting for other lanes {phases['gpu_wait_s']:.0f} s"
        f" + the rest {total - sum(phases.values()):.0f} s (the profile after timing, waiting for a worker pair)"
        f" (+ builds {builds:.0f} s; worker start-up overlaps the previous evaluations)"
    )


def least_squares(rows, ys):
    """Coefficients of the least-squares fit ys ~ rows (normal equations; a few columns)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] + [sum(r[i] * y for r, y in zip(rows, ys))] for i in range(k)]
    for i in range(k):
        p = max(range(i, k), key=lambda r: abs(a[r][i]))
        a[i], a[p] = a[p], a[i]
        for r in range(k):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    return [a[i][k] / a[i][i] for i in range(k)]


def fixed_costs(evals):
    """What each timed evaluation costs whatever its kernels: the correctness phase fitted as a
    fixed part plus a multiple of the forward's time (trials, perturbations, float64 runs), the
    timing phase as a fixed part plus the sampled device time and a cost per sample; the load
    and the rest (the profile, ending the workers) by their medians."""
    timed = [e for e in evals.values() if e.get("timing") and e["phases"].get("timing_s")]
    if len(timed) < 10:
        return
    forward = [e["timing"]["reference"]["median_ms"] / 1e3 for e in timed]
    samples = [len(e["timing"]["reference"]["samples_ms"]) + len(e["timing"]["candidate"]["samples_ms"]) for e in timed]
    c0, c1 = least_squares([[1.0, m] for m in forward], [e["phases"]["correctness_s"] for e in timed])
    t0, t1, t2 = least_squares([[1.0, n * m, n] for n, m in zip(samples, forward)], [e["phases"]["timing_s"] for e in timed])
    rest = [e["seconds"] - sum(e["phases"].get(k) or 0.0 for k in ("load_s", "correctness_s", "timing_s", "gpu_wait_s")) for e in timed]
    sampled = sum(n * m for n, m in zip(samples, forward))
    print(f"\nPer timed evaluation ({len(timed)}), least-squares fits over them:")
    print(f"- correctness: {c0:.2f} s fixed + {c1:.0f} forwards' time (all: {len(timed) * c0:.0f} s fixed, {c1 * sum(forward):.0f} s forwards)")
    print(
        f"- timing: {t0:.2f} s fixed + {t1:.2f} x the sampled device time + {1e3 * t2:.1f} ms per sample"
        f" (all: {len(timed) * t0:.0f} s fixed, {sampled:.0f} s sampled device time, {sum(samples)} samples)"
    )
    print(f"- load: median {statistics.median(e['phases']['load_s'] for e in timed):.2f} s; the rest: median {statistics.median(rest):.2f} s")


def side_by_side(offline, kernelbench):
    both = sorted(set(offline) & set(kernelbench))
    rows = [(f, offline[f].get("timing"), kernelbench[f].get("timing")) for f in both]
    rows = [(f, a, b) for f, a, b in rows if a and b]
    if not rows:
        return
    print(f"\n## Side by side with `--mode kernelbench` ({len(rows)} tasks both timed)\n")
    off = [abs(a["speedup"] - 1) for _, a, _ in rows]
    kb = [abs(b["mean_ratio"] - 1) for _, _, b in rows]
    print(f"- offline |speedup - 1|: {quantiles(off)}")
    print(f"- kernelbench |ratio of means - 1|: {quantiles(kb)}")
    print(f"- kernelbench labels (Fieller interval, same band): {dict(Counter(b['label'] for _, _, b in rows))}")
    print("\n| file | offline speedup [CI] | label | kernelbench ratio of means [CI] | label |")
    print("| --- | --- | --- | --- | --- |")
    for f, a, b in rows:
        print(
            f"| {f} | {a['speedup']:.3f} [{a['speedup_ci_low']:.3f}, {a['speedup_ci_high']:.3f}] | {a['label']}"
            f" | {b['speedup']:.3f} [{b['speedup_ci_low']:.3f}, {b['speedup_ci_high']:.3f}] | {b['label']} |"
        )


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    offline, record = load(sys.argv[1])
    print(f"# Identity calibration: {record['config']['mode']} mode, {record['environment']['gpus'][0].get('name', '?')}\n")
    timed, untimed = labels(offline)
    exceptions(timed, untimed)
    process_checks(timed)
    walltime(offline)
    fixed_costs(offline)
    if len(sys.argv) == 3:
        side_by_side(offline, load(sys.argv[2])[0])


if __name__ == "__main__":
    main()
