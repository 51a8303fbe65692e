"""Markdown table of a run against published results: `kbench eval --published` records the
published rows in results.json; this prints the verdict and class counts, the main causes of
what was not reproduced, and one row per evaluation (task, verdict, kbench's speedup and
interval, the published speedup, the class, the one-line reason).

    python3 benchmarks/published_table.py RESULTS_JSON [TITLE] > table.md

The class follows kbench's rule (src/published.rs): a passing, timed kernel is `reproduced`
when the published speedup lies inside or below kbench's interval, `inflated` when above it;
anything else is `not_reproduced`, its reason the cause.
"""

import collections
import re
import sys

from calibration_table import load  # the record, gzipped or not

REASON_CHARS = 160


def cls(evaluation, published):
    timing = evaluation.get("timing")
    if evaluation["verdict"] != "pass" or not timing or published is None:
        return "not_reproduced"
    return "reproduced" if published <= timing["speedup_ci_high"] else "inflated"


def cause(evaluation):
    """The reason with its numbers and quoted names blanked, so like causes count together."""
    text = re.sub(r"‘[^’]*’|'[^'\s]*'|\"[^\"]*\"", "X", evaluation["reason"])
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", text)
    return f"{evaluation['verdict']}: {text[:110]}"


def clip(text):
    text = " ".join(text.replace("|", "\\|").split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


def main():
    _, record = load(sys.argv[1])
    title = sys.argv[2] if len(sys.argv) > 2 else "kbench against published results"
    published = {row["submission"]: row["speedup"] for row in (record.get("published") or {}).get("rows", []) if row["submission"]}
    rows = []
    for e in record["evaluations"]:
        p = published.get(e["file"])
        rows.append((e, p, cls(e, p)))
    print(f"{title}\n")
    print(f"{len(rows)} evaluations; {len(published)} published rows with code.\n")
    verdicts = collections.Counter(e["verdict"] for e, _, _ in rows)
    classes = collections.Counter(c for _, _, c in rows)
    print("verdicts: " + ", ".join(f"{v} {n}" for v, n in verdicts.most_common()) + "\n")
    print("against published: " + ", ".join(f"{c} {n}" for c, n in classes.most_common()) + "\n")
    print("main causes of what was not reproduced:\n")
    for text, n in collections.Counter(cause(e) for e, _, c in rows if c == "not_reproduced").most_common(15):
        print(f"- {n} {clip(text)}")
    print("\n| task | verdict | kbench speedup [95% CI] | published | class | reason |")
    print("| --- | --- | --- | --- | --- | --- |")
    for e, p, c in rows:
        t = e.get("timing")
        speedup = f"{t['speedup']:.3f} [{t['speedup_ci_low']:.3f}, {t['speedup_ci_high']:.3f}]" if t else "-"
        task = e["file"].removesuffix(".py")
        print(f"| {task} | {e['verdict']} | {speedup} | {'-' if p is None else p} | {c} | {clip(e['reason'])} |")


if __name__ == "__main__":
    main()
