"""The reference's outputs on each trial's inputs, kept by a reference worker that serves the
task's next candidates too (`pipeline::reuse`). Every candidate of a task in a run is sent the
same seeds, so the reference's outputs on them (its forward, and the float64 and fp32 runs of the
precision checks) are the same for each: a kept reference computes them for the first candidate
and reads them for the others.

kbench asks for it (`Load.memo`) only where the task's reference repeats itself by its facts (no
random draws, a second call returns the first's bits) and a candidate of the task is still to
come; a load without it, or of another task, size, device or precision, empties it. The key
names the parameters too (as built, or perturbed with a seed), so outputs before and after the
parameter perturbation never mix. A timed call's check keeps nothing: its seeds are drawn for
each timed block, and no other candidate is sent them. Copies are kept, on the device (what
forward returned may be a view of an input, or of a parameter the perturbation changes in
place), up to `BYTES` in all: outputs that do not fit are computed again each time. Callers only
read what they get.
"""

import json

import torch

# Held on the GPU beside the candidate's evaluation: a small share of any GPU kbench runs on.
BYTES = 1 << 30


def _bytes(out):
    """Bytes of ``out`` (a tensor, or tuples and lists of them), or None for anything else."""
    if type(out) is torch.Tensor:
        return out.numel() * out.element_size()
    if type(out) in (tuple, list):
        sizes = [_bytes(x) for x in out]
        return None if None in sizes else sum(sizes)
    return None


def _copy(out):
    """A copy of ``out``, which `_bytes` measured."""
    if type(out) is torch.Tensor:
        return out.detach().clone()
    return type(out)(_copy(x) for x in out)


def variant_key(variant):
    """A trial's input variant as part of a key (a dict on the wire, or None)."""
    return json.dumps(variant, sort_keys=True)


class Memo:
    def __init__(self):
        self.load = None
        self.kept = {}
        self.size = 0

    def start(self, load):
        """A load of the task: keep what is kept for the same ``load`` (what was loaded, how
        sized, on which device, at which precision), else drop it all; None keeps nothing."""
        if load is None or load != self.load:
            self.kept.clear()
            self.size = 0
        self.load = load

    def get(self, key, run):
        """What ``run()`` returns, from the memo when this load keeps one and has ``key`` (None:
        never kept)."""
        if self.load is None or key is None:
            return run()
        if key in self.kept:
            return self.kept[key]
        out = run()
        size = _bytes(out)
        if size is not None and self.size + size <= BYTES:
            self.kept[key] = _copy(out)
            self.size += size
        return out
