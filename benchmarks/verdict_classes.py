"""The classes `contract` and `environment` applied to past runs' records, offline.

    python3 benchmarks/verdict_classes.py [RESULTS_JSON_GZ ...]

(default: CUDA-L1's 210 kernels in reports/h100-targets, the GPU corpus and the attacks of
reports/h100-trust's last call). Each row's recorded verdict and reason are mapped by the rule
kbench now applies (`verdict::Cause::decide`, docs/checks.md "Verdicts"), from the check its
reason names:

- `contract`: `outputs.alias` (an output in an input's, a parameter's or a buffer's memory), the
  same output storage on every call (`outputs.independence`, or torch.compile's CUDA graphs
  raising on an output a later replay overwrote), inputs written by a kernel whose outputs were
  right (`forward modified its input(s)`), `params.perturbation` (right on the task's parameters,
  wrong on new values, or a task parameter with no partner in ModelNew);
- `environment`: a build cause that is known toolchain drift (`AT_DISPATCH` on `x.type()`, an
  architecture the installed nvcc dropped), whether the build failed the file or the module fell
  back to PyTorch.

`determinism.rerun` failures stay `incorrect`: whether the module kept state between calls (then
`contract`) is evidence the worker now gathers and these records do not hold. Prints the counts
per verdict before and after, and every row that changes. Standard library only.
"""

import collections
import gzip
import json
import re
import sys

DEFAULT = [
    "reports/h100-targets/cuda-l1.results.json.gz",
    "reports/h100-trust/call3-corpus.results.json.gz",
    "reports/h100-trust/call1-new-attacks.results.json.gz",
]
DRIFT = re.compile(r"^(environment: |.*(DeprecatedTypeProperties.*ScalarType|Unsupported gpu architecture))")
CONTRACT = re.compile(
    r"outputs\.alias: |forward returns the same output storage on every call|forward modified its input\(s\)"
    r"|^params\.perturbation|accessing tensor output of CUDAGraphs that has been overwritten"
)


def new_class(verdict, reason):
    """The class a row's verdict and reason map to."""
    if verdict in ("compile_error", "no_kernel") and DRIFT.match(reason):
        return "environment"
    if verdict in ("incorrect", "cheat", "runtime_error") and CONTRACT.search(reason):
        return "contract"
    return verdict


def main(paths):
    for path in paths:
        with gzip.open(path, "rt") as f:
            rows = json.load(f)["evaluations"]
        before, after, changed = collections.Counter(), collections.Counter(), []
        for row in rows:
            old = row["verdict"]
            new = new_class(old, row["reason"])
            before[old] += 1
            after[new] += 1
            if new != old:
                task = row["task"]
                changed.append(f"  level{task['level']}/{task['number']} {row['file']}: {old} -> {new}: {row['reason'][:150]}")
        print(f"{path}: {len(rows)} rows")
        print("  before: " + ", ".join(f"{v} {n}" for v, n in before.most_common()))
        print("  after:  " + ", ".join(f"{v} {n}" for v, n in after.most_common()))
        print(f"  {len(changed)} changed:")
        print("\n".join(sorted(changed)))


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
