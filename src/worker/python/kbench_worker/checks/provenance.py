"""`profile.library_output`: whether library ops alone made what forward returns.

A submission can compute the whole forward with the reference's library under other names
(`addmm` with the bias folded in, `clamp_min_` for the ReLU: other kernels than the reference's,
so `profile.reference_ops` sees nothing) and pass the result through a trivial kernel of its own.
Here one call runs under a dispatch mode, which sees every ATen op, whether Python or the
submission's C++ calls it, and never a kernel of the submission's own. Each tensor gets a
provenance:

- given: alive before the call (the inputs, the module's parameters and buffers, anything else
  it keeps), while its contents are what they were then;
- library-made: the result of an op whose tensor inputs were given or library-made, while its
  contents are what the op left;
- a copy: contents bit for bit those of a given tensor, or of a library-made result that
  computed something, as many elements of the same dtype (not one value repeated, which any
  kernel may write).

Everything else is the submission's: memory an allocator handed out and a kernel wrote, a CUDA
graph's output, a given or library-made tensor written since. When every tensor forward returns
is library-made or a copy of a library-made result, the submission's own kernels made none of
its output (one that is the call's inputs, as a ReLU of positive values is, is not judged). Contents are
compared through `fingerprint`, a 64-bit hash of the bits in logical order.

What it cannot see: library work that runs outside the dispatcher (a CUDA graph replaying the
library's kernels, cuBLAS called from C++ directly), and a kernel of the submission's that
changes the values by less than the tolerance; and like every check in the candidate's
interpreter, it holds only against a submission that does not look for it.
"""

import gc
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .outputs import bits

# Ops whose results hold whatever the memory held: a kernel of the submission's fills them.
_ALLOCATORS = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "resize_", "set_"}
# In-place ops that overwrite their `self` without reading it.
_OVERWRITE = {"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_", "geometric_", "log_normal_", "cauchy_"}

_CHUNK = 1 << 24
_WEIGHT = -0x61C8864680B583EB  # 0x9E3779B97F4A7C15, the golden ratio's bits, as a signed int64
_MASK = (1 << 64) - 1


def _flat_bits(t):
    """A tensor's elements' bits in logical order, one dimension (`outputs.bits`)."""
    return bits(t.detach().reshape(-1)).reshape(-1)


def fingerprint(t):
    """(dtype, elements, hash) of a dense tensor's contents: a sum of its elements' bits, each
    times an odd weight its position gives, modulo 2**64 (int64 arithmetic wraps); None for
    tensors without memory of their own: not strided, on the meta device, or a compiler's fake
    tensor (torch.compile leaves some alive, and an op on one beside a real tensor raises)."""
    if t.layout != torch.strided or t.device.type == "meta" or issubclass(type(t), FakeTensor):
        return None
    raw = _flat_bits(t)
    total = 0
    for start in range(0, raw.numel(), _CHUNK):
        part = raw[start : start + _CHUNK].to(torch.int64)
        at = torch.arange(start, start + part.numel(), device=part.device, dtype=torch.int64)
        weights = (at * _WEIGHT) ^ (at >> 17) | 1
        total = (total + int((part * weights).sum())) & _MASK
    return (str(t.dtype), t.numel(), total)


def _constant(t):
    """Whether every element of ``t`` has the same bits (a zero-filled buffer, one value)."""
    raw = _flat_bits(t)
    return raw.numel() < 2 or bool(raw.min() == raw.max())


def _tensors(value):
    return [x for x in tree_flatten(value)[0] if isinstance(x, torch.Tensor)]


def _alive():
    """Every tensor alive in this process, by id: (a weak reference, its fingerprint, "given").
    `type`, not `isinstance`: an object's `__class__` can be a property of the submission's."""
    found = {}
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor) and id(obj) not in found:
            try:
                found[id(obj)] = (weakref.ref(obj), fingerprint(obj), "given")
            except Exception:
                # No readable memory, no weak reference, or a subclass whose ops raise: never
                # given. One such tensor anywhere in the process must not stop the trace.
                pass
    return found


class Trace(TorchDispatchMode):
    """The provenance of the tensors one call's ops read and wrote (module docstring)."""

    def __init__(self):
        super().__init__()
        self.known = _alive()  # id -> (weak reference, fingerprint, the op that made it)
        # fingerprint -> the op whose result it is, "given" for what the call was given
        self.copies = {printed: "given" for _, printed, _ in self.known.values() if printed is not None}
        self.ops = 0

    def made_by(self, t):
        """The op whose work ``t`` is ("given" for what the call was given), or None where it
        is the submission's."""
        entry = self.known.get(id(t))
        now = fingerprint(t)
        if entry is not None and entry[0]() is t:
            if entry[1] == now:
                return entry[2]
            del self.known[id(t)]  # written by something no op saw
        return None if _constant(t) else self.copies.get(now)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._overloadpacket.__name__
        written, unread = _written(func, args, kwargs)
        inputs = [t for t in _tensors((args, kwargs)) if id(t) not in unread]
        library = name not in _ALLOCATORS and all(self.made_by(t) is not None for t in inputs)
        result = func(*args, **kwargs)
        self.ops += 1
        label = f"aten.{func.__name__}"
        seen = set()
        for t in written + _tensors(result):
            if id(t) in seen:
                continue
            seen.add(id(t))
            if not library:
                self.known.pop(id(t), None)
                continue
            printed = fingerprint(t)
            self.known[id(t)] = (weakref.ref(t), printed, label)
            if printed is not None and printed not in self.copies:
                self.copies[printed] = label
        return result


def _written(func, args, kwargs):
    """The tensors ``func`` writes, and the ids of those it writes without reading (`out=`
    arguments, the `self` of an overwriting in-place op)."""
    written, unread = [], set()
    overwrites = func._overloadpacket.__name__ in _OVERWRITE
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        tensors = _tensors(value)
        written += tensors
        if arg.kwarg_only or (overwrites and i == 0):
            unread.update(id(t) for t in tensors)
    return written, unread


def library_output(call, synchronize):
    """Run ``call`` under a `Trace`: the op that made each tensor it returns ("given" for one it
    was given, None for one that is the submission's), and how many ATen ops ran."""
    trace = Trace()
    with trace:
        out = call()
    synchronize()
    return [trace.made_by(t) for t in _tensors(out)], trace.ops


def judge(traces):
    """`profile.library_output` over one or more traced calls (`library_output`'s results): a
    failure when, in every call, each output was library-made or a copy."""
    made, ops = traces[0]
    if not made:
        return "skip", "forward returned no tensor"
    if all(m and all(x not in (None, "given") for x in m) for m, _ in traces):
        whose = ", ".join(f"output {i}: {op}" for i, op in enumerate(made))
        return "fail", (
            f"library ops made every output from the inputs in each of {len(traces)} traced call(s) ({whose}; {ops} ATen op(s) in the first); the submission's own kernels changed none of it"
        )
    return "pass", f"an output is the submission's own kernels' work ({ops} ATen op(s) traced)"
