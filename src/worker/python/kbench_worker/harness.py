"""What the reference and candidate workers do alike: seeding, building models, making inputs.

Both sides follow KernelBench's contract so that weights match: seed 42 before
get_init_inputs and before the constructor, build on the CPU, then move to the device.
Inputs are made directly on the target device from a per-trial seed, so both workers hold
identical inputs without copying them (and without a multi-GB detour through host memory).
"""

import itertools
import json

import torch

from . import cause, taskfile
from .protocol import error

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def seed_generators(value):
    """What torch.manual_seed does to the generators a worker draws from (the CPU's and each
    visible GPU's, once CUDA is initialized, as it is in a worker), without its ~0.2 ms of host
    time (it also walks MPS, XPU and MTIA, and torch._dynamo wraps it): a burst seeds each call
    inside the timed interval, and the warm-up's submission time sizes the blocker."""
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_initialized():
        for generator in torch.cuda.default_generators:
            generator.manual_seed(value)


def init_inputs(task):
    seed_generators(42)
    return task.get_init_inputs()


def build(cls, init, device, precision):
    seed_generators(42)
    model = cls(*init)
    return model.to(device=device, dtype=DTYPES[precision]) if precision != "fp32" else model.to(device)


# Where each loaded task came from, so a shape variant can load it again with more constants.
_SOURCES = {}
# Task modules re-loaded for a shape variant, by (task module name, constants).
_SHAPED = {}


def load_task(path, overrides):
    """Load a task file as both workers do, remembering how, for shape variants."""
    task = taskfile.load(path, overrides)
    _SOURCES[task.__name__] = (path, overrides)
    return task


def forget_tasks():
    """Forget every task loaded so far and its shape variants: the next load starts as in a fresh
    worker (a kept reference worker's next candidate, kbench `pipeline::reuse`)."""
    _SOURCES.clear()
    _SHAPED.clear()


def _shaped(task, values):
    """The task re-loaded with more constants (`inputs.shape_perturbation`), once per set."""
    key = (task.__name__, json.dumps(values, sort_keys=True))
    if key not in _SHAPED:
        path, overrides = _SOURCES[task.__name__]
        name = f"{task.__name__}_shape{len(_SHAPED)}"
        _SHAPED[key] = taskfile.load(path, {**overrides, **values}, module_name=name)
    return _SHAPED[key]


def _transform(x, variant):
    """`inputs.distribution_perturbation` on one floating input: signed inputs make in-place
    fixes and identity shortcuts (ReLU on [0, 1)) visible; scaled inputs move outputs to O(1).
    `inputs.mean_shift`: the input offset by ``spreads`` times its standard deviation, so a
    variance taken as E[x^2] - E[x]^2 in fp32 cancels catastrophically (zero-mean inputs hide it).
    Exact zeros stay zero: they are the input's structure (a triangular matrix), which a kernel may
    rely on as the task defines it; random values are never exactly zero."""
    if variant["kind"] == "signed":
        y = x * 2 - 1 if x.numel() and x.min() >= 0 else x
    elif variant["kind"] == "scaled":
        y = x * variant["factor"]
    elif variant["kind"] == "shifted":
        y = x + variant["spreads"] * x.std() if x.numel() > 1 else x
    else:
        raise ValueError(f"unknown input variant {variant['kind']!r}")
    zeros = x == 0
    return y.masked_fill_(zeros, 0) if y is not x and zeros.any() else y


def make_inputs(task, seed, device, precision, variant=None):
    """The inputs of one trial, identical in both workers for the same seed and variant."""
    if variant is not None and variant["kind"] == "shape":
        task, variant = _shaped(task, variant["set"]), None
    seed_generators(seed)
    with torch.device(device):
        inputs = task.get_inputs()
    if variant is not None:
        inputs = [_transform(x, variant) if _floating(x) else x for x in inputs]
    dtype = DTYPES[precision]
    # Integer and boolean inputs keep their dtype (upstream casts labels to float and breaks L1/95).
    return [x.to(dtype) if _floating(x) else x for x in inputs]


