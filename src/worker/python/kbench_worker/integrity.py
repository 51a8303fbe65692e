"""Check `integrity.monkeypatch_snapshot`: the functions the candidate worker relies on to time
and to hand over results are the ones it started with.

A submission runs in the candidate worker's interpreter and could rebind
`torch.cuda.Event.elapsed_time`, `time.perf_counter` or this package's own functions to forge
timings. The identity (and code object) of each watched callable is captured before the
submission is imported and compared after the import and after every request.
"""

import importlib
import inspect
import sys

# (module, attribute path) of library callables the timing and transfer paths use.
LIBRARY = [
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("torch", "sum"),
    ("torch", "save"),
    ("torch", "equal"),
    ("torch", "allclose"),
    ("torch", "manual_seed"),
    ("torch.cuda", "synchronize"),
    ("torch.cuda", "_sleep"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "Event.record"),
    ("torch.cuda", "Event.synchronize"),
    ("torch.cuda", "Event.elapsed_time"),
    ("torch.multiprocessing.reductions", "reduce_tensor"),
    ("torch.Tensor", "clone"),
    ("torch.Tensor", "to"),
    ("torch.Tensor", "detach"),
    ("torch.Tensor", "contiguous"),
]

# This package's own modules: every function and method in them is watched too.
OWN = ["harness", "timing", "transfer", "protocol", "candidate", "kernels", "taskfile"]


def _resolve(module, path):
    obj = importlib.import_module(module) if module != "torch.Tensor" else importlib.import_module("torch").Tensor
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _fingerprint(obj):
    code = getattr(obj, "__code__", None)
    return (id(obj), id(code) if code is not None else None)


def _own_callables():
    for name in OWN:
        module = sys.modules.get(f"{__package__}.{name}")
        if module is None:
            continue
        for attr, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                yield f"{module.__name__}.{attr}", value
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for method, fn in vars(value).items():
                    if inspect.isfunction(fn):
                        yield f"{module.__name__}.{attr}.{method}", fn


def _current():
    seen = {}
    for module, path in LIBRARY:
        try:
            seen[f"{module}.{path}"] = _fingerprint(_resolve(module, path))
        except (AttributeError, ImportError):
            seen[f"{module}.{path}"] = None
    for name, fn in _own_callables():
        seen[name] = _fingerprint(fn)
    return seen


class Snapshot:
    """What the watched names were bound to when the snapshot was taken."""

    def __init__(self):
        self._before = _current()

    def changed(self):
        """Names rebound since the snapshot (an empty list when nothing was touched)."""
        now = _current()
        return sorted(name for name, fp in self._before.items() if now.get(name) != fp)
