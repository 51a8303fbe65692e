"""`precision.fp64_error_ratio`, in the reference worker: is the candidate as precise as fp32?

A kernel that computes an fp32 task in TF32, bf16 or fp16 can stay inside the absolute and
relative tolerance on the shipped data. Measured against a float64 run of the reference, its
RMS error is many times PyTorch fp32's own (TF32 matmul: 41.8x on an H100), while honest fp32
kernels stay below 16x (summation order changes the error, not its scale).

`judge_miss` (`precision.fp64_judged`) decides an output that missed the tolerance: where its
RMS and largest errors against float64 are each within `SUM_LIMIT` times PyTorch fp32's own, it
is a reordering the tolerance is stricter than (correct); many times larger, a wrong result.
Where PyTorch fp32 itself is off float64 wholesale (`ILL_CONDITIONED`), float64 cannot decide.
"""

import math

import torch

LIMIT = 16.0
# `judge_miss`: a miss whose errors against float64 are each within this factor of PyTorch fp32's
# is summation reordered (CUDA-L1's blockwise triangular matmuls read 0.41x and 0.57x).
SUM_LIMIT = 2.0
# `judge_miss`: PyTorch fp32's RMS error against float64, relative to the output's RMS, beyond
# which the reference is ill-conditioned (a cancellation to ~0) and any error of its size passes.
ILL_CONDITIONED = 0.01
# fp32's unit roundoff: the error floor when PyTorch's fp32 result happens to be exact.
FP32_EPS = 2.0**-24
# Elements per step: bounds the float64 temporaries on multi-GB outputs.
CHUNK = 1 << 24


def _chunks(a, b):
    """a - b (a alone when b is None) in float64, `CHUNK` elements at a time."""
    flat_a = a.reshape(-1)
    flat_b = b.reshape(-1).to(a.device) if b is not None else None
    for start in range(0, flat_a.numel(), CHUNK):
        d = flat_a[start : start + CHUNK].double()
        yield d if flat_b is None else d - flat_b[start : start + CHUNK].double()


def rms_diff(a, b=None):
    """RMS of a - b (of a alone when b is None), accumulated in float64."""
    if not a.numel():
        return 0.0
    return math.sqrt(sum(torch.dot(d, d).item() for d in _chunks(a, b)) / a.numel())


def max_diff(a, b=None):
    """Largest |a - b| (|a| alone when b is None), in float64."""
    if not a.numel():
        return 0.0
    return max(d.abs().max().item() for d in _chunks(a, b))


def error_ratio(ref32, ref64, cand):
    """(ratio, candidate RMS error, PyTorch fp32 RMS error) against the float64 reference, or
    None when the ratio means nothing (a float64 reference that is zero or not finite)."""
    scale = rms_diff(ref64)
    if not math.isfinite(scale) or scale == 0.0:
        return None
    err_ref = rms_diff(ref32, ref64)
    err_cand = rms_diff(cand, ref64)
    return err_cand / max(err_ref, FP32_EPS * scale), err_cand, err_ref


def judge(refs32, refs64, cands):
    """(outcome, evidence) over the floating outputs; 'fail' names the worst output."""
    worst = None
    for i, (r32, r64, c) in enumerate(zip(refs32, refs64, cands)):
        if not r32.is_floating_point():
            continue
        if r64.dtype != torch.float64:
            return "skip", f"the reference's float64 run returned {r64.dtype} for output {i}"
        found = error_ratio(r32, r64, c)
        if found is not None and (worst is None or found[0] > worst[1][0]):
            worst = (i, found)
    if worst is None:
        return "skip", "the float64 reference is zero or not finite"
    i, (ratio, err_cand, err_ref) = worst
    text = f"candidate RMS error {err_cand:.3g} is {ratio:.3g} x PyTorch fp32's ({err_ref:.3g}; limit {LIMIT:g})"
    if len(refs32) > 1:
        text = f"output {i}: {text}"
    return ("fail" if ratio > LIMIT else "pass"), text


def _conditioning(r32, r64):
    """(the float64 output's RMS, PyTorch fp32's RMS error against it); the RMS is NaN where
    there is no float64 comparison."""
    scale = rms_diff(r64) if r64.dtype == torch.float64 else math.nan
    return scale, (rms_diff(r32, r64) if math.isfinite(scale) and scale != 0.0 else math.nan)


def ill_conditioned(r32, r64):
    """Whether PyTorch fp32's own RMS error against float64 exceeds `ILL_CONDITIONED` of the
    output's RMS: float64 cannot tell a reordering from a wrong result there."""
    scale, err_ref = _conditioning(r32, r64)
    return err_ref > ILL_CONDITIONED * scale