def _floating(x):
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def shapes(inputs):
    """Each input's shape (None for a non-tensor argument), to show what a trial ran."""
    return [list(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs]


def forward(model, inputs, seed):
    """One call, with the RNG seeded so that references that draw random numbers repeat."""
    seed_generators(seed)
    with torch.no_grad():
        return model(*inputs)


def nbytes(values):
    """Bytes of the tensors among ``values``."""
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def release_memory(device):
    """Give cached GPU memory back: the other worker on this GPU may need it next."""
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def perturb(model, seed):
    """`params.perturbation`: give every floating parameter new values, the same in both workers
    (same seed, same order, same shapes): w * (1 + U(-0.5, 0.5)) + 0.1 * mean|w| * U(-1, 1).
    A kernel that relies on default initialisation (LayerNorm's weight 1 and bias 0, a zero bias)
    stops matching. Returns the parameter shapes in order, so kbench can check both workers
    perturbed the same list."""
    return perturb_tensors([p for _, p in floating(model)], seed)


def kept_values(tensors):
    """Copies of the values `perturb` is about to change, for `restore`."""
    with torch.no_grad():
        return [(p, p.detach().clone()) for p in tensors]


def restore(kept):
    """Put back what `kept_values` copied, in place (a kernel that holds a parameter's address,
    a CUDA graph's, reads the values as built again)."""
    with torch.no_grad():
        for p, values in kept:
            p.copy_(values)


def perturb_tensors(tensors, seed):
    """`perturb` on a model's floating parameters, given in registration order."""
    shapes = []
    with torch.no_grad():
        for p in tensors:
            shapes.append(list(p.shape))
            g = torch.Generator(device=p.device).manual_seed(seed + len(shapes))
            scale = p.abs().mean().item() if p.numel() else 0.0
            u1 = torch.rand(p.shape, generator=g, device=p.device, dtype=p.dtype) - 0.5
            u2 = torch.rand(p.shape, generator=g, device=p.device, dtype=p.dtype) * 2 - 1
            p.mul_(1 + u1).add_(u2 * (0.1 * (scale or 1.0)))
    return shapes


# `digest`'s chunk, in elements: its int64 working copies stay near 100 MB on the device.
DIGEST_CHUNK = 1 << 22
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def digest(t):
    """A digest of a tensor's values, computed where it lies: the sum, modulo 2**64, of each
    element's bits times an odd weight that depends on its position (integer arithmetic, so the
    same in any order of reduction). Equal tensors have equal digests; two that differ almost
    never do, a reordering of the same values included. Hex."""
    bits = t.detach().contiguous().reshape(-1).view(_BITS[t.element_size()])
    total = torch.zeros((), dtype=torch.int64, device=t.device)
    for start in range(0, bits.numel(), DIGEST_CHUNK):
        chunk = bits[start : start + DIGEST_CHUNK].to(torch.int64)
        weights = torch.arange(start, start + chunk.numel(), dtype=torch.int64, device=t.device)
        total += (chunk * (weights * 0x5851F42D4C957F2D + 0x14057B7EF767814F)).sum()
    return f"{int(total) & (1 << 64) - 1:016x}"


def built(model):
    """The model's floating parameters as `own_parameters` matches them: name, shape,
    dtype and `digest`, in registration order."""
    return [{"name": name, "shape": list(p.shape), "dtype": str(p.dtype), "digest": digest(p)} for name, p in floating(model)]


def own_parameters(as_built, ours):
    """ModelNew's parameters (``ours``, by name) in the order of the task's, where each of
    the task's as the reference worker built them (``as_built``: name, shape, dtype, digest)
    is one of ModelNew's by name with the same values (`digest`), contiguous like
    the task's (perturbing another layout reduces in another order: new values a rounding
    apart), no two of them sharing memory (a parameter perturbed twice); else None."""
    if not as_built:
        return None
    own = [ours.get(b["name"]) for b in as_built]
    if any(p is None or list(p.shape) != b["shape"] or str(p.dtype) != b["dtype"] or not p.is_contiguous() for p, b in zip(own, as_built)):
        return None
    if len({p.untyped_storage().data_ptr() for p in own}) < len(own):
        return None
    try:
        if any(digest(p) != b["digest"] for p, b in zip(own, as_built)):
            return None
    except torch.cuda.OutOfMemoryError:
        return None
    return own


def floating(model):
    """The model's floating parameters by name, in registration order (what `perturb` changes)."""
    return [(name, p) for name, p in model.named_parameters() if p.is_floating_point()]


def pair(reference, candidate):
    """`params.perturbation`'s pairing: each of the candidate's parameters with the reference's
    that is the same parameter, by what it is, not where it was registered. In turn: the same
    name (and size); the same values in the same shape; the same values up to a transpose and a
    reshape (a weight stored transposed or flattened); the same shape, in registration order
    (the same shapes registered in another order). Values are compared before perturbing, so the
    constant initialisations (ones, zeros) pair in registration order too. ``reference`` and
    ``candidate`` are (name, tensor) lists. Returns (pairs, missing, extra): (candidate name,
    reference name, dims) for each pair, the candidate's tensor being the reference's permuted
    by dims and reshaped; the reference's parameters without a counterpart; the candidate's."""
    ref, cand, pairs = dict(reference), dict(candidate), []

    def take(match):
        for c, ct in list(cand.items()):
            for r, rt in ref.items():
                dims = match(c, ct, r, rt)
                if dims is not None:
                    pairs.append((c, r, dims))
                    del cand[c], ref[r]
                    break

    same = lambda rt: tuple(range(rt.dim()))  # noqa: E731
    take(lambda c, ct, r, rt: (_layout(rt, ct) or same(rt)) if c == r and ct.numel() == rt.numel() else None)
    take(lambda c, ct, r, rt: same(rt) if ct.shape == rt.shape and torch.equal(ct, rt) else None)
    take(lambda c, ct, r, rt: _layout(rt, ct))
    take(lambda c, ct, r, rt: same(rt) if ct.shape == rt.shape else None)
    return pairs, list(ref), list(cand)


def _layout(r, c):
    """The order of ``r``'s dimensions that, reshaped, holds ``c``'s values, or None."""
    if r.numel() != c.numel() or r.dtype != c.dtype:
        return None
    flat = c.reshape(-1)
    return next((dims for dims in itertools.permutations(range(r.dim())) if torch.equal(r.permute(dims).reshape(-1), flat)), None)


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def classify(exc, phase, kind=None):
    """Map an exception raised by task or submission code to a protocol error: its kind is
    ``kind``, or the phase (``load``, ``forward``), unless the exception says more."""
    text = str(exc)
    if isinstance(exc, (OutputTypeError, OutputCheckError)):
        return error("output", text)
    if isinstance(exc, ContractError):
        return error("contract", text)
    if OVERWRITTEN in text:
        return error("contract", f"{phase}: {cause.line(exc)} (torch.compile's CUDA graphs hand out the same output storage on every call)", exc)
    if _CAPTURE_LEFT_OPEN in text:
        return error(
            kind or phase,
            f"{phase}: {cause.line(exc)} (a CUDA graph capture the submission began failed and it went on, which leaves the GPU's "
            "random number generator in capture state: nothing can draw random numbers on the GPU after it, kbench's inputs "
            "included; KernelBench's eval makes its inputs on the CPU and does not meet it)",
            exc,
        )
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text:
        return error("oom", f"{phase}: out of memory: {cause.line(exc)}", exc, fatal=True)
    accelerator_error = getattr(torch, "AcceleratorError", ())
    if isinstance(exc, accelerator_error) or "CUDA error" in text or "CUDA driver error" in text:
        return error("cuda", f"{phase}: {cause.line(exc)}", exc, fatal=True)
    return error(kind or phase, f"{phase}: {cause.line(exc)}", exc)


def describe(out):
    """Shape and dtype of an output as plain JSON."""
    tensors = out if isinstance(out, (tuple, list)) else [out]
    return [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} if isinstance(t, torch.Tensor) else {"type": type(t).__name__} for t in tensors]


