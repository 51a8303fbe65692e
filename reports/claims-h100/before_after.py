#!/usr/bin/env python3
"""Issue 52's before and after, file by file: two run records' verdicts and labels.

    python3 reports/claims-h100/before_after.py BEFORE.json[.gz][,...] AFTER.json[.gz][,...] [--after-only]

Each side is one run record or several, comma-separated (a run split over calls or GPUs).
Prints a Markdown table of every (task, file) both sides evaluated: the verdict, the label and
the speedup in each, and whether the verdict and the label are the same; then the files only
one side holds (with --after-only, only the after side's: a sample of a larger before), and a
summary line. (`kbench compare` compares task by task and
picks one file per task; the corpus holds many files per task.) Standard library only.
"""

import gzip
import json
import sys


def evaluations(paths):
    """{(level/number, file): evaluation} of comma-separated run records, gzipped or not."""
    found = {}
    for path in paths.split(","):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            record = json.load(f)
        found.update({(f"{e['task']['level']}/{e['task']['number']}", e["file"]): e for e in record["evaluations"]})
    return found


def read(e):
    """(verdict, label, speedup text) of one evaluation."""
    t = e.get("timing") or {}
    speedup = f"{t['speedup']:.3f}x" if t.get("speedup") is not None else "-"
    return e["verdict"], t.get("label") or "-", speedup


def main(before_path, after_path, after_only):
    before, after = evaluations(before_path), evaluations(after_path)
    both = sorted(before.keys() & after.keys())
    print("| task | file | before | after | verdict | label |")
    print("|---|---|---|---|---|---|")
    same_verdict = same_label = 0
    for key in both:
        (vb, lb, sb), (va, la, sa) = read(before[key]), read(after[key])
        same_verdict += vb == va
        same_label += vb == va and lb == la
        verdict = "same" if vb == va else "**changed**"
        label = "same" if lb == la else "**changed**"
        print(f"| {key[0]} | {key[1]} | {vb} {lb} {sb} | {va} {la} {sa} | {verdict} | {label} |")
    sides = [("after", after.keys() - before.keys())]
    if not after_only:
        sides.insert(0, ("before", before.keys() - after.keys()))
    for name, only in sides:
        for key in sorted(only):
            print(f"\nonly {name}: {key[0]} {key[1]}: {' '.join(read((before if name == 'before' else after)[key]))}")
    print(f"\n{len(both)} file(s) in both: {same_verdict} with the same verdict, {same_label} with the same verdict and label")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--after-only"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], "--after-only" in sys.argv[1:])
