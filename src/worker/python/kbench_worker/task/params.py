"""`params.perturbation`'s parameters: new values, the same in both workers, the values kept to put
back, digests of the parameters as built, and the pairing of the candidate's parameters with the
task's.
"""

import itertools

import torch


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
