"""Runtime checks on what forward returned, in the candidate worker.

`outputs.exact_type`, `timing.stream_join`, `outputs.settled`, `outputs.independence`,
`determinism.rerun`: each returns (outcome, evidence) for `log.Log.run`, or raises
`errors.TamperError` (cheating), `errors.OutputCheckError` (wrong outputs) or
`errors.ContractError` (a breach of the module contract) with a message that starts with the
check's name. `pieces` and `bits` compare outputs, here and in the reference worker.
"""

import time

import torch

from ..task import returns
from ..wire.errors import OVERWRITTEN, ContractError, OutputCheckError, OutputTypeError, TamperError
from ..wire.messages import CheckName

# Elements per comparison step: bounds the temporaries of a comparison on multi-GB outputs.
CHUNK = 1 << 26

# Integer dtypes of each element size, to compare any tensor bit for bit (NaN equals NaN).
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def pieces(r, c):
    """Matching flat pieces of two same-shape tensors (whole tensors when not contiguous)."""
    if r.is_contiguous() and c.is_contiguous():
        return zip(r.view(-1).split(CHUNK), c.view(-1).split(CHUNK))
    return [(r, c)]


def exact_type(out):
    """`outputs.exact_type`: every output is a plain torch.Tensor, checked before any attribute
    is read (a Tensor subclass or an object with ``__torch_function__`` can compute when the
    comparison inspects it, while the timed call did no work), laid out as a reference's outputs
    are: strided (not sparse, mkldnn or nested), no two elements in the same memory (a stride-0
    expansion writes one element for many), no conjugate or negative bit (a lazy view that
    leaves the negation to whoever reads it)."""
    items = returns.tensors(out)
    for i, o in enumerate(items):
        kind = type(o)
        if kind is torch.Tensor:
            continue
        if issubclass(kind, torch.Tensor) or any("__torch_function__" in vars(k) for k in kind.__mro__):
            raise TamperError(f"{CheckName.OUTPUTS_EXACT_TYPE}: output {i} is a {kind.__name__}, a tensor-like type that can defer its work")
        raise OutputTypeError(f"{CheckName.OUTPUTS_EXACT_TYPE}: output {i} is a {kind.__name__}, not a torch.Tensor")
    for i, o in enumerate(items):
        odd = _odd_layout(o)
        if odd:
            raise OutputTypeError(f"{CheckName.OUTPUTS_EXACT_TYPE}: output {i} {odd}, not a dense strided tensor")
    return "pass", f"{len(items)} plain strided torch.Tensor output(s)"


def _odd_layout(t):
    """How a plain tensor is laid out other than as a materialised strided tensor, or None."""
    if t.is_nested:
        return "is a nested tensor"
    if t.layout is not torch.strided:
        return f"has layout {t.layout}"
    if t.is_conj() or t.is_neg():
        return f"has its {'conjugate' if t.is_conj() else 'negative'} bit set (a lazy view)"
    if _overlapping(t):
        return f"has elements that share memory (strides {list(t.stride())} for shape {list(t.shape)})"
    return None


def _overlapping(t):
    """Whether two elements of ``t`` can share memory: taken by stride, each dimension of more
    than one element must step over the whole span of the smaller ones (gaps are fine: a view of
    a padded buffer is honest)."""
    if t.numel() < 2:
        return False
    span = 1
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz > 1):
        if stride < span:
            return True
        span = stride * size
    return False