class OutputTypeError(TypeError):
    """forward returned something other than plain tensors."""


class OutputCheckError(RuntimeError):
    """A runtime check proved the outputs wrong, deliberately or not; the message names the check."""


class TamperError(RuntimeError):
    """A runtime check caught the submission cheating; the message names the check."""


class ContractError(RuntimeError):
    """A runtime check found the module breaking kbench's module contract, which KernelBench's
    eval does not check (it writes into its inputs, returns the same output storage on every
    call, keeps state between calls): `contract` where the outputs are right, `incorrect` where
    they are not. The message names the check."""


# torch.compile's CUDA graphs raise this when a caller reads an output a later replay overwrote:
# the module hands out the same output storage on every call.
OVERWRITTEN = "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"
# A failed CUDA graph capture whose exception was caught leaves the CUDA generator capturing;
# its next draw outside a capture raises this.
_CAPTURE_LEFT_OPEN = "Offset increment outside graph capture encountered unexpectedly"


def to_host(out):
    """Outputs as plain CPU tensors for the trusted side to load: a list stays a list, any other
    tuple (torch's named tuples too) becomes a tuple."""
    if isinstance(out, (tuple, list)):
        return (list if type(out) is list else tuple)(to_host(t) for t in out)
    if type(out) is not torch.Tensor:
        raise OutputTypeError(f"forward returned {type(out).__name__}, not a torch.Tensor")
    return out.detach().to("cpu", copy=True).contiguous()
