"""kbench's `kernelbench_correct` beside upstream KernelBench's own eval (issue 31).

    python3 benchmarks/oracle_compare.py ORACLE.jsonl[.gz] [--also ORACLE2.jsonl[.gz]]... \
        RESULTS.json[.gz]... > table.md

ORACLE is benchmarks/kernelbench_oracle.py's output; each --also is a later oracle run whose rows
replace ORACLE's at the tolerances they hold (a rerun of some rows at one tolerance); each RESULTS is a kbench results.json of the
same files (or of a part of them: the rows of records at one tolerance are joined, a later record's
row replacing an earlier one's), judged at its `config.kernelbench_tolerance`. One run serves every tolerance the
oracle holds: at its own tolerance its `kernelbench_correct` (allclose) is kbench's verdict, at
another `kernelbench_needed <= tolerance` is (the least tolerance its trials pass; records before
it need a run per tolerance). Rows are matched by task (level, number). A verdict is "correct" only where it is true: kbench's
`kernelbench_correct` missing (a compile error, a skip) and an upstream error (a timeout, a
crash) both count as not correct, as KernelBench counts them. Prints one table with both verdicts
side by side per tolerance, the agreement per tolerance, the counts per kbench verdict class, and
each disagreeing row with kbench's reason and upstream's error or metadata.
"""

import argparse
import gzip
import json
import sys
from collections import Counter


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def kbench_runs(paths):
    """{tolerance: {(level, number): evaluation}}"""
    runs = {}
    for path in paths:
        record = load_json(path)
        tol = record["config"].get("kernelbench_tolerance")
        if tol is None:
            sys.exit(f"{path}: no config.kernelbench_tolerance (a record from before it)")
        rows = runs.setdefault(float(tol), {})
        rows.update({(e["task"]["level"], e["task"]["number"]): e for e in record["evaluations"]})
    return runs


def oracle_rows(*paths):
    """{(level, number): {tolerance: upstream's result}}; a later file's result replaces an
    earlier one's for its row and tolerance."""
    rows = {}
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    rows.setdefault((r["level"], r["number"]), {}).update({float(t): v for t, v in r["tolerances"].items()})
    return rows


def kbench_says(e, run_tol, t):
    """kbench's KernelBench verdict on evaluation ``e`` of a run at ``run_tol``, at tolerance ``t``
    (None: the record cannot say)."""
    if e is None or e.get("kernelbench_correct") is None:
        return None
    if run_tol == t:
        return e["kernelbench_correct"]
    needed = e.get("kernelbench_needed")
    return None if needed is None else needed <= t


def upstream_says(result):
    return result is not None and result.get("correctness") is True


def upstream_detail(result):
    if result is None:
        return "not run"
    if "error" in result:
        return f"error: {result['error']}"
    meta = result.get("metadata", {})
    keep = [k for k in meta if k not in ("hardware", "device")]
    shown = "; ".join(f"{k}={meta[k]}" for k in keep)
    return f"compiled={result.get('compiled')} correctness={result.get('correctness')}" + (f"; {shown}" if shown else "")


def cell(text, width=160):
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def yes_no(value):
    return {True: "yes", False: "no", None: "-"}[value]


def compare(oracle, runs):
    tolerances = sorted(set(runs) | {t for r in oracle.values() for t in r})
    tasks = sorted(set().union(*(r.keys() for r in runs.values())) | set(oracle))
    out = []
    head = ["task", "kbench verdict"]
    for t in tolerances:
        head += [f"kbench {t:g}", f"upstream {t:g}"]
    out += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    agree = {t: Counter() for t in tolerances}
    classes = Counter()
    differ = []
    for task in tasks:
        ev = next((r[task] for r in runs.values() if task in r), None)
        verdict = ev["verdict"] if ev else "-"
        classes[verdict] += 1
        row = [f"level{task[0]}/{task[1]}", verdict]
        for t in tolerances:
            run_tol = t if t in runs else next(iter(sorted(runs)))
            e = runs[run_tol].get(task)
            up = oracle.get(task, {}).get(t)
            mine = kbench_says(e, run_tol, t)
            row += [yes_no(mine), yes_no(upstream_says(up)) if up is not None else "-"]
            if mine is None and e is not None and e.get("kernelbench_correct") is not None:
                agree[t]["missing"] += 1  # a record without kernelbench_needed, at another tolerance
                continue
            if e is None or up is None:
                agree[t]["missing"] += 1
                continue
            same = (mine is True) == upstream_says(up)
            agree[t]["agree" if same else "differ"] += 1
            if not same:
                differ.append((task, t, e, mine, up))
        out.append("| " + " | ".join(row) + " |")
    out += ["", "| tolerance | rows compared | agree | differ | missing on one side |", "| --- | --- | --- | --- | --- |"]
    for t in tolerances:
        c = agree[t]
        out.append(f"| {t:g} | {c['agree'] + c['differ']} | {c['agree']} | {c['differ']} | {c['missing']} |")
    out += ["", "| kbench verdict | rows |", "| --- | --- |"]
    out += [f"| {v} | {n} |" for v, n in sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))]
    out += ["", f"Disagreements: {len(differ)}", ""]
    if differ:
        out += ["| task | tolerance | kbench verdict | kbench's KernelBench verdict | kbench's reason | upstream |", "| --- | --- | --- | --- | --- | --- |"]
        for task, t, e, mine, up in differ:
            out.append(f"| level{task[0]}/{task[1]} | {t:g} | {e['verdict']} | {yes_no(mine)} | {cell(e.get('reason', ''))} | {cell(upstream_detail(up))} |")
    return "\n".join(out) + "\n", agree


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("oracle")
    p.add_argument("--also", action="append", default=[], help="a later oracle run: its rows replace ORACLE's at its tolerances")
    p.add_argument("results", nargs="+")
    args = p.parse_args(argv)
    table, _ = compare(oracle_rows(args.oracle, *args.also), kbench_runs(args.results))
    sys.stdout.write(table)


if __name__ == "__main__":
    main()
