"""The outputs of every timed call, kept where the reference worker reads them
(`timing.timed_output_check`, docs/checks.md "Trust model").

A timed call's output is copied into its slot of a pool after the call's stop event: slot
``keep + j`` for the block's draw ``j`` (wrapping when a round makes more calls than the pool
holds). After a round kbench picks one call of the candidate's blocks with randomness the
candidate never sees and has the reference worker read that slot directly: on the GPU through
CUDA IPC (the pool is exported once, at set-up), elsewhere through files on tmpfs mapped by both
workers. Between the candidate's reply and that read no request reaches the candidate, so a call
that did no work cannot be made good afterwards: every call of a block must have left a correct
output, and the work that made it is inside the request's wall time, which kbench measures
(`timing.wall_envelope`).

Both arms keep their outputs (the reference's pool is never read), so neither arm's wall time
holds more copying than the other's.
"""

import torch

from ..checks import outputs
from ..task import returns
from ..task.models import nbytes
from ..wire import transfer
from ..wire.errors import OutputTypeError
from ..wire.messages import CheckName

# The most calls a round asks of one arm: two blocks of at most 10 samples of at most 32 calls.
MAX_SLOTS = 640
# The pool may take this share of the GPU's memory (the other worker keeps one too).
GPU_SHARE = 0.05
# On the host (the CPU, or a GPU whose workers cannot share memory by IPC).
HOST_BYTES = 256 << 20


class Pool:
    """Slots for the outputs of one arm's timed calls, shaped after a warm-up call's output.
    ``path``: where its files go (host memory); None keeps it on the output's GPU. ``shared``:
    a pool on the GPU is exported by CUDA IPC for the reference worker to read; only the
    candidate's own arm's is. torch keeps an exported block allocated until a reader has
    released it, so a pool exported and never read would stay for the life of its process: a
    kept reference worker held one per candidate (8 GiB each on level1/63, which ran out of
    memory at its seventh candidate)."""

    def __init__(self, out, path=None, shared=False):
        outputs.exact_type(out)
        tensors = returns.tensors(out)
        self.structure = returns.structure(out)
        self.path = path
        self.shared = shared
        self.on_gpu = on_gpu = path is None and bool(tensors) and all(t.is_cuda for t in tensors)
        if on_gpu:
            budget = GPU_SHARE * torch.cuda.mem_get_info(tensors[0].device)[1]
        else:
            budget = HOST_BYTES
        self.slots = int(max(1, min(MAX_SLOTS, budget // max(nbytes(tensors), 1))))
        if on_gpu:
            self.buffers = [torch.empty((self.slots, *t.shape), dtype=t.dtype, device=t.device) for t in tensors]
        else:
            self.buffers = [self._mapped(i, t) for i, t in enumerate(tensors)]

    def _mapped(self, i, t):
        shape = (self.slots, *t.shape)
        if self.path is None:
            return torch.empty(shape, dtype=t.dtype)
        return _map_file(f"{self.path}.{i}", shape, t.dtype, shared=True)

    def keep(self, slot, out):
        """Copy a timed call's output into ``slot``: the same structure as the warm-up's, or the
        call's verdict is that it changed (`outputs.exact_type`)."""
        outputs.exact_type(out)
        tensors = returns.tensors(out)
        if returns.structure(out) != self.structure:
            raise OutputTypeError(f"{CheckName.OUTPUTS_STRUCTURE}: a timed call returned {returns.structure(out)}, the warm-up {self.structure}")
        for buffer, t in zip(self.buffers, tensors):
            if t.shape != buffer.shape[1:] or t.dtype != buffer.dtype:
                raise OutputTypeError(f"{CheckName.OUTPUTS_EXACT_TYPE}: a timed call returned {t.dtype} {list(t.shape)}, the warm-up {buffer.dtype} {list(buffer.shape[1:])}")
            buffer[slot % self.slots].copy_(t)

    def describe(self):
        """What the reference worker needs to read the pool (plain JSON, never a pickle)."""
        # As `transfer` names it: None (one tensor), "tuple" or "list".
        container = self.structure.partition("[")[0] if "[" in self.structure else None
        described = {"slots": self.slots, "container": container}
        if self.on_gpu and self.shared:
            return {**described, "ipc": transfer.export_cuda(tuple(self.buffers))}
        if self.path is None:
            return described  # memory no other process reads (the reference's arms, the control)
        files = [{"path": f"{self.path}.{i}", "shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch.")} for i, b in enumerate(self.buffers)]
        return {**described, "files": files}


def _map_file(path, shape, dtype, shared):
    """A tensor of ``shape`` over the file at ``path`` (created or grown when ``shared``)."""
    numel = 1
    for s in shape:
        numel *= s
    return torch.from_file(path, shared=shared, size=max(numel, 1), dtype=dtype)[:numel].view(shape)


def read(description, slot):
    """The reference worker's view of one slot of the candidate's pool: its outputs, as
    forward returned them (one tensor, or a tuple). Raises OutputTypeError when the pool
    cannot be read: the candidate described it."""
    try:
        return _read(description, slot)
    except OutputTypeError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the description makes fail
        raise OutputTypeError(f"the kept outputs could not be read: {type(exc).__name__}: {exc}") from exc


def _read(description, slot):
    slots = description.get("slots")
    if type(slots) is not int or not 0 <= slot < slots:
        raise OutputTypeError(f"the kept outputs hold {slots!r} slots, not slot {slot}")
    if "ipc" in description:
        shared = transfer.import_cuda(description["ipc"])
        buffers = list(shared) if isinstance(shared, tuple) else [shared]
    else:
        buffers = [_map_file(f["path"], [int(s) for s in f["shape"]], transfer.dtype_named(f["dtype"]), shared=False) for f in description["files"]]
    for b in buffers:
        if b.dim() == 0 or b.shape[0] != slots:
            raise OutputTypeError(f"a kept output buffer of shape {list(b.shape)} does not hold {slots} slots")
    kept = [b[slot] for b in buffers]
    container = description.get("container")
    if container is None:
        return kept[0]
    return list(kept) if container == "list" else tuple(kept)
