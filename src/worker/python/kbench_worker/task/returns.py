"""What forward returns, read by its types alone: one tensor or several (`tensors`: the outputs as
a list; `rebuilt`: a list back in the container), its `structure`, and each output's shape and
dtype as plain JSON (`describe`).
"""

import torch


def _container(out):
    """Whether forward returned several outputs, judged from the type alone: isinstance would
    read ``__class__``, an attribute a lazy object can intercept."""
    kind = type(out)
    structseq = getattr(torch.return_types, kind.__name__, None) is kind
    return kind is tuple or kind is list or structseq


def tensors(out):
    """The outputs as a list: a tuple's (torch's named tuples too) or a list's items, else the one
    output."""
    return list(out) if _container(out) else [out]


def rebuilt(out, items):
    """``items`` in the container ``out`` came in (a tensor, a tuple, torch's named tuples, a list)."""
    return type(out)(items) if _container(out) else items[0]


def structure(out):
    """What forward returned, by types alone: ``tensor``, or its container (a tuple, torch's
    named tuples included, or a list) and what that holds, e.g. ``tuple[tensor, tensor]``."""
    if _container(out):
        return f"{'list' if type(out) is list else 'tuple'}[{', '.join(map(structure, out))}]"
    return "tensor" if type(out) is torch.Tensor else type(out).__name__


def describe(out):
    """Shape and dtype of each output as plain JSON."""
    return [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} if isinstance(t, torch.Tensor) else {"type": type(t).__name__} for t in tensors(out)]
