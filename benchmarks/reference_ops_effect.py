"""What `profile.reference_ops` would decide on past runs' `pass` rows at levels 2-3.

    python3 benchmarks/reference_ops_effect.py [RESULTS ...]

RESULTS: results.json, results.json.gz, or a tarball holding results.json (default: every
`*.results.json.gz` and `corpus.tar.gz` under reports/). The rule turns a `pass` into `no_kernel`
where the candidate's profiled call ran every kernel launch of the reference's (by name, at
least as many launches) and library kernels took more than half its GPU time, on a call of at
least 20 µs, under any `--library-policy` but `any`; level 1 is left out (its library share
decides first, at the same limit). A record with both arms' launches (`profile`, recorded since
the rule) is replayed exactly. An older one holds only the library share
(`profile.library_share`'s evidence): its rows with more than half in library kernels are listed
as the rows the rule could turn, which its launches would decide. Standard library only.
"""

import gzip
import json
import re
import sys
import tarfile
from collections import Counter
from pathlib import Path

MAX_LIBRARY_SHARE = 0.5
JUDGED_FROM_MS = 0.02
SHARE = re.compile(r"library kernels (\d+)% of ([0-9.]+) ms GPU time")


def load(path):
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            return json.load(tar.extractfile("results.json"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def replay(profile):
    """(turns, why) from both arms' recorded launches."""
    launched = Counter()
    for k in profile["candidate"]:
        launched[k["name"]] += k["launches"]
    reference = [k for k in profile["reference"] if k["launches"] > 0]
    missing = [k["name"] for k in reference if launched[k["name"]] < k["launches"]]
    total = sum(k["ms"] for k in profile["candidate"])
    own = sum(k["ms"] for k in profile["candidate"] if k.get("own"))
    share = own / total if total else 0.0
    turns = bool(reference) and not missing and total >= JUDGED_FROM_MS and share < 1 - MAX_LIBRARY_SHARE
    launches = sum(k["launches"] for k in reference)
    why = f"{launches - len(missing)}+ of {launches} reference launches seen, {len(missing)} kernel(s) short; own {share:.0%} of {total:.3f} ms"
    return turns, why


def main(paths):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src" / "worker" / "python"))
    from kbench_worker.wire.messages import CheckName  # standard library only

    empty = []
    for path in paths:
        record = load(path)
        if record["config"].get("library_policy") == "any":
            print(f"{path}: --library-policy any, the rule does not apply\n")
            continue
        rows = [r for r in record["evaluations"] if r["verdict"] == "pass" and r["task"]["level"] >= 2]
        if not rows:
            empty.append(path)
            continue
        turned, could, stays = [], [], []
        for row in rows:
            name = row["file"]
            if row.get("profile"):
                turns, why = replay(row["profile"])
                (turned if turns else stays).append(f"{name}: {why}")
                continue
            found = next((SHARE.search(c["evidence"]) for c in row.get("checks", []) if c["name"] == CheckName.PROFILE_LIBRARY_SHARE), None)
            if found is None:
                stays.append(f"{name}: no profile (CPU)")
                continue
            share, total = int(found[1]) / 100, float(found[2])
            line = f"{name}: library kernels {share:.0%} of {total:.3f} ms"
            if share > MAX_LIBRARY_SHARE and total >= JUDGED_FROM_MS:
                could.append(line + "; launches not recorded")
            else:
                stays.append(line)
        print(f"{path}: {len(rows)} pass rows at levels 2-3")
        for title, lines in (
            ("Turn no_kernel (replayed)", turned),
            ("Could turn no_kernel (library share above one half; the launches decide)", could),
            ("Stay pass", stays),
        ):
            print(f"  {title}: {len(lines)}")
            for line in lines:
                print(f"    {line}")
        print()
    print(f"{len(empty)} other file(s) without a pass row at levels 2-3: {', '.join(str(p) for p in empty)}")


if __name__ == "__main__":
    given = [Path(p) for p in sys.argv[1:]]
    main(given or sorted(Path("reports").glob("**/*.results.json.gz")) + sorted(Path("reports").glob("**/corpus.tar.gz")))
