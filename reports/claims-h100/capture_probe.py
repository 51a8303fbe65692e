"""Why CUDA-L1's level2/5 and 2/85 leave the GPU's generator capturing: their ModelNew begins a
CUDA graph capture inside a `try`, and on failure goes on in eager mode. Outside kbench, this
builds each task's model and the submission as KernelBench's eval would (inputs drawn on the CPU,
then moved), records what ended the capture (the exception inside the `with torch.cuda.graph`
block, or the one its exit raised), whether the module's graph is ready after the call, and
whether a random draw on the GPU still works afterwards.

    python3 reports/claims-h100/capture_probe.py [--draw-first] TREE level2/5 level2/85

With --draw-first the GPU's generator is seeded and drawn from before the model is built, as
kbench's worker draws its inputs on the GPU: whether a generator already in use is what a failed
capture leaves capturing.
"""

import importlib.util
import sys
from pathlib import Path

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(tree, task, draw_first):
    level, number = task.split("/")
    ref = next(Path(tree, "tasks", level).glob(f"{number}_*.py"))
    sub = Path(tree, "submissions", level, ref.name)
    seen = []
    original = torch.cuda.graph.__exit__

    def logged_exit(self, kind, value, tb):
        if kind is not None:
            seen.append(f"inside the capture: {kind.__name__}: {str(value).splitlines()[0][:300]}")
        try:
            return original(self, kind, value, tb)
        except Exception as exc:
            seen.append(f"ending the capture: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            raise

    torch.cuda.graph.__exit__ = logged_exit
    try:
        task_module = load(ref, "task")
        torch.manual_seed(0)
        if draw_first:
            torch.cuda.manual_seed(0)
            torch.randn(4, device="cuda")
        model = load(sub, "submission").ModelNew(*task_module.get_init_inputs()).cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task_module.get_inputs()]
        with torch.no_grad():
            model(*inputs)
        torch.cuda.synchronize()
        ready = getattr(model, "graph_ready", None)
        try:
            torch.randn(4, device="cuda")
            draw = "a random draw on the GPU works"
        except RuntimeError as exc:
            draw = f"a random draw on the GPU fails: {str(exc).splitlines()[0]}"
        first = " (GPU generator drawn from first)" if draw_first else ""
        print(f"{task}{first}: graph_ready={ready}; {'; '.join(seen) or 'the capture raised nothing'}; {draw}")
    finally:
        torch.cuda.graph.__exit__ = original


if __name__ == "__main__":
    args = sys.argv[1:]
    draw_first = "--draw-first" in args
    args = [a for a in args if a != "--draw-first"]
    tree = args[0]
    for task in args[1:]:
        try:
            probe(tree, task, draw_first)
        except Exception as exc:  # noqa: BLE001 - report and go on to the next task
            print(f"{task}: the probe itself failed: {type(exc).__name__}: {exc}")
