"""The reference worker's comparison of what the candidate handed over with its own.

`compare` is one trial's verdict on the outputs (`outputs.structure`, the tolerance, scaled by
`correctness.scaled_tolerance`); `inputs_integrity` checks the candidate's inputs after its call
against a pristine copy (`inputs.integrity`); `handed_over` runs either on what the candidate
handed over, so that what it raises is the candidate's.
"""

import math
import time

import torch

from ..task import returns
from ..wire import cause, errors
from ..wire.messages import CheckName
from . import outputs


def _peak(r):
    """max|r| (NaN when r holds NaN), in chunks."""
    return max((rp.abs().max().item() for rp, _ in outputs.pieces(r, r) if rp.numel()), default=0.0)


def scaled_atol(r, atol):
    """`correctness.scaled_tolerance`: (atol to use, max|ref|). Outputs far below atol (softmax
    over 393,216 columns is ~2.5e-6) would let zeros pass, so atol is capped at 1 % of the
    reference's own largest magnitude (kept when that is zero or not finite)."""
    peak = _peak(r)
    if 0.0 < peak < math.inf:
        return min(atol, 0.01 * peak), peak
    return atol, peak


def compare(ref, cand, atol, rtol, log, excused=()):
    """Verdict of one trial: {'correct', 'reason', 'max_abs_diff', 'max_rel_diff'} and, for
    values beyond the tolerance, the 'output' that missed it; the scaled
    tolerance's entry goes to ``log`` when it tightened atol. Outputs in ``excused`` (judged
    against float64 already) skip the tolerance."""
    differs = _structure(ref, cand, log)
    if differs:
        return {"correct": False, "reason": f"{CheckName.OUTPUTS_STRUCTURE}: {differs}"}
    refs, cands = returns.tensors(ref), returns.tensors(cand)
    worst_abs = worst_rel = 0.0
    scaled = []  # (evidence, seconds) of outputs whose atol was tightened
    for i, (r, c) in enumerate(zip(refs, cands)):
        if tuple(c.shape) != tuple(r.shape):
            return {"correct": False, "reason": f"output {i} has shape {list(c.shape)}, expected {list(r.shape)}"}
        if c.dtype != r.dtype:
            return {"correct": False, "reason": f"output {i} has dtype {c.dtype}, expected {r.dtype}"}
        c = c.to(r.device)
        exact = not (r.is_floating_point() or r.is_complex())
        tol = atol
        if not exact:
            started = time.perf_counter()
            tol, peak = scaled_atol(r, atol)
            if tol < atol:
                scaled.append((f"output {i}: atol {atol:g} -> {tol:.3g} (1% of max|ref| {peak:.3g})", time.perf_counter() - started))
        mismatch = False
        for rp, cp in outputs.pieces(r, c):
            if exact:
                mismatch |= not torch.equal(rp, cp)
                continue
            if torch.isnan(rp).any():
                return {"correct": False, "uncheckable": True, "reason": f"the reference output {i} holds NaN at these inputs"}
            if torch.isnan(cp).any():
                return {"correct": False, "reason": f"output {i} holds NaN"}
            diff = (cp.double() - rp.double()).abs()
            if diff.numel():
                worst_abs = max(worst_abs, diff.max().item())
                worst_rel = max(worst_rel, (diff / rp.double().abs().clamp_min(1e-30)).max().item())
            mismatch |= i not in excused and not torch.allclose(cp, rp, atol=tol, rtol=rtol)
            del diff
        if mismatch and exact:
            return {"correct": False, "reason": f"output {i} differs (exact comparison, dtype {r.dtype})"}
        if mismatch:
            # The scaled atol decided only if the output passes with the given one.
            decided = tol < atol and all(torch.allclose(cp, rp, atol=atol, rtol=rtol) for rp, cp in outputs.pieces(r, c))
            _log_scaled(log, scaled, "fail" if decided else "pass")
            shown = f"atol {atol}" if not decided else f"{CheckName.CORRECTNESS_SCALED_TOLERANCE}: atol {atol} scaled to {tol:.3g}, 1% of max|ref| {peak:.3g}"
            return {
                "correct": False,
                "reason": f"output {i} differs: max abs diff {worst_abs:.3g} ({shown}; rtol {rtol})",
                "output": i,
                "max_abs_diff": worst_abs,
                "max_rel_diff": worst_rel,
            }
    _log_scaled(log, scaled, "pass")
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 - JSON has no inf
    return {"correct": True, "reason": "", "max_abs_diff": finite(worst_abs), "max_rel_diff": finite(worst_rel)}


def _structure(ref, cand, log):
    """`outputs.structure`: the candidate's outputs are built as the reference's: a tensor where
    it returns a tensor (not a list or tuple of one), a tuple where it returns a tuple and a list
    where a list, nested alike. Returns how they differ, or None."""
    expected, got = returns.structure(ref), returns.structure(cand)
    differs = f"forward returned {got}, the reference returns {expected}" if got != expected else None
    log.add(CheckName.OUTPUTS_STRUCTURE, "fail" if differs else "pass", differs or got)
    return differs


def _log_scaled(log, scaled, outcome):
    if scaled:
        log.add(CheckName.CORRECTNESS_SCALED_TOLERANCE, outcome, "; ".join(e for e, _ in scaled), sum(t for _, t in scaled))


def modified_inputs(pristine, returned):
    """Indices of tensor inputs that the candidate's call changed (exact, bit for bit)."""
    tensors = [x for x in pristine if isinstance(x, torch.Tensor)]
    if len(returned) != len(tensors):
        return list(range(len(tensors)))
    changed = []
    for i, (a, b) in enumerate(zip(tensors, returned)):
        if type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
            changed.append(i)
            continue
        b = b.to(a.device)
        if not all(torch.equal(x, y) for x, y in outputs.pieces(a, b)):
            changed.append(i)
    return changed


def inputs_integrity(inputs, cand_inputs, log):
    """`inputs.integrity`: the candidate's inputs after its call, against a pristine copy."""
    started = time.perf_counter()
    changed = modified_inputs(inputs, cand_inputs)
    evidence = f"forward modified its input(s) {changed}" if changed else f"{len(cand_inputs)} tensor input(s) unchanged"
    log.add(CheckName.INPUTS_INTEGRITY, "fail" if changed else "pass", evidence, time.perf_counter() - started)
    return changed


def handed_over(step, *args):
    """``step`` on what the candidate handed over (its outputs, its inputs after the call): what
    it raises is the candidate's (`incorrect`, the exception as the reason), never an error of the
    reference's own (a skip). Out of memory and CUDA errors stay the worker's."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001 - the candidate chose what it handed over
        if errors.classify(exc, "check")["kind"] in ("oom", "cuda"):
            raise
        raise errors.OutputTypeError(f"checking what the candidate handed over raised {cause.line(exc)}") from exc