def judge_miss(r32, r64, cand):
    """`precision.fp64_judged`: (outcome, evidence) for an output that missed the tolerance,
    against float64 beside PyTorch fp32's own errors: 'pass' (reordered sums), 'fail' (a wrong
    result) or 'skip' (float64 cannot decide: no float64 comparison, or `ill_conditioned`)."""
    scale, err_ref = _conditioning(r32, r64)
    if not math.isfinite(scale) or scale == 0.0:
        return "skip", "no float64 comparison (the float64 reference is zero, not finite or not float64)"
    if err_ref > ILL_CONDITIONED * scale:
        return "skip", (f"float64 cannot decide: PyTorch fp32's own RMS error against float64 is {err_ref / scale:.3g} of the output's RMS (ill-conditioned; limit {ILL_CONDITIONED:g})")
    rms = rms_diff(cand, r64) / max(err_ref, FP32_EPS * scale)
    largest = max_diff(cand, r64) / max(max_diff(r32, r64), FP32_EPS * max_diff(r64))
    text = f"against float64 its RMS error is {rms:.3g} x PyTorch fp32's, its largest error {largest:.3g} x (limit {SUM_LIMIT:g})"
    return ("pass" if max(rms, largest) <= SUM_LIMIT else "fail"), text


# `judge_accumulation`: a task declaring KBENCH_JUDGE = "fp32_accumulation" (a half-precision
# GEMM whose honest kernels accumulate in fp32) is judged against the float64 result, its RMS
# error beside that of the fp32-accumulated result rounded to the output dtype (which is
# essentially the output's own rounding), its largest within ACC_MAX_LIMIT times.
# fp32 accumulation in any order reads 1.00x; rounded to fp16 twice (two half-ulp roundings)
# sqrt(2) = 1.41x, as CUDA-L2's fp32-accumulating kernels read on an H100 (1.41-1.42x); an fp16
# accumulator in k16 steps 1.6x at K = 64, 5.7x at K = 1024 and 23x at K = 16384; fp16 partial
# sums of a fp32 split-K 1.9x. A fixed limit between 1.41 and 1.6 is too thin a margin, so a
# task that can (`kbench_fp16_accumulation`, written by `kbench import cuda-l2`) computes an
# fp16 accumulator's reading on the trial's own inputs: the limit is the geometric midpoint of
# the honest worst and that reading, a factor of at least SEPARATION from each, and where the
# two lie closer (small K) the rule cannot tell them apart and says so (a warning) instead of
# judging. A task that cannot keeps the fixed ACC_LIMIT.
ACC_LIMIT = 1.5
ACC_MAX_LIMIT = 2.0
HONEST_ACC = math.sqrt(2.0)
SEPARATION = math.sqrt(2.0)
# The error floor: a quarter of fp16's unit roundoff of the output's RMS (an exact fp32 result).
FP16_FLOOR = 0.25 * 2.0**-11


def accumulation_ratio(ref_acc, ref64, out):
    """RMS error of ``out`` against float64 over that of fp32 accumulation (``ref_acc``)."""
    floor = FP16_FLOOR * rms_diff(ref64)
    return rms_diff(out, ref64) / max(rms_diff(ref_acc, ref64), floor)


def judge_accumulation(ref_acc, ref64, cand, fp16_ratio=None):
    """`precision.fp32_accumulation`: (outcome, evidence) for one output against float64
    (``ref64``), beside ``ref_acc``, the reference computed with fp32 accumulation and rounded
    to the output's dtype; 'skip' where float64 is zero or not finite. ``fp16_ratio``: an fp16
    accumulator's `accumulation_ratio` on the same inputs, where the task computes it."""
    scale = rms_diff(ref64)
    if not math.isfinite(scale) or scale == 0.0:
        return "skip", "no float64 comparison (the float64 product is zero or not finite)"
    if not math.isfinite(max_diff(ref_acc)):
        return "skip", f"the output overflows {ref_acc.dtype} at these inputs, fp32 accumulation's too"
    floor = FP16_FLOOR * scale
    rms = accumulation_ratio(ref_acc, ref64, cand)
    largest = max_diff(cand, ref64) / max(max_diff(ref_acc, ref64), floor)
    within = f"its largest error {largest:.3g} x (limit {ACC_MAX_LIMIT:g})"
    if fp16_ratio is None:
        text = f"against the float64 product its RMS error is {rms:.3g} x fp32 accumulation's (limit {ACC_LIMIT:g}), {within}"
        return ("pass" if rms <= ACC_LIMIT and largest <= ACC_MAX_LIMIT else "fail"), text
    if fp16_ratio < HONEST_ACC * SEPARATION**2:
        text = (
            f"against the float64 product its RMS error is {rms:.3g} x fp32 accumulation's, {within}; at this K an fp16 "
            f"accumulator reads {fp16_ratio:.3g} x, too close to fp32 accumulation rounded twice ({HONEST_ACC:.3g} x) to tell apart"
        )
        return ("warn" if largest <= ACC_MAX_LIMIT else "fail"), text
    limit = math.sqrt(HONEST_ACC * fp16_ratio)
    text = (
        f"against the float64 product its RMS error is {rms:.3g} x fp32 accumulation's (limit {limit:.3g}: between fp32 "
        f"accumulation rounded twice, {HONEST_ACC:.3g} x, and an fp16 accumulator on these inputs, {fp16_ratio:.3g} x), {within}"
    )
    return ("pass" if rms <= limit and largest <= ACC_MAX_LIMIT else "fail"), text
