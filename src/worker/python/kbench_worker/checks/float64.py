"""The precision checks that run the reference again in float64 (and fp32), in the reference
worker: `precision.fp64_error_ratio`, `precision.fp64_judged` (an output that missed the
tolerance, `judge_miss`; signed, scaled and shifted inputs, `judge_shift`) and
`precision.fp32_accumulation`. Each takes the worker's `Reference`; its copies of the model in
float64 and fp32 run on the trial's inputs, and their outputs are kept in its memo. What they
judge on the outputs is `precision`'s.
"""

import copy
import time

import torch

from ..task import models, returns
from ..task.inputs import make_inputs
from ..wire.messages import CheckName
from . import correctness, kernelbench, precision


def fp64_error_ratio(reference, req, ref, cand, result, log):
    """`precision.fp64_error_ratio`: the candidate's RMS error against a float64 run of the
    reference, relative to PyTorch fp32's own; more than `precision.LIMIT` times fails the
    trial. A reference that cannot run in float64 (memory, an op without float64) skips.
    Returns the outcome (None without floating outputs)."""
    refs, cands = returns.tensors(ref), returns.tensors(cand)
    if not any(r.is_floating_point() for r in refs):
        return None
    started = time.perf_counter()
    try:
        refs64 = _float64(reference, req)
        outcome, evidence = precision.judge(refs, refs64, cands)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        outcome, evidence = "skip", f"the reference does not run in float64: {type(exc).__name__}: {str(exc)[:200]}"
    refs64 = None
    models.release_memory(reference.device)
    log.add(CheckName.PRECISION_FP64_ERROR_RATIO, outcome, evidence, time.perf_counter() - started)
    if outcome == "fail":
        result.update(correct=False, reason=f"{CheckName.PRECISION_FP64_ERROR_RATIO}: {evidence}")
    return outcome


def judge_shift(reference, req, ref, cand, result, log):
    """`inputs.mean_shift` and `inputs.distribution_perturbation` (signed, scaled inputs) are
    judged against float64, not PyTorch's fp32: far from zero fp32 loses digits in every
    honest kernel too, PyTorch's included. The candidate is correct when its error is within
    `precision.LIMIT` times PyTorch fp32's; where no float64 run is possible the tolerance
    check stands."""
    if fp64_error_ratio(reference, req, ref, cand, result, log) == "pass":
        result.update(correct=True, reason="")


def judge_miss(reference, req, ref, cand, result, log):
    """`precision.fp64_judged`, on any trial: an output that missed the tolerance is judged
    against a float64 run of the reference (`precision.judge_miss`); one within
    `precision.SUM_LIMIT` of PyTorch fp32's errors is summation reordered and the comparison
    goes on past it. Where the reference is ill-conditioned (PyTorch fp32 itself is off
    float64 wholesale: a mean that cancels to ~0) float64 cannot decide, and an output within
    the tolerance before its scaling to the output's size is inconclusive, not failed: the
    comparison goes on past it too. Otherwise the tolerance verdict stands, the float64
    comparison joining its reason; a reference that cannot run in float64 adds nothing.
    Returns the result."""
    refs, cands = returns.tensors(ref), returns.tensors(cand)
    excused = set()
    try:
        refs64 = _float64(reference, req)
    except (RuntimeError, TypeError, NotImplementedError):
        models.release_memory(reference.device)
        return result
    while "output" in result:
        started = time.perf_counter()
        index = result["output"]
        outcome, evidence = precision.judge_miss(refs[index], refs64[index], cands[index])
        inconclusive = (
            outcome == "skip" and precision.ill_conditioned(refs[index], refs64[index]) and correctness.handed_over(kernelbench.allclose, refs[index], cands[index], reference.atol, reference.rtol)
        )
        if inconclusive:
            evidence += f"; within the unscaled tolerance (atol {reference.atol:g}, rtol {reference.rtol:g}): inconclusive, not failed"
        if len(refs) > 1:
            evidence = f"output {index}: {evidence}"
        log.add(CheckName.PRECISION_FP64_JUDGED, outcome, evidence, time.perf_counter() - started)
        if outcome != "pass" and not inconclusive:
            result["reason"] += f"; {evidence}"
            break
        excused.add(index)
        result = correctness.handed_over(correctness.compare, ref, cand, reference.atol, reference.rtol, log, excused)
    del refs64
    models.release_memory(reference.device)
    return result


