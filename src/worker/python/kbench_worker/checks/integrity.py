"""Checks in the candidate worker that need its memory and interpreter.

`integrity.monkeypatch_snapshot`: the functions the candidate worker relies on to time and to
hand over results are the ones it started with.

A submission runs in the candidate worker's interpreter and could rebind
`torch.cuda.Event.elapsed_time`, `time.perf_counter` or this package's own functions to forge
timings. The identity (and code object) of each watched callable is captured before the
submission is imported and compared after the import and after every request but the timing
ones (their wall time is compared with the reference's), so after timing too; so is every
global of this package's modules (a module's clock, the module another one uses) and every
attribute of their classes. What is rebound and restored between two checks goes unseen here:
the trust model (docs/checks.md) does not rest on this check.
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
    ("torch", "default_generator"),
    ("torch.cuda", "default_generators"),
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
    # What the runtime checks read: a rebound one could hide what it reports.
    ("sys", "_current_frames"),
    ("_thread", "_count"),
    ("os", "listdir"),
    # The timed output check's choice of sample.
    ("os", "urandom"),
    ("torch.cuda", "empty_cache"),
    ("torch.cuda", "mem_get_info"),
    ("torch.Tensor", "fill_"),
    ("torch.Tensor", "view"),
    ("torch.Tensor", "untyped_storage"),
    ("torch.profiler", "profile"),
]

# This package's own modules the candidate worker runs, by their path in the package: every
# function and method in them is watched too.
OWN = [
    "task.models",
    "task.inputs",
    "task.params",
    "task.returns",
    "task.taskfile",
    "wire.errors",
    "wire.transfer",
    "wire.protocol",
    "wire.messages",
    "timing.seeds",
    "timing.offline",
    "timing.upstream",
    "timing.server",
    "timing.modes",
    "timing.kept",
    "timing.arms",
    "roles.candidate",
    "checks.kernels",
    "checks.integrity",
    "checks.log",
    "checks.outputs",
    "checks.poison",
    "checks.profile",
    "checks.runtime",
]
# Globals of those modules that change by design.
MUTABLE = {"checks.kernels.phase"}
# The package those paths are in.
PACKAGE = __package__.rpartition(".")[0]


def _resolve(module, path):
    obj = importlib.import_module(module) if module != "torch.Tensor" else importlib.import_module("torch").Tensor
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _fingerprint(obj):
    code = getattr(obj, "__code__", None)
    return (id(obj), id(code) if code is not None else None)


def _own_bindings():
    """Every global of this package's modules and every attribute of their classes, by name."""
    for name in OWN:
        module = sys.modules.get(f"{PACKAGE}.{name}")
        if module is None:
            continue
        for attr, value in list(vars(module).items()):
            if f"{name}.{attr}" in MUTABLE:
                continue
            yield f"{module.__name__}.{attr}", value
            if inspect.isclass(value) and value.__module__ == module.__name__:
                for member, bound in list(vars(value).items()):
                    yield f"{module.__name__}.{attr}.{member}", bound


def _current():
    seen = {}
    for module, path in LIBRARY:
        try:
            seen[f"{module}.{path}"] = _fingerprint(_resolve(module, path))
        except (AttributeError, ImportError):
            seen[f"{module}.{path}"] = None
    for name, value in _own_bindings():
        seen[name] = _fingerprint(value)
    return seen


class Snapshot:
    """What the watched names were bound to when the snapshot was taken."""

    def __init__(self):
        self._before = _current()

    def changed(self):
        """Names rebound since the snapshot (an empty list when nothing was touched)."""
        now = _current()
        return sorted(name for name, fp in self._before.items() if now.get(name) != fp)


def _span(t):
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return (t.device, start, start + storage.nbytes())


def aliased_outputs(out, inputs, model):
    """`outputs.alias`: outputs whose memory overlaps an input's, a parameter's or a buffer's.

    A kernel that returns (a view of) its input, fixed in place or not, passes on distributions
    where the op is the identity (ReLU on [0, 1)); KernelBench outputs are always new tensors.
    Checked before any attribute of an output is used beyond its type.
    """
    import torch

    from ..task import returns

    outputs = returns.tensors(out)
    owned = [("input", i, x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    owned += [("parameter", name, p) for name, p in model.named_parameters()]
    owned += [("buffer", name, b) for name, b in model.named_buffers()]
    spans = [(kind, name, _span(t)) for kind, name, t in owned if t.untyped_storage().nbytes()]
    found = []
    for i, o in enumerate(outputs):
        if type(o) is not torch.Tensor or not o.untyped_storage().nbytes():
            continue
        device, start, end = _span(o)
        for kind, name, (d, s, e) in spans:
            if d == device and start < e and s < end:
                found.append(f"output {i} shares memory with {kind} {name}")
    return found


def alias(out, inputs, model):
    """`outputs.alias` as a check: raises on shared memory, else (outcome, evidence). An output
    in an input's memory is a write into the caller's inputs; one in a parameter's or a buffer's
    is the module's own storage, handed out again on every call (CUDA-L1's published kernels
    return an `out=` buffer, and a zero buffer on a task whose output is constant). Both break
    the module contract, not the values: `errors.ContractError`."""
    from ..wire.errors import ContractError
    from ..wire.messages import CheckName

    aliased = aliased_outputs(out, inputs, model)
    if aliased:
        raise ContractError(f"{CheckName.OUTPUTS_ALIAS}: {'; '.join(aliased[:4])}")
    return "pass", "no output shares memory with an input, parameter or buffer"
