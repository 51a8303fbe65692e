"""`precision.fp32_accumulation`: half-precision GEMM tasks (`kbench import cuda-l2`) judged
against the float64 product, within what fp32 accumulation gives at that K."""

import textwrap

import pytest
import torch

from kbench_worker.checks import precision
from kbench_worker.roles.candidate import Candidate
from kbench_worker.roles.reference import Reference
from kbench_worker.wire.messages import CheckOutputs, Load, Trial

M = N = 32


def operands(k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, k, generator=g).half(), torch.randn(k, N, generator=g).half()


def fp32_in_chunks(a, b, chunks):
    """fp32 accumulation in another order: split-K partial sums added in fp32."""
    parts = [x.float() @ y.float() for x, y in zip(a.chunk(chunks, 1), b.chunk(chunks, 0))]
    return sum(parts).half()


def fp16_accumulator(a, b, step=16):
    """An fp16 accumulator: each k16 MMA step's sum rounded into fp16."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    for k0 in range(0, a.shape[1], step):
        acc = (acc.float() + a[:, k0 : k0 + step].float() @ b[k0 : k0 + step].float()).half()
    return acc


def fp16_partials(a, b, chunks=4):
    """A split-K whose partial sums are rounded to fp16 and added in fp16."""
    acc = None
    for x, y in zip(a.chunk(chunks, 1), b.chunk(chunks, 0)):
        part = (x.float() @ y.float()).half()
        acc = part if acc is None else (acc.float() + part.float()).half()
    return acc


def one_wrong(a, b):
    out = (a.float() @ b.float()).half()
    out[3, 5] += 4 * out.abs().max()
    return out


def judged(kernel, k):
    a, b = operands(k)
    ref64 = a.double() @ b.double()
    ref_acc = (a.float() @ b.float()).half()
    return precision.judge_accumulation(ref_acc, ref64, kernel(a, b))


@pytest.mark.parametrize("k", [64, 256, 1024, 4096, 16384])
@pytest.mark.parametrize(
    "kernel, outcome",
    [
        (lambda a, b: (a.float() @ b.float()).half(), "pass"),
        (lambda a, b: fp32_in_chunks(a, b, 4), "pass"),
        (lambda a, b: fp32_in_chunks(a, b, 16), "pass"),
        (fp16_accumulator, "fail"),
        (fp16_partials, "fail"),
        (one_wrong, "fail"),
    ],
    ids=["fp32", "fp32_split4", "fp32_split16", "fp16_accumulator", "fp16_partials", "one_wrong"],
)
def test_fp32_accumulation_passes_and_fp16_accumulation_fails_at_every_k(kernel, outcome, k):
    got, evidence = judged(kernel, k)
    assert got == outcome, evidence


@pytest.mark.parametrize("k", [256, 1024, 4096, 16384])
def test_against_an_fp16_accumulator_on_the_same_inputs_the_limit_has_a_margin_both_ways(k):
    """Where the task computes an fp16 accumulator's reading (`kbench_fp16_accumulation`), the
    limit lies a factor of at least SEPARATION above fp32 accumulation rounded twice and below
    that reading: fp32 accumulation in any order and a few extra fp16 roundings (split-K
    partials) pass, an fp16 accumulator fails."""
    a, b = operands(k)
    ref64, ref_acc = a.double() @ b.double(), (a.float() @ b.float()).half()
    fp16_ratio = precision.accumulation_ratio(ref_acc, ref64, fp16_accumulator(a, b))
    assert fp16_ratio >= precision.HONEST_ACC * precision.SEPARATION**2
    for kernel, outcome in [
        (lambda a, b: fp32_in_chunks(a, b, 16), "pass"),
        (lambda a, b: fp16_partials(a, b, 2), "pass"),
        (fp16_accumulator, "fail"),
        (one_wrong, "fail"),
    ]:
        got, evidence = precision.judge_accumulation(ref_acc, ref64, kernel(a, b), fp16_ratio)
        assert got == outcome, evidence


def test_where_an_fp16_accumulator_reads_too_close_to_fp32_the_rule_says_it_cannot_tell():
    a, b = operands(64)
    ref64, ref_acc = a.double() @ b.double(), (a.float() @ b.float()).half()
    fp16_ratio = precision.accumulation_ratio(ref_acc, ref64, fp16_accumulator(a, b))
    got, evidence = precision.judge_accumulation(ref_acc, ref64, fp16_accumulator(a, b), fp16_ratio)
    assert got == "warn" and "too close to fp32 accumulation rounded twice" in evidence, evidence
    assert precision.judge_accumulation(ref_acc, ref64, one_wrong(a, b), fp16_ratio)[0] == "fail"


def test_fp16_accumulation_error_grows_with_k():
    ratios = [float(judged(fp16_accumulator, k)[1].split(" is ")[1].split(" x")[0]) for k in (64, 1024, 16384)]
    assert ratios == sorted(ratios) and ratios[-1] > 10 * precision.ACC_LIMIT, ratios


def test_an_output_that_overflows_fp16_is_skipped():
    a, b = operands(64)
    a = a * 3000
    ref_acc = (a.float() @ b.float()).half()
    assert not torch.isfinite(ref_acc).all()
    assert precision.judge_accumulation(ref_acc, a.double() @ b.double(), ref_acc)[0] == "skip"


GEMM_TASK = """
import torch
import torch.nn as nn

