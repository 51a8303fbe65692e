"""Whether `params.perturbation`'s two paths in the candidate worker give ModelNew the same
parameters, on every submission of a `kbench import` tree, with no GPU.

    python3 benchmarks/perturb_check.py TREE [--jobs N] [--json OUT]

For every submission under TREE/submissions (task files under TREE/tasks), in a fresh process
without a GPU: the reference worker loads the task, says its parameters as built
(`params.built`, which a GPU reference worker sends) and perturbs them; two candidate workers
load the submission on the CPU (C++/CUDA loads raise a build error at once, so kernels that fall
back to PyTorch load, and no nvcc is needed). One is told the parameters as built
(`Candidate.perturb(seed, built)`: in place where ModelNew holds them), the other is not (it
builds the task's model and pairs). Both replies and every floating parameter of both ModelNews
must then be the same, bit for bit. Files whose ModelNew cannot be built on the CPU are counted
apart, as are those the in-place path does not take (it pairs, as the other).
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


def one(submission, task):
    """In the child: both paths, compared, as one JSON line."""
    import torch
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.roles import reference
    from kbench_worker.roles.candidate import Candidate
    from kbench_worker.task import params
    from kbench_worker.wire.messages import Load, Perturb

    def refuse(*args, **kwargs):
        raise RuntimeError("Error building extension (refused by perturb_check.py)")

    cpp_extension.load_inline = cpp_extension.load = refuse
    settings = {"device": "cpu", "precision": "fp32", "atol": 1e-2, "rtol": 1e-2, "task": task, "set": {}}
    ours = reference.Session(types.SimpleNamespace(startup_s=0.0))
    ours.load(Load(**settings))
    built = params.built(ours.reference.model)
    ours.perturb(Perturb(seed=5))
    try:
        told, untold = (Candidate(Load(**settings, submission=submission)) for _ in range(2))
    except Exception as exc:  # noqa: BLE001 - a submission that needs a GPU to load
        print(json.dumps({"outcome": "no ModelNew on the CPU", "note": f"{type(exc).__name__}: {str(exc)[:120]}"}))
        return
    in_place = params.own_parameters(built, dict(params.floating(told.model))) is not None
    replies = told.perturb(5, built), untold.perturb(5)
    a, b = params.floating(told.model), params.floating(untold.model)
    same = replies[0] == replies[1] and len(a) == len(b) and all(n == m and torch.equal(x, y) for (n, x), (m, y) in zip(a, b))
    outcome = ("in place" if in_place else "paired") + (", same" if same else ", differ")
    print(json.dumps({"outcome": outcome, "parameters": len(built), "note": "" if same else f"replies {replies}"}))


def run(submission, task):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(WORKER)}
    try:
        with tempfile.TemporaryDirectory() as here:  # what a submission writes goes there
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(submission.resolve()), str(task.resolve())],
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
                cwd=here,
            ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {"outcome": "no answer", "note": "timed out or died"}


def main():
    if sys.argv[1:2] == ["--one"]:
        return one(*sys.argv[2:4])
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
        if not result["outcome"].endswith(", same"):
            print(f"{name}: {result['outcome']} {result['note']}")
    print(f"{len(results)} submissions: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 1 if any(k.endswith("differ") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
