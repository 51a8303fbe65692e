"""What `precision.fp64_judged` would decide on a past run's `incorrect` rows.

    python3 benchmarks/fp64_rule_effect.py [RESULTS_JSON_GZ]

(default: reports/h100-targets/cuda-l1.results.json.gz). A row whose reason holds "against
float64 its RMS error is X x PyTorch fp32's, its largest error Y x" missed the tolerance on its
first trial; the rule makes it correct where X and Y are both at most 2, unless the reference is
ill-conditioned (PyTorch fp32's own RMS error against float64 above 1 % of the output's RMS).
The record holds no such RMS; where its reason gives max|ref| (a scaled tolerance), PyTorch
fp32's largest error against float64 is at least max abs diff / (1 + Y) (triangle inequality), so
a bound above 1 % of max|ref| shows the row ill-conditioned: it is inconclusive, not failed (correct)
where its max abs diff is within the unscaled atol, else the tolerance verdict stands. Other rows'
conditioning is not in the record: they are listed as turning correct only if float64 agrees with
fp32. Standard library only.
"""

import gzip
import json
import re
import sys

LIMIT = 2.0
ILL_CONDITIONED = 0.01
RATIOS = re.compile(r"against float64 its RMS error is ([0-9.e+-]+) x PyTorch fp32's, its largest error ([0-9.e+-]+) x")
PEAK = re.compile(r"1% of max\|ref\| ([0-9.e+-]+)")
ATOL = re.compile(r"atol ([0-9.e+-]+) scaled")


def main(path):
    with gzip.open(path, "rt") as f:
        rows = json.load(f)["evaluations"]
    turned, inconclusive, stands, stays = [], [], [], []
    for row in rows:
        found = RATIOS.search(row.get("reason") or "")
        if row["verdict"] != "incorrect" or not found:
            continue
        rms, largest = float(found[1]), float(found[2])
        task = row["task"]
        name = f"level{task['level']}/{task['number']} {row['task_name']}"
        diff = max(t.get("max_abs_diff") or 0.0 for t in row["trials"]) if row["trials"] else float("nan")
        line = f"{name}: RMS {rms:.3g}x, largest {largest:.3g}x, max abs diff {diff:.3g}"
        if max(rms, largest) > LIMIT:
            stays.append(line)
            continue
        peak = PEAK.search(row["reason"])
        if peak:
            bound = diff / (1 + largest) / float(peak[1])
            line += f"; PyTorch fp32's largest error >= {bound:.2g} of max|ref|"
            if bound > ILL_CONDITIONED:
                atol = ATOL.search(row["reason"])
                (inconclusive if atol and diff <= float(atol[1]) else stands).append(line)
                continue
        else:
            line += "; conditioning not in the record"
        turned.append(line)
    print(f"{path}: {len(rows)} rows, {len(turned) + len(inconclusive) + len(stands) + len(stays)} incorrect with float64 ratios\n")
    for title, lines in (
        (f"Turn correct (both ratios <= {LIMIT:g}, unless float64 shows the reference ill-conditioned)", turned),
        ("Ill-conditioned and within the unscaled atol: inconclusive, not failed (correct)", inconclusive),
        ("Ill-conditioned beyond the unscaled atol: the tolerance verdict stands", stands),
        (f"Stay incorrect (a ratio above {LIMIT:g})", stays),
    ):
        print(f"{title}: {len(lines)}")
        for line in lines:
            print(f"  {line}")
        print()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reports/h100-targets/cuda-l1.results.json.gz")