def judge_accumulation(reference, req, cand, result, log):
    """`precision.fp32_accumulation`, on every trial of a task that declares it: each floating
    output against the reference run in float64, beside the reference run in fp32 (fp32
    accumulation) rounded to the output's dtype (`precision.judge_accumulation`). It decides
    the trial's values: a failure makes a trial within the tolerance incorrect (and joins the
    reason of one that missed it), and a pass makes one that missed the tolerance correct
    when every output was judged. The tolerance compares with PyTorch's own half-precision
    product, whose rounding (cuBLAS's split-K partial sums in fp16) can be the larger
    error: float64 tells which side is off."""
    started = time.perf_counter()
    cands = returns.tensors(cand)
    try:
        refs64 = _run_as(reference, req, torch.float64)
        refs32 = _run_as(reference, req, torch.float32)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        models.release_memory(reference.device)
        log.add(CheckName.PRECISION_FP32_ACCUMULATION, "skip", f"the reference does not run in float64 and fp32: {type(exc).__name__}: {str(exc)[:200]}", time.perf_counter() - started)
        return
    fp16_ratio = _fp16_accumulation(reference, req, refs32, refs64, cands)
    judged = []  # (outcome, evidence) per floating output
    for i, (r32, r64, c) in enumerate(zip(refs32, refs64, cands)):
        if c.is_floating_point():
            outcome, evidence = precision.judge_accumulation(r32.to(c.dtype), r64, c.to(r64.device), fp16_ratio)
            judged.append((outcome, f"output {i}: {evidence}" if len(cands) > 1 else evidence))
    del refs64, refs32
    models.release_memory(reference.device)
    if not judged:
        return
    outcome, evidence = next((j for j in judged if j[0] == "fail"), judged[0])
    log.add(CheckName.PRECISION_FP32_ACCUMULATION, outcome, evidence, time.perf_counter() - started)
    if outcome == "pass" and not result["correct"] and len(judged) == len(cands):
        result.update(correct=True, reason="")
    if outcome != "fail":
        return
    if result["correct"]:
        result.update(correct=False, reason=f"{CheckName.PRECISION_FP32_ACCUMULATION}: {evidence}")
    else:
        result["reason"] += f"; {CheckName.PRECISION_FP32_ACCUMULATION}: {evidence}"


def _fp16_accumulation(reference, req, refs32, refs64, cands):
    """An fp16 accumulator's `precision.accumulation_ratio` on the trial's inputs, from the
    task's `kbench_fp16_accumulation` (one output: the product's first rows), or None where
    the task has none."""
    accumulate = getattr(reference.task, "kbench_fp16_accumulation", None)
    if accumulate is None or len(cands) != 1:
        return None
    variant = getattr(req, "variant", None)
    inputs = make_inputs(reference.task, req.seed, reference.device, reference.precision, variant)
    with torch.no_grad():
        out = accumulate(*inputs)
    rows = out.shape[0]
    return precision.accumulation_ratio(refs32[0][:rows].to(out.dtype), refs64[0][:rows], out.to(refs64[0].device))


def _float64(reference, req):
    """The reference's outputs in float64 (`_run_as`)."""
    return _run_as(reference, req, torch.float64)


def _run_as(reference, req, dtype):
    """The reference's outputs in ``dtype``: a copy of the model in it (freed on return) on
    the trial's inputs cast to it, with the same forward seed."""
    # A timed call's check (`CheckKept`) has no variant: its inputs are the shipped kind.
    variant = getattr(req, "variant", None)

    def run():
        model = copy.deepcopy(reference.model).to(dtype)
        inputs = make_inputs(reference.task, req.seed, reference.device, reference.precision, variant)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        out = models.forward(model, inputs, req.forward_seed)
        return returns.tensors(out)

    return reference.memo.get(reference.memo_key(str(dtype), req), run)
