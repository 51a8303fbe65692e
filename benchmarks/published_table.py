"""Markdown table of a run against published results: `kbench eval --published` records the
published rows in results.json; this prints the verdict and class counts, the main causes of
what was wrong or not judged, and one row per evaluation (task, verdict, kbench's speedup and
interval, the published speedup, the class, the one-line reason).

    python3 benchmarks/published_table.py RESULTS_JSON [TITLE] > table.md

The class follows kbench's rule (src/published.rs, docs/usage.md): a timed `pass`, `no_kernel`
or `contract` is `reproduced`, `reproduced_no_kernel` or `reproduced_contract` when the published
speedup lies inside or below kbench's interval, `slower` when above it; `incorrect` and `cheat`
are `wrong`; anything else is `not_judged`, its reason the cause. The source's own correctness
(`published_incorrect`) is not read here.
"""

import collections
import re
import sys

from calibration_table import load  # the record, gzipped or not

REASON_CHARS = 160


REPRODUCED = {"pass": "reproduced", "no_kernel": "reproduced_no_kernel", "contract": "reproduced_contract"}


def cls(evaluation, published):
    verdict, timing = evaluation["verdict"], evaluation.get("timing")
    if verdict in ("incorrect", "cheat") or (verdict == "contract" and evaluation.get("kernelbench_correct") is False):
        return "wrong"
    if verdict not in REPRODUCED or not timing or timing.get("invalid"):
        return "not_judged"
    if published is None:
        return "no_published_speedup"
    return REPRODUCED[verdict] if published <= timing["speedup_ci_high"] else "slower"


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
    print("main causes of what was wrong or not judged:\n")
    for text, n in collections.Counter(cause(e) for e, _, c in rows if c in ("wrong", "not_judged")).most_common(15):
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