M = 32
N = 48
K = 256
KBENCH_JUDGE = "fp32_accumulation"


class Model(nn.Module):
    def forward(self, A, B_t):
        return torch.matmul(A, B_t.t())


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(N, K, dtype=torch.float16)]


def get_init_inputs():
    return []
"""

HONEST = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, A, B_t):
        return (A.float() @ B_t.float().t()).half()
"""

HALF_ACCUMULATOR = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, A, B_t):
        acc = torch.zeros(A.shape[0], B_t.shape[0], dtype=torch.float16)
        for k0 in range(0, A.shape[1], 16):
            acc = (acc.float() + A[:, k0:k0 + 16].float() @ B_t[:, k0:k0 + 16].float().t()).half()
        return acc
"""


def checked(tmp_path, task_text, body, kernelbench_tolerance=None):
    """One trial of ``body`` on the task ``task_text`` (fp16 on the CPU), as the reference
    worker checks it."""
    task = tmp_path / "gemm.py"
    task.write_text(task_text)
    sub = tmp_path / "sub.py"
    sub.write_text(textwrap.dedent(body))
    load = dict(device="cpu", precision="fp16", atol=1e-2, rtol=1e-2, task=str(task), set={})
    cand = Candidate(Load(**load, submission=str(sub)))
    req = Trial(seed=7, forward_seed=11, out=str(tmp_path / "out.pt"), transport="file", deep=False, variant=None)
    cand.trial(req)
    return Reference(Load(**load)).check(CheckOutputs(seed=7, forward_seed=11, variant=None, deep=False, candidate_out=req.out, kernelbench_tolerance=kernelbench_tolerance))


# As `kbench import cuda-l2` writes it for this layout.
FP16_ACCUMULATION = """

def kbench_fp16_accumulation(A, B_t, rows=128):
    a, b = A[:rows].float(), B_t.t().float()
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device)
    for k0 in range(0, a.shape[1], 16):
        acc = (acc.float() + a[:, k0 : k0 + 16] @ b[k0 : k0 + 16]).half()
    return acc
"""


@pytest.mark.parametrize("reading", [False, True], ids=["fixed_limit", "fp16_reading"])
@pytest.mark.parametrize(
    "body, declared, correct",
    [(HONEST, True, True), (HALF_ACCUMULATOR, True, False), (HONEST, False, True)],
    ids=["honest", "fp16_accumulator", "undeclared"],
)
def test_a_declaring_task_judges_every_trial_against_fp32_accumulation(tmp_path, body, declared, correct, reading):
    task = GEMM_TASK if declared else GEMM_TASK.replace('KBENCH_JUDGE = "fp32_accumulation"', "")
    if reading:
        task = task.replace("K = 256", "K = 1024") + FP16_ACCUMULATION
    result = checked(tmp_path, task, body)
    assert result["correct"] is correct, result["reason"]
    outcomes = {e["name"]: e["outcome"] for e in result["checks"]}
    assert outcomes.get("precision.fp32_accumulation") == (("pass" if correct else "fail") if declared else None)
    if not correct:
        assert "precision.fp32_accumulation: against the float64 product" in result["reason"]
    evidence = next((e["evidence"] for e in result["checks"] if e["name"] == "precision.fp32_accumulation"), "")
    assert ("an fp16 accumulator on these inputs" in evidence) is (declared and reading), evidence


def test_a_miss_of_the_tolerance_that_float64_puts_on_the_reference_is_correct(tmp_path):
    """The task's own half-precision product rounds its split-K partial sums to fp16 (as cuBLAS
    may under PyTorch's default): the honest fp32-accumulating kernel misses the tolerance against
    it, and float64 says the reference is the side that is off."""
    rounded_partials = GEMM_TASK.replace("K = 256", "K = 8192").replace(
        "return torch.matmul(A, B_t.t())",
        "return sum(A[:, k:k + 512] @ B_t[:, k:k + 512].t() for k in range(0, K, 512))",
    )
    result = checked(tmp_path, rounded_partials, HONEST, kernelbench_tolerance=1e-2)
    outcomes = {e["name"]: e["outcome"] for e in result["checks"]}
    assert outcomes["precision.fp32_accumulation"] == "pass"
    assert result["kernelbench_correct"] is False
    assert result["correct"] is True, result["reason"]
