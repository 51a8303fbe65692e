"""Every table of this report's README, from the committed records.

    python3 reports/h100-one-gpu/analyze.py

`one`: the 250 identities on one H100 at this code; `../h100-output-placement/identity-250`: the
last full run on one H100 (3365bbb and 2e20ca4, two sessions); `twice`: the doubled work;
`many`: 8 candidates on level3/1 and 3/2; `../h100-x4-throughput/many-after0`: level3/1's 8
before the in-place perturbation.
"""

import collections
import gzip
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
PHASES = ["load_s", "correctness_s", "trials_candidate_s", "trials_reference_s", "timing_s", "warmup_s", "output_checks_s", "process_check_s", "after_timing_s"]


def records(path):
    return json.loads(gzip.decompress(Path(path).read_bytes()))["evaluations"]


def name(e):
    return f"level{e['task']['level']}/{e['task']['number']}"


def outside_trials(e):
    p = e["phases"]
    return p["correctness_s"] - p["trials_candidate_s"] - p["trials_reference_s"]


def sampled(e):
    p = e["phases"]
    return p["timing_s"] - p["warmup_s"] - p["output_checks_s"] - p["process_check_s"]


def device_s(e):
    t = e["timing"]
    return (sum(t["reference"]["samples_ms"]) + sum(t["candidate"]["samples_ms"])) / 1e3


def labels(ev):
    counts = collections.Counter(e["timing"]["label"] for e in ev if e.get("timing"))
    widths = sorted(e["timing"]["ci_half_width"] for e in ev if e.get("timing"))
    print(f"labels {dict(counts)}, median half-width {100 * statistics.median(widths):.3f} %")
    for e in ev:
        t = e["timing"]
        if t["label"] != "same":
            print(f"  {name(e)} {t['label']} {t['speedup']:.3f} [{t['speedup_ci_low']:.3f}, {t['speedup_ci_high']:.3f}]")


def phases(one, before):
    print("\n| phase | before (one H100) | this code (one H100) |\n| --- | --- | --- |")
    for k in PHASES + ["sampled"]:
        now = sum(sampled(e) if k == "sampled" else e["phases"][k] for e in one)
        old = sum(e["phases"].get(k, 0.0) for e in before) if k in ("load_s", "correctness_s", "timing_s") else None
        print(f"| {k} | {'' if old is None else f'{old:.1f}'} | {now:.1f} |")
    print(f"| evaluations | {sum(e['seconds'] for e in before):.1f} | {sum(e['seconds'] for e in one):.1f} |")
    print(f"sampled rounds' device time (both arms' samples): {sum(device_s(e) for e in one):.1f} s")


def checks(one):
    spent, runs = collections.Counter(), collections.Counter()
    for e in one:
        for c in e["checks"]:
            spent[c["name"]] += c.get("seconds") or 0.0
            runs[c["name"]] += c.get("runs") or 0
    print("\n| check | seconds | runs |\n| --- | --- | --- |")
    for k, v in spent.most_common():
        if v >= 1.0:
            print(f"| {k} | {v:.1f} | {runs[k]} |")


def in_place(one, before):
    old = {name(e): e for e in before}
    rows = sorted(((old[name(e)]["phases"]["correctness_s"] - e["phases"]["correctness_s"], e) for e in one), key=lambda r: -r[0])
    print("\n| task | correctness before | this code (outside the trials) |\n| --- | --- | --- |")
    for saved, e in rows[:6]:
        print(f"| {name(e)} | {old[name(e)]['phases']['correctness_s']:.1f} | {e['phases']['correctness_s']:.1f} ({outside_trials(e):.2f}) |")
    print(f"correctness summed: {sum(r[0] for r in rows):.1f} s less; the six above: {sum(r[0] for r in rows[:6]):.1f} s")


def many(now, before):
    print("\n| candidates | seconds each (mean) | load | outside the trials |\n| --- | --- | --- | --- |")
    for label, ev in (("level3/1 at d86aaba (4-GPU host, side by side)", [e for e in before if name(e) == "level3/1"]), ("level3/1, this code", [e for e in now if name(e) == "level3/1"]), ("level3/2, this code", [e for e in now if name(e) == "level3/2"])):
        mean = lambda f: statistics.mean(f(e) for e in ev)  # noqa: E731
        print(f"| {label}: {len(ev)} | {mean(lambda e: e['seconds']):.1f} | {mean(lambda e: e['phases']['load_s']):.1f} | {mean(outside_trials):.2f} |")


def main():
    one = records(HERE / "one.results.json.gz")
    before = records(HERE / "../h100-output-placement/identity-250.results.json.gz")
    print("## the 250 identities on one H100")
    labels(one)
    print("\n## doubled work")
    labels(records(HERE / "twice.results.json.gz"))
    phases(one, before)
    checks(one)
    in_place(one, before)
    many(records(HERE / "many.results.json.gz"), records(HERE / "../h100-x4-throughput/many-after0.results.json.gz"))


if __name__ == "__main__":
    main()
