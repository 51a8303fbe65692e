"""How far the compile pool gets with each submission of a `kbench import` tree, with no GPU.

    python3 benchmarks/pool_warmup.py TREE [--worker DIR] [--jobs N] [--json OUT]

For every submission under TREE/submissions (task files under TREE/tasks), in a fresh process
without a GPU, as the pool runs it: import the file, then construct `ModelNew` and call it on fake
CUDA tensors (`kbench_worker.roles.compile`). C++/CUDA loads are recorded, not built (`load_inline` and
`load` raise a build error at once), so this needs no nvcc. Prints how many files that build an
extension reach their build in the pool; the rest build, or fail to build, in the GPU slot.
`--worker` takes another checkout's `src/worker/python` to compare versions.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILDS = re.compile(r"load_inline|cpp_extension\.load|\bload\(")
# What torch says when it looks for a GPU and finds none (no driver, or none visible).
NO_GPU = re.compile(r"NVIDIA driver|No CUDA GPUs")


def one(submission, task):
    """In the child: the pool's two steps on one file, as one JSON line."""
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.roles import compile as pool

    loads = []

    def record(*args, **kwargs):
        loads.append(kwargs.get("name", args[0] if args else "?"))
        raise RuntimeError("Error building extension (recorded by pool_warmup.py, not built)")

    cpp_extension.load_inline = cpp_extension.load = record
    module, reply = pool.compile_file({"submission": submission, "task": task, "device": "cuda"})
    result = {"step": "import", "note": (reply.get("error") or {}).get("message", "")}
    if module is not None:
        warmed = pool.warm(module, {"task": task, "device": "cuda", "precision": "fp32"})
        result = {"step": warmed.get("reached", "build"), "note": warmed.get("note", "")}
    print(json.dumps({**result, "loads": loads}))


def run(submission, task, worker):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": "9.0", "PYTHONPATH": worker}
    # Submissions write files where they run: in a folder of their own.
    try:
        with tempfile.TemporaryDirectory() as here:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(submission.resolve()), str(task.resolve())],
                capture_output=True,
                text=True,
                timeout=240,
                env=env,
                cwd=here,
            ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {"step": "no result", "note": "", "loads": []}


def main():
    if sys.argv[1:2] == ["--one"]:
        return one(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser()
    parser.add_argument("tree", type=Path)
    parser.add_argument("--worker", type=lambda p: str(Path(p).resolve()), default=str(ROOT / "src" / "worker" / "python"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files = sorted((args.tree / "submissions").glob("level*/*.py"))
    task = lambda f: args.tree / "tasks" / f.parent.name / f.name  # noqa: E731
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(files, pool.map(lambda f: run(f, task(f), args.worker), files)))
    building = [f for f in files if BUILDS.search(f.read_text(errors="replace"))]
    reached = [f for f in building if results[f]["loads"]]
    no_gpu = [f for f in building if not results[f]["loads"] and NO_GPU.search(results[f]["note"])]
    print(
        f"{len(files)} files, {len(building)} build an extension: {len(reached)} reach their build in the pool, "
        f"{len(no_gpu)} stop first for want of a GPU, {len(building) - len(reached) - len(no_gpu)} stop first otherwise"
    )
    if args.json:
        args.json.write_text(json.dumps({str(f.relative_to(args.tree)): r for f, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
