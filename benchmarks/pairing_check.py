"""Whether `params.perturbation`'s pairing sees the same parameters when the candidate worker
reads them from the reference worker's file as when it builds the task's model itself, on every
submission of a `kbench import` tree, with no GPU.

    python3 benchmarks/pairing_check.py TREE [--jobs N] [--json OUT]

For every submission under TREE/submissions (task files under TREE/tasks), in a fresh process
without a GPU: the reference worker loads the task and writes its parameters for the candidate
(`reference.Session.perturb`); a candidate worker loads the submission on the CPU (C++/CUDA
loads raise a build error at once, so kernels that fall back to PyTorch load, and no nvcc is
needed); then the parameters the candidate reads from the file and those it builds must be the
same names, dtypes, shapes and bits, and pair with ModelNew's alike (`harness.pair`). Files whose
ModelNew cannot be built on the CPU are counted apart.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "src" / "worker" / "python"


def one(submission, task, folder):
    """In the child: both ways to the task's parameters, compared, as one JSON line."""
    import torch
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker import harness, reference
    from kbench_worker.candidate import Candidate
    from kbench_worker.messages import Load, Perturb

    def refuse(*args, **kwargs):
        raise RuntimeError("Error building extension (refused by pairing_check.py)")

    cpp_extension.load_inline = cpp_extension.load = refuse
    settings = {"device": "cpu", "precision": "fp32", "atol": 1e-2, "rtol": 1e-2, "task": task, "set": {}}
    ours = reference.Session(types.SimpleNamespace(startup_s=0.0))
    ours.load(Load(**settings))
    path = os.path.join(folder, "params.pt")
    ours.perturb(Perturb(seed=5, params=path))
    try:
        candidate = Candidate(Load(**settings, submission=submission))
    except Exception as exc:  # noqa: BLE001 - a submission that needs a GPU to load
        print(json.dumps({"outcome": "no ModelNew on the CPU", "note": f"{type(exc).__name__}: {str(exc)[:120]}"}))
        return
    read, built = candidate.reference_parameters(path), candidate.reference_parameters(None)
    same = [a == b and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for (a, x), (b, y) in zip(read, built)]
    ours_list = list(harness.floating(candidate.model))
    paired = harness.pair(read, ours_list) == harness.pair(built, ours_list)
    outcome = "same" if len(read) == len(built) and all(same) and paired else "differ"
    print(json.dumps({"outcome": outcome, "parameters": len(built), "note": "" if outcome == "same" else f"{len(read)} read, {len(built)} built, pairs alike: {paired}"}))


def run(submission, task):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(WORKER)}
    try:
        with tempfile.TemporaryDirectory() as here:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(submission.resolve()), str(task.resolve()), here],
                capture_output=True, text=True, timeout=600, env=env, cwd=here,
            ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {"outcome": "no answer", "note": "timed out or died"}


def main():
    if sys.argv[1:2] == ["--one"]:
        return one(*sys.argv[2:5])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = []
    for submission in sorted((args.tree / "submissions").glob("level*/*.py")):
        work.append((submission, args.tree / "tasks" / submission.parent.name / submission.name))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip((str(s.relative_to(args.tree)) for s, _ in work), pool.map(lambda w: run(*w), work)))
    counts = {}
    for name, result in results.items():
        counts[result["outcome"]] = counts.get(result["outcome"], 0) + 1
        if result["outcome"] != "same":
            print(f"{name}: {result['outcome']} {result['note']}")
    print(f"{len(results)} submissions: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 1 if counts.get("differ") else 0


if __name__ == "__main__":
    sys.exit(main())