def bits(t):
    """The tensor's raw bits as an integer tensor of the same shape."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_BITS[t.element_size()])


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


# Elements of each output's end copied first by `stream_join`.
TAIL = 1 << 16


def _tail(t):
    flat = t.reshape(-1) if t.is_contiguous() else t.new_empty(0)
    return flat[-TAIL:]


def stream_join(outs):
    """`timing.stream_join` (GPU): wait for the current stream only, copy the outputs on it,
    then wait for the whole device. A copy that differs from the final outputs means forward
    left work running on another stream, outside the caller's events. Honest kernels on the
    current or the legacy default stream are complete when the current stream is.

    The ends of the outputs are copied first: a kernel left running on another stream writes
    them last, and a full copy that starts behind such a kernel streams through memory after
    it and sees finished values (measured on the H100: a whole-tensor copy missed both stream
    escapes of the corpus)."""
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    try:
        tails = [_tail(o).clone() for o in outs]
        copies = [o.clone() for o in outs]
    except torch.cuda.OutOfMemoryError:
        torch.cuda.synchronize()
        return "skip", "no room to copy the outputs"
    torch.cuda.synchronize()
    late = [i for i, (o, t, c) in enumerate(zip(outs, tails, copies)) if not (same_bits(_tail(o), t) and same_bits(o, c))]
    if late:
        raise TamperError(f"{CheckName.TIMING_STREAM_JOIN}: output(s) {late} changed after the current stream had finished: forward left work running on another stream")
    return "pass", f"{len(outs)} output(s) complete when the current stream was"


# How long `settled` waits before it compares the outputs again.
SETTLE_S = 0.02


def settled(outs, returned):
    """`outputs.settled` (CPU): the outputs, copied as soon as forward returned (``returned``),
    compared again after a short wait. An output that changed meanwhile was written by work
    forward left running (a thread of any kind, torch's own pools too), which the timed call did
    not measure. Honest CPU work is complete when forward returns; the GPU's counterpart is
    `timing.stream_join`."""
    time.sleep(SETTLE_S)
    late = [i for i, (o, r) in enumerate(zip(outs, returned)) if not same_bits(o, r)]
    if late:
        raise TamperError(f"{CheckName.OUTPUTS_SETTLED}: output(s) {late} changed within {SETTLE_S * 1000:.0f} ms after forward returned: forward left work running that writes them")
    return "pass", f"{len(outs)} output(s) unchanged {SETTLE_S * 1000:.0f} ms after forward returned"


def _overlap(a, b):
    if not a.untyped_storage().nbytes() or not b.untyped_storage().nbytes() or a.device != b.device:
        return False
    sa, sb = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
    return sa < sb + b.untyped_storage().nbytes() and sb < sa + a.untyped_storage().nbytes()


def snapshot(outs):
    """Copies of the outputs for `independence`, or None when the device has no room."""
    try:
        return [o.clone() for o in outs]
    except torch.cuda.OutOfMemoryError:
        return None


def overwritten(outs):
    """The indices of the outputs a later call made unreadable: torch.compile's CUDA graph trees
    mark an output they overwrote so that any access to it raises (`errors.OVERWRITTEN`)."""
    gone = []
    for i, o in enumerate(outs):
        try:
            o.untyped_storage()
        except RuntimeError as exc:
            if OVERWRITTEN not in str(exc):
                raise
            gone.append(i)
    return gone


def independence(first, copies, second):
    """`outputs.independence`: a second call on other inputs leaves the first call's outputs
    as they were and returns new memory (the reference returns new tensors every call).

    Returning the same storage on every call (a preallocated buffer, a CUDA graph's static
    output) breaks the module's contract, whatever the intent: the caller's earlier result is
    overwritten (`errors.ContractError`; the first outputs are put back from their copies, for
    the trial's comparison, or where the next call made them unreadable, the caller hands over
    the copies: `overwritten`, `returns.rebuilt`). An earlier output that changes while the
    next call returns other memory means the module keeps writing into what it handed out:
    that is evasion (`cheat`)."""
    gone = overwritten(first)
    if gone:
        raise ContractError(
            f"{CheckName.OUTPUTS_INDEPENDENCE}: the next call overwrote output(s) {gone} (torch.compile's CUDA graphs hand out the same output storage "
            "on every call, and mark what they overwrote unreadable), so the next call overwrites the caller's result; return new tensors "
            "(e.g. copy out of a CUDA graph's static output)"
        )
    shared = [f"output {i} is the same memory as the next call's output {j}" for i, a in enumerate(first) for j, b in enumerate(second) if _overlap(a, b)]
    if shared:
        for a, c in zip(first, copies or []):
            a.copy_(c)
        raise ContractError(
            f"{CheckName.OUTPUTS_INDEPENDENCE}: forward returns the same output storage on every call ({'; '.join(shared[:4])}), "
            "so the next call overwrites the caller's result; return new tensors (e.g. copy out of a CUDA graph's static output)"
        )
    if copies is None:
        return "pass", "new memory on the next call (no room to copy the outputs, contents not compared)"
    changed = [f"output {i} changed when forward ran again" for i, (a, c) in enumerate(zip(first, copies)) if not same_bits(a, c)]
    if changed:
        raise TamperError(f"{CheckName.OUTPUTS_INDEPENDENCE}: {'; '.join(changed[:4])}, although the next call returned other memory")
    return "pass", "outputs unchanged by the next call, which returned new memory"


def distinct_calls(outs):
    """`outputs.independence` among a timed sample's calls (a burst), whose outputs are all held
    until the sample ends: each call must have returned memory of its own. A module that hands
    out the same storage on every call (a CUDA graph's static output, captured once warm) is a
    `contract` breach here as after the trials, whatever the burst: its earlier calls' results
    were overwritten before they could be kept. ``outs``: (draw, output) pairs, in call order.
    One pass over the storages (the sample loop runs it for every sample)."""
    held = {}  # (device, storage address) -> (call, output index)
    for j, out in outs:
        for a, t in enumerate(returns.tensors(out)):
            storage = t.untyped_storage()
            if not storage.nbytes():
                continue
            key = (t.device, storage.data_ptr())
            earlier = held.get(key)
            if earlier is not None and earlier[0] != j:
                raise ContractError(
                    f"{CheckName.OUTPUTS_INDEPENDENCE}: timed call {j} returned the memory of the burst's earlier output {earlier[1]} of call {earlier[0]}: "
                    "forward returns the same output storage on every call, so each call overwrites the caller's last result; "
                    "return new tensors (e.g. copy out of a CUDA graph's static output)"
                )
            held.setdefault(key, (j, a))


def rerun(first, again, atol, rtol, changed):
    """`determinism.rerun`: the same inputs, other poison in free memory, the same outputs.
    Bit-equal passes; within tolerance is nondeterminism (atomics) and warns; anything else
    means forward kept state between calls where the rerun call changed the module's state
    (``changed``: what of `state` differs across it; `errors.ContractError`), else that it
    read memory it never wrote (wrong values)."""
    differ = [i for i, (a, b) in enumerate(zip(first, again)) if not same_bits(a, b)]
    worst = 0.0

    def fail(i, detail):
        said = f"{CheckName.DETERMINISM_RERUN}: output {i} differs between two calls on the same inputs{detail}"
        if changed:
            raise ContractError(f"{said}; forward keeps state between calls (the call changed {', '.join(changed[:4])})")
        raise OutputCheckError(f"{said}; forward reads memory it did not write")

    for i in differ:
        a, b = first[i], again[i]
        if not a.is_floating_point():
            fail(i, "")
        diff = _max_diff(a, b)
        if not torch.allclose(b, a, atol=atol, rtol=rtol, equal_nan=True):
            fail(i, f": max abs diff {diff:.3g} (atol {atol}, rtol {rtol})")
        worst = max(worst, diff)
    if differ:
        return "warn", f"output(s) {differ} not bit-identical on a second call, within tolerance (max abs diff {worst:.3g})"
    return "pass", "bit-identical on a second call with other poison in free memory"


def state(model):
    """What a module keeps between calls, by name: each submodule's parameters, buffers and plain
    attributes (tensors by storage, shape and a sum of their bits; numbers, strings; a container's
    length and its tensors), for `rerun` to tell a call that changed it."""
    found = {}
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if name in ("_parameters", "_buffers"):
                found.update({f"{prefix}.{k}".lstrip("."): _print(v) for k, v in value.items()})
            elif not name.startswith("_") or not isinstance(value, dict):
                found[f"{prefix}.{name}".lstrip(".")] = _print(value)
    return {k: v for k, v in found.items() if v is not None}


def _print(value):
    """A fingerprint of one kept value, or None for what `state` does not follow (modules,
    functions, other objects)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        return ("tensor", t.untyped_storage().data_ptr(), tuple(t.shape), str(t.dtype), torch.sum(bits(t), dtype=torch.int64).item() if t.numel() else 0)
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return (type(value).__name__, len(value), tuple(_print(v) for v in items if isinstance(v, torch.Tensor)))
    return None


def changed_state(before, after):
    """The names whose fingerprint differs between two `state`s (added or dropped ones too)."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _max_diff(a, b):
    """Largest absolute difference; NaN where either holds NaN counts as infinite unless both do."""
    both = torch.isnan(a) & torch.isnan(b)
    diff = (b.double() - a.double()).abs().masked_fill(both, 0.0).nan_to_num(nan=float("inf"))
    return diff.max().item() if diff.numel() else 0.0
