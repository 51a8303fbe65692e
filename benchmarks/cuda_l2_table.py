"""Markdown table of a `kbench import cuda-l2` tree's runs: per shape the verdict and one-line
cause, the accumulator its source declares (`kernels.csv`), kbench's offline speedup and interval
beside the published one and its class, and the same for server mode where it ran; then the
geometric means over the shapes that pass in both.

    python3 benchmarks/cuda_l2_table.py KERNELS_CSV SERVER_RESULTS OFFLINE_RESULTS... > table.md

Several offline records may be given: a later one's evaluation of a shape replaces an earlier's.
A verdict here is kbench's at the binary that made the record (the report says which).
"""

import csv
import math
import sys

from calibration_table import load  # the record, gzipped or not
from published_table import cls

REASON_CHARS = 150


def by_shape(paths):
    """Shape -> (evaluation, published speedup), later records replacing earlier ones."""
    rows = {}
    for path in paths:
        _, record = load(path)
        published = {r["submission"]: r["speedup"] for r in (record.get("published") or {}).get("rows", []) if r["submission"]}
        for e in record["evaluations"]:
            rows[e["task_name"].split("HGEMM_")[1]] = (e, published.get(e["file"]))
    return rows


def cell(row):
    """kbench's speedup [interval], the published speedup and the class."""
    if row is None:
        return "-", "-", "-"
    e, published = row
    t = e.get("timing") or {}
    mine = f"{t['speedup']:.3f} [{t['speedup_ci_low']:.3f}, {t['speedup_ci_high']:.3f}]" if t.get("speedup") else "-"
    return mine, f"{published:.3f}" if published else "-", cls(e, published)


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main(kernels_csv, server_path, *offline_paths):
    kernels = {r["shape"]: r for r in csv.DictReader(open(kernels_csv))}
    offline, server = by_shape(offline_paths), by_shape([server_path])
    print("| shape | verdict | cause | accumulator | offline: kbench [95% CI] | published | class | server: kbench [95% CI] | published | class |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ours, theirs = [], []
    for shape in sorted(kernels, key=lambda s: [int(x) for x in s.split("_")]):
        e, published = offline.get(shape, (None, None))
        reason = "" if e is None or e["verdict"] == "pass" else e["reason"][:REASON_CHARS].replace("|", "/")
        verdict = e["verdict"] if e else "not evaluated"
        cells = " | ".join(cell(offline.get(shape))) + " | " + " | ".join(cell(server.get(shape)))
        print(f"| {shape} | {verdict} | {reason} | {kernels[shape]['accumulator']} | {cells} |")
        if e and e["verdict"] == "pass" and published:
            ours.append(e["timing"]["speedup"])
            theirs.append(published)
    print(f"\nOffline, over the {len(ours)} passing shapes with a published speedup: kbench's geometric mean {geomean(ours):.3f}, published {geomean(theirs):.3f}.")
    s = [(e, p) for e, p in server.values() if e["verdict"] == "pass" and p]
    print(f"Server, over the {len(s)} passing shapes run: kbench {geomean([e['timing']['speedup'] for e, _ in s]):.3f}, published {geomean([p for _, p in s]):.3f}.")


if __name__ == "__main__":
    main(*sys.argv[1:])
