"""Moving the candidate's outputs to the reference worker without trusting the candidate.

On the GPU, outputs are shared by CUDA IPC (torch.multiprocessing's own reduction): no copy to
the host and back, which for multi-GB outputs costs seconds per trial. The reply carries only
plain JSON (numbers, base64 bytes, names from a fixed set), never a pickle, so the trusted side
never runs code chosen by the candidate. Elsewhere, and as a fallback, outputs go through a file
written with torch.save (`to_host`) and read back with ``weights_only``.
"""

import base64

import torch
from torch.multiprocessing import reductions

from ..task import returns
from .errors import OutputTypeError

# The only classes and functions a rebuilt argument may name.
_CLASSES = {"Tensor": torch.Tensor, "UntypedStorage": torch.UntypedStorage, "TypedStorage": torch.TypedStorage}


def _encode(value):
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, type):
        return {"class": value.__name__}
    if isinstance(value, (tuple, list, torch.Size)):
        return {"tuple": [_encode(v) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot share a {type(value).__name__}")


def dtype_named(name):
    """The torch dtype a plain-JSON name (``float32``) stands for; ValueError for any other."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name}")
    return dtype


def _decode(value):
    if isinstance(value, dict):
        ((kind, inner),) = value.items()
        if kind == "bytes":
            return base64.b64decode(inner)
        if kind == "dtype":
            return dtype_named(inner)
        if kind == "class":
            return _CLASSES[inner]
        if kind == "tuple":
            return tuple(_decode(v) for v in inner)
        raise ValueError(f"unknown field {kind}")
    return value


def export_cuda(out):
    """IPC descriptions of the output tensors (the caller keeps ``out`` alive until read)."""
    shared = []
    for t in returns.tensors(out):
        if type(t) is not torch.Tensor or not t.is_cuda:
            raise TypeError("only plain CUDA tensors are shared by IPC")
        rebuild, args = reductions.reduce_tensor(t.detach())
        if rebuild is not reductions.rebuild_cuda_tensor:
            raise TypeError(f"unexpected reduction {rebuild.__name__}")
        shared.append([_encode(a) for a in args])
    container = ("list" if type(out) is list else "tuple") if isinstance(out, (tuple, list)) else None
    return {"container": container, "tensors": shared}


def import_cuda(description):
    """Views of the shared tensors, valid while the candidate holds them (no copy is made)."""
    tensors = []
    for args in description["tensors"]:
        decoded = [_decode(a) for a in args]
        if decoded[0] is not torch.Tensor:
            raise ValueError("a shared tensor must be a plain tensor")
        tensors.append(reductions.rebuild_cuda_tensor(*decoded))
    torch.cuda.synchronize()
    kind = description["container"]
    return tensors[0] if kind is None else (list if kind == "list" else tuple)(tensors)


def to_host(out):
    """Outputs as plain CPU tensors for the trusted side to load: a list stays a list, any other
    tuple (torch's named tuples too) becomes a tuple."""
    if isinstance(out, (tuple, list)):
        return (list if type(out) is list else tuple)(to_host(t) for t in out)
    if type(out) is not torch.Tensor:
        raise OutputTypeError(f"forward returned {type(out).__name__}, not a torch.Tensor")
    return out.detach().to("cpu", copy=True).contiguous()
