"""The workers' runtime checks on the CPU: input variants, scaled tolerance, the fp64 error ratio,
exact output types, threads, output independence, determinism, TF32 switches and the kernel-name
classification behind profile.library_share. GPU-only checks (poisoned allocator, stream join,
L2 limit, profiling) run on a GPU; their pure parts are tested here."""

import _thread
import ctypes
import importlib
import re
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

from conftest import write
from kbench_worker.checks import correctness, outputs, precision, profile, runtime
from kbench_worker.checks.correctness import compare
from kbench_worker.checks.log import Log
from kbench_worker.roles.candidate import Candidate
from kbench_worker.roles.reference import Reference
from kbench_worker.task import models, params, returns, taskfile
from kbench_worker.task.inputs import _shaped, load_task, make_inputs
from kbench_worker.timing import kept
from kbench_worker.wire import errors, transfer
from kbench_worker.wire.errors import ContractError, OutputCheckError, OutputTypeError, TamperError
from kbench_worker.wire.messages import CheckKept, CheckName, CheckOutputs, Load, Perturb, State, Time, TimeSetup, Trial

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "level1" / "19_ReLU.py"

MIXED_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, u, labels, n):
        return u + n

batch = 4

def get_inputs():
    return [torch.rand(batch, 8), torch.randint(0, 5, (batch,)), torch.randn(batch, 8)]

def get_init_inputs():
    return []
"""

MATMUL_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

N = 256

def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]

def get_init_inputs():
    return []
"""


def submission(body, imports="import torch\nimport torch.nn as nn\n"):
    return imports + textwrap.dedent(body)


def make_candidate(tmp_path, body, task=RELU, scale="small", atol=1e-2, rtol=1e-2):
    sub = write(tmp_path, "sub.py", submission(body))
    req = Load(device="cpu", precision="fp32", atol=atol, rtol=rtol, task=str(task), set={}, submission=str(sub), scale=scale or None)
    return Candidate(req)


def trial(cand, tmp_path, seed=7, deep=False, variant=None):
    req = Trial(seed=seed, forward_seed=11, out=str(tmp_path / "out.pt"), transport="file", deep=deep, variant=variant)
    return cand.trial(req), req


def names(entries):
    return {e["name"]: e["outcome"] for e in entries}


RELU_HONEST = """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


# -- input variants ------------------------------------------------------------------------


@pytest.fixture
def mixed(tmp_path):
    return load_task(write(tmp_path, "mixed.py", MIXED_TASK), {})


@pytest.mark.parametrize("variant", [{"kind": "signed"}, {"kind": "scaled", "factor": 40.0}])
def test_variants_are_reproducible_and_leave_integers_alone(mixed, variant):
    plain = make_inputs(mixed, 3, "cpu", "fp32")
    first = make_inputs(mixed, 3, "cpu", "fp32", variant)
    again = make_inputs(mixed, 3, "cpu", "fp32", variant)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert torch.equal(first[1], plain[1]) and first[1].dtype == torch.int64
    if variant["kind"] == "signed":
        assert torch.equal(first[0], plain[0] * 2 - 1) and first[0].min() < 0
        assert torch.equal(first[2], plain[2])  # already signed: unchanged
    else:
        assert torch.equal(first[0], plain[0] * 40.0) and torch.equal(first[2], plain[2] * 40.0)


def test_shape_variant_reloads_the_task_with_new_constants():
    task = load_task(RELU, {"batch_size": 4, "dim": 1024})
    variant = {"kind": "shape", "set": {"batch_size": 5}}
    (x,) = make_inputs(task, 1, "cpu", "fp32", variant)
    assert list(x.shape) == [5, 1024]
    assert _shaped(task, {"batch_size": 5}) is _shaped(task, {"batch_size": 5})
    assert list(make_inputs(task, 1, "cpu", "fp32")[0].shape) == [4, 1024]


def test_candidate_reports_the_shapes_it_ran(tmp_path):
    cand = make_candidate(tmp_path, RELU_HONEST)
    reply, _ = trial(cand, tmp_path, variant={"kind": "shape", "set": {"batch_size": 3}})
    assert reply["input_shapes"] == [[3, 1024]]
    assert reply["outputs"][0]["shape"] == [3, 1024]


# -- correctness.scaled_tolerance ------------------------------------------------------------


def test_zeros_do_not_pass_for_tiny_outputs():
    ref = torch.softmax(torch.rand(2, 100_000), dim=1)  # ~1e-5, far below atol
    log = Log()
    result = compare(ref, torch.zeros_like(ref), 1e-2, 1e-2, log)
    assert not result["correct"] and "scaled" in result["reason"]
    assert names(log.entries()) == {"outputs.structure": "pass", "correctness.scaled_tolerance": "fail"}


def test_honest_tiny_outputs_pass():
    x = torch.rand(2, 100_000)
    ref = torch.softmax(x, dim=1)
    cand = torch.exp(x - x.max(1, keepdim=True).values)
    cand = cand / cand.sum(1, keepdim=True)
    log = Log()
    assert compare(ref, cand, 1e-2, 1e-2, log)["correct"]
    assert names(log.entries()) == {"outputs.structure": "pass", "correctness.scaled_tolerance": "pass"}


def test_ordinary_outputs_keep_atol():
    ref = torch.randn(64, 64)
    log = Log()
    assert compare(ref, ref + 1e-3, 1e-2, 1e-2, log)["correct"]
    assert names(log.entries()) == {"outputs.structure": "pass"}


# -- precision.fp64_error_ratio ----------------------------------------------------------------


def _tf32(x):
    """Round-toward-zero to TF32's 10 mantissa bits."""
    return (x.view(torch.int32) & ~((1 << 13) - 1)).view(torch.float32)


@pytest.mark.parametrize(
    "method, outcome",
    [
        (lambda a, b: torch.matmul(a, b), "pass"),
        (lambda a, b: (a.unsqueeze(2) * b.unsqueeze(0)).sum(1), "pass"),  # another summation order
        (lambda a, b: torch.matmul(a.bfloat16(), b.bfloat16()).float(), "fail"),
        (lambda a, b: torch.matmul(_tf32(a), _tf32(b)), "fail"),
    ],
)
def test_fp64_ratio(method, outcome):
    torch.manual_seed(0)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    ref32, ref64 = torch.matmul(a, b), torch.matmul(a.double(), b.double())
    got, evidence = precision.judge([ref32], [ref64], [method(a, b)])
    assert got == outcome, evidence


def test_a_miss_is_judged_against_float64():
    torch.manual_seed(0)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    ref32, ref64 = torch.matmul(a, b), torch.matmul(a.double(), b.double())
    reordered = (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)
    wrong = ref32.clone()
    wrong[3, 7] += 0.01  # one element off: its RMS error stays small, its largest error does not

    def ratios(cand):
        outcome, text = precision.judge_miss(ref32, ref64, cand)
        return outcome, [float(x) for x in re.findall(r"([0-9.]+) x", text)]

    outcome, found = ratios(reordered)
    assert outcome == "pass" and all(r <= precision.SUM_LIMIT for r in found)
    outcome, (rms, largest) = ratios(wrong)
    assert outcome == "fail" and largest > 100 and largest > 10 * rms
    assert precision.judge_miss(torch.zeros(4), torch.zeros(4, dtype=torch.float64), torch.ones(4))[0] == "skip"


def test_fp64_ratio_of_an_exact_zero_reference_is_skipped():
    z = torch.zeros(8)
    assert precision.judge([z], [z.double()], [z])[0] == "skip"


def test_fp64_ratio_needs_a_float64_reference():
    x = torch.randn(8)
    assert precision.judge([x], [x], [x])[0] == "skip"


def _check(tmp_path, task, body, deep=True, atol=0.5, rtol=0.5, kernelbench_tolerance=None, variant=None):
    cand = make_candidate(tmp_path, body, task=task, scale=None, atol=atol, rtol=rtol)
    ran, req = trial(cand, tmp_path, deep=deep, variant=variant)
    ref = Reference(Load(device="cpu", precision="fp32", atol=atol, rtol=rtol, task=str(task), set={}))
    check = CheckOutputs(seed=req.seed, forward_seed=req.forward_seed, variant=req.variant, deep=req.deep, candidate_out=req.out, kernelbench_tolerance=kernelbench_tolerance)
    return ran, ref.check(check)


def test_reference_fails_a_bf16_matmul_on_fp64_ratio(tmp_path):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    body = """
    class ModelNew(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a.bfloat16(), b.bfloat16()).float()
    """
    _, checked = _check(tmp_path, task, body, kernelbench_tolerance=0.5)
    assert not checked["correct"]
    assert checked["reason"].startswith("precision.fp64_error_ratio: candidate RMS error")
    assert names(checked["checks"])["precision.fp64_error_ratio"] == "fail"
    # KernelBench's rule knows no float64 run: the same trial passes it.
    assert checked["kernelbench_correct"] is True


def test_reference_passes_an_honest_matmul_with_every_check(tmp_path):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    body = """
    class ModelNew(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)
    """
    ran, checked = _check(tmp_path, task, body, atol=1e-2, rtol=1e-2)
    assert checked["correct"], checked["reason"]
    assert names(checked["checks"]) == {"inputs.integrity": "pass", "outputs.structure": "pass", "precision.fp64_error_ratio": "pass"}
    assert names(ran["checks"]) == {
        "outputs.exact_type": "pass",
        "outputs.alias": "pass",
        "runtime.thread_count": "pass",
        "outputs.settled": "pass",
        "precision.tf32_flags": "pass",
        "outputs.independence": "pass",
        "determinism.rerun": "pass",
    }
    assert all(e["seconds"] >= 0 and e["evidence"] for e in ran["checks"] + checked["checks"])


# -- precision.fp64_judged --------------------------------------------------------------------

BLOCKWISE = """
class ModelNew(nn.Module):
    def forward(self, a, b):
        # The same float32 products, summed over k in blocks of 16, last block first.
        return sum(a[:, k : k + 16] @ b[k : k + 16] for k in reversed(range(0, a.shape[1], 16)))
"""

CANCELLING_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return (x * 1e8 + 1.0) - x * 1e8  # 1 in exact arithmetic; fp32 keeps none of it

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("deep", [True, False])
def test_a_reordered_sum_that_misses_a_tight_tolerance_is_judged_correct_against_float64(tmp_path, deep):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    _, checked = _check(tmp_path, task, BLOCKWISE, deep=deep, atol=1e-7, rtol=1e-7, kernelbench_tolerance=1e-7)
    assert checked["correct"], checked["reason"]
    judged = {e["name"]: e for e in checked["checks"]}["precision.fp64_judged"]
    assert judged["outcome"] == "pass"
    assert re.fullmatch(r"against float64 its RMS error is [0-9.]+ x PyTorch fp32's, its largest error [0-9.]+ x \(limit 2\)", judged["evidence"])
    assert checked["max_abs_diff"] > 1e-7
    # KernelBench's rule knows no float64 run: the tolerance fails it.
    assert checked["kernelbench_correct"] is False


def test_an_error_three_times_pytorchs_stays_incorrect(tmp_path):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    body = """
    class ModelNew(nn.Module):
        def forward(self, a, b):
            exact = torch.matmul(a.double(), b.double())
            return (exact + 3 * (torch.matmul(a, b) - exact)).float()
    """
    _, checked = _check(tmp_path, task, body, atol=1e-7, rtol=1e-7)
    assert not checked["correct"]
    assert names(checked["checks"])["precision.fp64_judged"] == "fail"
    assert re.search(r"differs: .*; against float64 its RMS error is [0-9.]+ x PyTorch fp32's", checked["reason"])


def test_an_ill_conditioned_reference_leaves_the_tolerance_verdict(tmp_path):
    task = write(tmp_path, "cancel.py", CANCELLING_TASK)
    body = """
    class ModelNew(nn.Module):
        def forward(self, x):
            return (x * 1e8 - x * 1e8) + 1.0
    """
    _, checked = _check(tmp_path, task, body, atol=1e-4, rtol=1e-4)
    assert not checked["correct"]
    assert names(checked["checks"])["precision.fp64_judged"] == "skip"
    assert "float64 cannot decide" in checked["reason"]


CANCELLING_MEAN_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.group_norm(x, 1).mean(dim=(1, 2))  # 0 in exact arithmetic

def get_inputs():
    return [torch.randn(8, 4, 256)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "body, correct",
    [
        (
            """
    class ModelNew(nn.Module):
        def forward(self, x):
            mean = x.mean(dim=(1, 2), keepdim=True)
            var = x.var(dim=(1, 2), unbiased=False, keepdim=True)
            return ((x - mean) / torch.sqrt(var + 1e-5)).mean(dim=(1, 2))
    """,
            True,
        ),
        (
            """
    class ModelNew(nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0],), 1e-3)
    """,
            False,
        ),
    ],
    ids=["reordered", "off_by_1e-3"],
)
def test_an_ill_conditioned_miss_within_the_unscaled_tolerance_is_inconclusive_not_failed(tmp_path, body, correct):
    """CUDA-L1's level2/23: a mean of group-normalised values, 0 in exact arithmetic and fp32 noise
    of ~1e-8 in PyTorch: another summation order misses the tolerance scaled to that noise, and
    float64 cannot decide; within the unscaled tolerance the trial is not failed."""
    task = write(tmp_path, "cancel_mean.py", CANCELLING_MEAN_TASK)
    _, checked = _check(tmp_path, task, body, deep=False, atol=1e-4, rtol=1e-4)
    judged = {e["name"]: e for e in checked["checks"]}["precision.fp64_judged"]
    assert judged["outcome"] == "skip" and "float64 cannot decide" in judged["evidence"]
    assert checked["correct"] is correct, checked["reason"]
    assert ("inconclusive, not failed" in judged["evidence"]) is correct


def test_signed_inputs_are_judged_against_float64_like_the_mean_shift(tmp_path):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    _, checked = _check(tmp_path, task, BLOCKWISE, deep=False, atol=1e-7, rtol=1e-7, variant={"kind": "signed"})
    assert checked["correct"], checked["reason"]
    assert names(checked["checks"])["precision.fp64_error_ratio"] == "pass"
    assert "precision.fp64_judged" not in names(checked["checks"])


def test_reference_reports_input_mutation_as_a_check(tmp_path):
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    body = """
    class ModelNew(nn.Module):
        def forward(self, a, b):
            out = torch.matmul(a, b)
            a.zero_()
            return out
    """
    _, checked = _check(tmp_path, task, body, deep=False)
    # Right values, written into the inputs: the module contract is broken, not the values.
    assert checked["correct"], checked["reason"]
    assert checked["contract"] == "inputs.integrity: forward modified its input(s) [0]"
    assert names(checked["checks"])["inputs.integrity"] == "fail"


# -- outputs.exact_type ------------------------------------------------------------------------


class Lazy(torch.Tensor):
    """A deferred tensor: any attribute read would trigger its computation."""

    def __getattribute__(self, name):
        raise AssertionError(f"the check read {name}")


class TorchFunctionLike:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise AssertionError("the check called torch on it")


def test_tensor_subclass_is_rejected_before_any_attribute_read():
    lazy = torch.Tensor._make_subclass(Lazy, torch.zeros(2))
    with pytest.raises(TamperError, match="^outputs.exact_type: output 0 is a Lazy"):
        outputs.exact_type(lazy)
    with pytest.raises(TamperError, match="output 1 is a Lazy"):
        outputs.exact_type((torch.zeros(1), lazy))


def test_torch_function_object_is_rejected():
    with pytest.raises(TamperError, match="TorchFunctionLike"):
        outputs.exact_type(TorchFunctionLike())


@pytest.mark.parametrize("value", [None, 3, [torch.zeros(1), "x"]])
def test_non_tensors_are_wrong_outputs(value):
    with pytest.raises(OutputTypeError, match="^outputs.exact_type"):
        outputs.exact_type(value)


def test_plain_tensors_and_return_types_pass():
    assert outputs.exact_type(torch.zeros(1))[0] == "pass"
    assert outputs.exact_type(torch.zeros(3).max(0))[0] == "pass"
    assert outputs.exact_type([torch.zeros(1), torch.ones(1)])[0] == "pass"


def test_candidate_rejects_a_lazy_output(tmp_path):
    body = """
    class Lazy(torch.Tensor):
        def __getattribute__(self, name):
            raise AssertionError(name)

    class ModelNew(nn.Module):
        def forward(self, x):
            return torch.Tensor._make_subclass(Lazy, torch.relu(x))
    """
    with pytest.raises(TamperError, match="outputs.exact_type"):
        trial(make_candidate(tmp_path, body), tmp_path)


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda: torch.eye(3).to_sparse(), "layout torch.sparse_coo"),
        (lambda: torch.eye(3).to_sparse_csr(), "layout torch.sparse_csr"),
        (lambda: torch.eye(3).to_mkldnn(), "layout torch._mkldnn"),
        (lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "nested tensor"),
        (lambda: torch._neg_view(torch.ones(3)), "negative bit"),
        (lambda: torch.ones(3, dtype=torch.complex64).conj(), "conjugate bit"),
        (lambda: torch.ones(1).expand(8), "share memory"),
        (lambda: torch.ones(4, 1).expand(4, 3), "share memory"),
        (lambda: torch.ones(9).as_strided((3, 3), (1, 1)), "share memory"),
    ],
)
def test_an_odd_layout_is_a_wrong_output(make, why):
    """Plain torch.Tensors by type, yet not materialised dense tensors: the comparison would
    raise on them, or read them through a view that does the work (a negation, an expansion)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested and sparse CSR tensors are torch's prototypes
        out = make()
    with pytest.raises(OutputTypeError, match=f"^outputs.exact_type: output 1 .*{why}"):
        outputs.exact_type((torch.zeros(1), out))


def test_strided_views_pass():
    padded = torch.ones(4, 8)[:, :5]  # gaps between rows: a view of a padded buffer
    assert outputs.exact_type([torch.ones(3, 4).t(), padded, torch.ones(0, 3).expand(0, 3), torch.ones(1, 5).expand(1, 5)])[0] == "pass"
    assert outputs.exact_type(torch.ones(2, 3, 4, 5).to(memory_format=torch.channels_last))[0] == "pass"


def test_structure_describes_containers_by_type():
    t = torch.zeros(1)
    assert returns.structure(t) == "tensor"
    assert returns.structure([t]) == "list[tensor]"
    assert returns.structure((t, (t, t))) == "tuple[tensor, tuple[tensor, tensor]]"
    assert returns.structure(torch.zeros(3).max(0)) == "tuple[tensor, tensor]"
    assert returns.structure(3) == "int"


@pytest.mark.parametrize(
    "ref, cand",
    [
        (lambda t: t, lambda t: [t]),
        (lambda t: t, lambda t: (t,)),
        (lambda t: (t, t), lambda t: [t, t]),
        (lambda t: [t, t], lambda t: (t, t)),
        (lambda t: (t, t), lambda t: (t, t, t)),
        (lambda t: (t, (t, t)), lambda t: (t, t, t)),
        (lambda t: t, lambda t: 3),
    ],
)
def test_an_output_of_another_structure_is_incorrect(ref, cand):
    t = torch.ones(4)
    log = Log()
    result = compare(ref(t), cand(t), 1e-2, 1e-2, log)
    assert not result["correct"] and result["reason"].startswith("outputs.structure: forward returned"), result
    assert names(log.entries()) == {"outputs.structure": "fail"}


def test_return_types_match_a_plain_tuple():
    x = torch.randn(3, 4)
    log = Log()
    assert compare(x.max(1), tuple(x.max(1)), 1e-2, 1e-2, log)["correct"]
    assert names(log.entries()) == {"outputs.structure": "pass"}


def test_a_list_survives_the_hand_over(tmp_path):
    """The file keeps a list a list (and a return type a tuple), so the reference worker sees
    the structure forward returned."""
    t = torch.ones(2)
    for out, kind in (([t], list), ((t,), tuple), (t.max(0), tuple)):
        torch.save({"outputs": transfer.to_host(out)}, tmp_path / "o.pt")
        assert type(torch.load(tmp_path / "o.pt", weights_only=True)["outputs"]) is kind


def test_the_reference_worker_blames_what_the_candidate_handed_over():
    """An exception while the reference worker checks the candidate's outputs or inputs is the
    candidate's (`incorrect`), never the reference's own error (a skipped evaluation)."""
    sparse = torch.eye(3).to_sparse()  # what a candidate bypassing its own checks could write
    with pytest.raises(OutputTypeError, match="^checking what the candidate handed over raised"):
        correctness.handed_over(compare, torch.eye(3), sparse, 1e-2, 1e-2, Log())
    with pytest.raises(OutputTypeError, match="^checking what the candidate handed over raised"):
        correctness.handed_over(correctness.inputs_integrity, [torch.eye(3)], [sparse], Log())


def test_candidate_rejects_a_list_where_the_reference_returns_a_tensor(tmp_path):
    body = """
    class ModelNew(nn.Module):
        def forward(self, x):
            return [torch.relu(x)]
    """
    cand = make_candidate(tmp_path, body)
    ran, req = trial(cand, tmp_path)
    assert names(ran["checks"])["outputs.exact_type"] == "pass"
    ref = Reference(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(RELU), set={}, scale="small"))
    checked = ref.check(CheckOutputs(seed=req.seed, forward_seed=req.forward_seed, candidate_out=req.out))
    assert not checked["correct"] and checked["reason"] == "outputs.structure: forward returned list[tensor], the reference returns tensor"


# -- runtime.thread_count ----------------------------------------------------------------------


@pytest.fixture
def release():
    stop = threading.Event()
    yield stop
    stop.set()
    time.sleep(0.05)


def test_a_thread_left_running_is_caught(release):
    census = runtime.Threads()
    _thread.start_new_thread(time.sleep, (0.5,))  # a builtin target: no Python frame to see
    time.sleep(0.05)
    with pytest.raises(TamperError, match="^runtime.thread_count: forward left 1 Python thread"):
        census.check()


def test_a_python_thread_left_running_is_named(release):
    census = runtime.Threads()

    def offload():
        release.wait()

    _thread.start_new_thread(offload, ())
    time.sleep(0.05)
    with pytest.raises(TamperError, match="test_runtime_checks.py:offload"):
        census.check()


def test_a_thread_of_tqdm_only_warns(tmp_path, monkeypatch, release):
    """inductor's progress bars start tqdm's monitor thread: a library's thread, not the
    submission's (a stand-in package here, since the test environment has no tqdm)."""
    package = tmp_path / "tqdm"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_monitor.py").write_text("def run(event):\n    event.wait()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("tqdm", "tqdm._monitor"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monitor = importlib.import_module("tqdm._monitor")
    census = runtime.Threads()
    _thread.start_new_thread(monitor.run, (release,))
    time.sleep(0.05)
    outcome, evidence = census.check()
    assert outcome == "warn" and "_monitor.py:run" in evidence, evidence


def test_a_worker_of_inductors_compile_pool_only_warns():
    """torch.compile compiles in a thread pool of the standard library's that it starts on its
    first compile (``AsyncCompile.pool``): its workers start in concurrent.futures, not in torch,
    yet they are torch's. A pool of the submission's own is still caught."""
    from concurrent.futures import ThreadPoolExecutor

    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.pool.cache_clear()  # a pool of its own for this test, started inside the census
    census = runtime.Threads()
    AsyncCompile.pool().submit(lambda: None).result()
    outcome, evidence = census.check()
    assert outcome == "warn" and "thread.py:_worker" in evidence, evidence
    census = runtime.Threads()
    own = ThreadPoolExecutor(1)
    own.submit(lambda: None).result()
    with pytest.raises(TamperError, match="thread.py:_worker"):
        census.check()
    own.shutdown()


def _ending_thread():
    """A thread with no Python frame (a builtin target, which only the interpreter's thread
    states show), alive when the census is taken, and a way to end it during the 'call'."""
    held = _thread.allocate_lock()
    held.acquire()
    _thread.start_new_thread(held.acquire, ())
    time.sleep(0.05)

    def end():
        held.release()  # the thread's acquire returns, and the thread ends
        time.sleep(0.05)

    return end


def test_a_thread_ending_does_not_hide_a_new_one(release):
    """A thread that ends during the call and one the call leaves running keep the count of
    threads the same (a submission can end last call's thread in this one): the census still
    finds the new one."""
    end = _ending_thread()
    census = runtime.Threads()
    end()
    _thread.start_new_thread(time.sleep, (0.5,))
    time.sleep(0.05)
    with pytest.raises(TamperError, match="forward left 1 Python thread"):
        census.check()


def test_a_new_thread_on_an_ended_threads_id_is_named(release):
    """The OS gives a new thread the id of one that just ended: it is still new, and named."""
    end = _ending_thread()
    census = runtime.Threads()
    end()

    def offload():
        release.wait()

    threading.Thread(target=offload).start()
    time.sleep(0.05)
    with pytest.raises(TamperError, match="test_runtime_checks.py:offload"):
        census.check()


def test_a_finished_thread_is_fine():
    census = runtime.Threads()
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    time.sleep(0.05)  # the OS thread outlives join() briefly
    assert census.check()[0] == "pass"


def test_candidate_catches_a_forward_that_leaves_a_thread(tmp_path, release):
    body = """
    import _thread, threading
    STOP = threading.Event()

    class ModelNew(nn.Module):
        def forward(self, x):
            _thread.start_new_thread(STOP.wait, (5,))
            return torch.relu(x)
    """
    with pytest.raises(TamperError, match="runtime.thread_count"):
        trial(make_candidate(tmp_path, body), tmp_path)


_libc = ctypes.CDLL(None)
_libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_libc.pthread_detach.argtypes = [ctypes.c_ulong]


def _native_thread(start, arg):
    """A thread started through libc, as a submission can through ctypes: no ``_thread``, no
    ``threading``."""
    tid = ctypes.c_ulong()
    assert _libc.pthread_create(ctypes.byref(tid), None, start, arg) == 0
    _libc.pthread_detach(tid)


def _usleep_thread(us):
    """A native thread with no Python in it: libc's usleep as its start routine."""
    _native_thread(ctypes.cast(_libc.usleep, ctypes.c_void_p), us)


def test_a_native_thread_left_running_is_caught():
    runtime.warm_thread_pools("cpu")
    census = runtime.Threads()
    _usleep_thread(500_000)
    with pytest.raises(TamperError, match=r"^runtime.thread_count: forward left 1 native thread\(s\) running"):
        census.check()
    time.sleep(0.6)


def test_a_native_thread_that_ends_is_fine():
    runtime.warm_thread_pools("cpu")
    census = runtime.Threads()
    _usleep_thread(1_000)  # ends within the check's wait
    assert census.check()[0] == "pass"


def test_a_thread_started_before_the_call_is_still_new():
    """The census is the process before the submission's import: a thread started at import or
    by an earlier call is as new as one this call started."""
    runtime.warm_thread_pools("cpu")
    census = runtime.Threads()
    _usleep_thread(500_000)
    time.sleep(0.05)
    with pytest.raises(TamperError, match="native thread"):
        census.check()
    time.sleep(0.5)


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


@_CALLBACK
def _python_on_a_native_thread(arg):
    time.sleep(0.3)
    return None


def test_python_on_a_native_thread_is_named():
    """A ctypes callback as a native thread's start routine runs Python that ``_thread`` never
    started (its count does not grow), yet its frame names it."""
    runtime.warm_thread_pools("cpu")
    census = runtime.Threads()
    _native_thread(ctypes.cast(_python_on_a_native_thread, ctypes.c_void_p), None)
    time.sleep(0.05)
    with pytest.raises(TamperError, match="1 Python thread.*test_runtime_checks.py:_python_on_a_native_thread"):
        census.check()
    time.sleep(0.3)


def test_candidate_catches_a_forward_that_leaves_a_native_thread(tmp_path):
    body = """
    import ctypes
    libc = ctypes.CDLL(None)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    class ModelNew(nn.Module):
        def forward(self, x):
            tid = ctypes.c_ulong()
            libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(libc.usleep, ctypes.c_void_p), 300_000)
            return torch.relu(x)
    """
    with pytest.raises(TamperError, match="runtime.thread_count: forward left 1 native thread"):
        trial(make_candidate(tmp_path, body), tmp_path)
    time.sleep(0.3)


# -- outputs.settled ---------------------------------------------------------------------------


def test_an_output_written_after_the_return_is_caught():
    out = torch.zeros(4)
    returned = outputs.snapshot([out])
    threading.Timer(0.002, out.fill_, (1.0,)).start()
    with pytest.raises(TamperError, match=r"^outputs.settled: output\(s\) \[0\] changed"):
        outputs.settled([out], returned)


def test_settled_outputs_pass():
    out = [torch.ones(4), torch.full((2,), float("nan"))]
    assert outputs.settled(out, outputs.snapshot(out))[0] == "pass"


# -- outputs.independence and determinism.rerun ------------------------------------------------


def test_a_reused_output_buffer_breaks_the_contract_and_hands_over_its_first_values(tmp_path):
    body = """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.out = None

        def forward(self, x):
            if self.out is None:
                self.out = torch.empty_like(x)
            return torch.clamp_min(x, 0, out=self.out)
    """
    reply, req = trial(make_candidate(tmp_path, body), tmp_path, deep=True)
    assert reply["contract"].startswith("outputs.independence: forward returns the same output storage on every call")
    assert names(reply["checks"])["outputs.independence"] == "fail"
    # What the reference compares is the trial's own output, not the next call's.
    task = load_task(str(RELU), taskfile.overrides(str(RELU), "small", {}))
    x = make_inputs(task, req.seed, "cpu", "fp32")[0]
    assert torch.equal(torch.load(req.out)["outputs"], torch.relu(x))


@pytest.mark.parametrize(
    "body, breach",
    [
        (
            """
            class ModelNew(nn.Module):
                def forward(self, x):
                    return torch.sigmoid_(x)
            """,
            "outputs.alias: output 0 shares memory with input 0",
        ),
        (
            """
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("out", torch.zeros(0))

                def forward(self, x):
                    self.out.resize_(x.shape)
                    return torch.sigmoid(x, out=self.out)
            """,
            "outputs.alias: output 0 shares memory with buffer out",
        ),
        (
            """
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("calls", torch.zeros(()))

                def forward(self, x):
                    self.calls += 1
                    return torch.sigmoid(x) + self.calls
            """,
            "determinism.rerun: output 0 differs between two calls on the same inputs: max abs diff 2 (atol 0.01, rtol 0.01); forward keeps state between calls (the call changed calls)",
        ),
    ],
    ids=["in_place", "buffer", "state"],
)
def test_a_breach_of_the_module_contract_is_kept_for_kbench_to_judge(tmp_path, body, breach):
    reply, _ = trial(make_candidate(tmp_path, body), tmp_path, deep=True)
    assert reply["contract"] == breach


def test_a_breach_after_timing_is_in_the_reply(tmp_path):
    body = """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("out", torch.zeros(0))

        def forward(self, x):
            self.out.resize_(x.shape)
            return torch.sigmoid(x, out=self.out)
    """
    stated = make_candidate(tmp_path, body).after_timing(State(seed=7, forward_seed=11))
    assert stated["contract"].startswith("outputs.alias: output 0 shares memory with buffer out")


def test_torch_compile_s_overwritten_graph_output_is_a_contract_error():
    exc = RuntimeError("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. Stack trace: ...")
    got = errors.classify(exc, "forward")
    assert got["kind"] == "contract"
    assert got["message"].startswith("forward: RuntimeError: Error: accessing tensor output of CUDAGraphs")


def test_a_capture_left_open_says_why_random_numbers_fail():
    """CUDA-L1's level2/5 and 2/85 catch a failed CUDA graph capture and fall back; the GPU's
    generator stays capturing, and kbench's next inputs drawn on the GPU fail."""
    exc = RuntimeError("Offset increment outside graph capture encountered unexpectedly.")
    got = errors.classify(exc, "forward")
    assert got["kind"] == "forward"
    assert "a CUDA graph capture the submission began failed and it went on" in got["message"]


def test_a_burst_whose_calls_return_one_storage_breaks_the_contract():
    """A static output (a CUDA graph's) reads `contract` in timing whatever the burst, not a
    wrong kept output: the burst's earlier results were overwritten before they were kept."""
    static = torch.zeros(4)
    with pytest.raises(ContractError, match="outputs.independence: timed call 1 returned the memory"):
        outputs.distinct_calls([(0, static), (1, static)])
    with pytest.raises(ContractError, match="output 1 of call 0"):
        outputs.distinct_calls([(0, (torch.ones(2), static)), (1, (static[1:], torch.ones(2)))])
    # Fresh tensors each call, and one call alone, are fine.
    outputs.distinct_calls([(0, torch.zeros(4)), (1, torch.zeros(4))])
    outputs.distinct_calls([(0, static)])


GRAPH_TREES = """
OVERWRITTEN = "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run."
handed_out = []


class ModelNew(nn.Module):
    # Stands in for torch.compile's CUDA graph trees: the next call overwrites the last output,
    # and any access to it then raises.
    def forward(self, x):
        for last in handed_out:
            torch._C._set_storage_access_error_msg(last, OVERWRITTEN)
        handed_out[:] = [torch.relu(x)]
        return handed_out[0]
"""


def test_an_output_the_next_call_made_unreadable_breaks_the_contract_and_its_copy_is_compared(tmp_path):
    """CUDA-L1's level2/49 and 2/91 (torch.compile's CUDA graphs): the trial's outputs are judged
    from their copy, so the verdict can be `contract` with the values checked, and timed."""
    cand = make_candidate(tmp_path, GRAPH_TREES)
    reply, req = trial(cand, tmp_path, deep=True)
    assert names(reply["checks"])["outputs.independence"] == "fail"
    assert reply["contract"].startswith("outputs.independence: the next call overwrote output(s) [0]")
    (x,) = make_inputs(cand.task, 7, "cpu", "fp32")
    assert torch.equal(torch.load(req.out)["outputs"], torch.relu(x))
    assert outputs.overwritten([torch.ones(1), *cand.module.handed_out]) == []
    gone = torch.ones(2)
    torch._C._set_storage_access_error_msg(gone, errors.OVERWRITTEN)
    assert outputs.overwritten([torch.ones(1), gone]) == [1]


def test_outputs_are_rebuilt_in_the_container_they_came_in():
    a, b = torch.ones(1), torch.zeros(1)
    assert returns.rebuilt(torch.ones(1), [a]) is a
    assert returns.rebuilt([torch.ones(1), torch.ones(1)], [a, b]) == [a, b]
    named = torch.return_types.max((torch.ones(1), torch.ones(1)))
    again = returns.rebuilt(named, [a, b])
    assert type(again) is type(named) and again.values is a and again.indices is b


def test_independence_sees_a_changed_first_output():
    first = [torch.ones(4)]
    copies = outputs.snapshot(first)
    first[0].add_(1)
    with pytest.raises(TamperError, match="output 0 changed"):
        outputs.independence(first, copies, [torch.ones(4)])


def test_honest_output_is_independent_and_deterministic(tmp_path):
    reply, _ = trial(make_candidate(tmp_path, RELU_HONEST), tmp_path, deep=True)
    got = names(reply["checks"])
    assert got["outputs.independence"] == "pass" and got["determinism.rerun"] == "pass"
    assert "profile" not in reply  # GPU only


STALE = """
class ModelNew(nn.Module):
    calls = 0

    def forward(self, x):
        # Stands in for an output left partly unwritten: what the unwritten part holds
        # depends on what ran before.
        ModelNew.calls += 1
        return torch.relu(x) + ModelNew.calls * {step}
"""


def test_stale_output_fails_determinism(tmp_path):
    # Nothing of the module's own changed: it read what it did not write.
    with pytest.raises(OutputCheckError, match="^determinism.rerun: output 0 differs.*forward reads memory it did not write$"):
        trial(make_candidate(tmp_path, STALE.format(step=1.0)), tmp_path, deep=True)


def test_nondeterminism_within_tolerance_warns(tmp_path):
    reply, _ = trial(make_candidate(tmp_path, STALE.format(step=1e-6)), tmp_path, deep=True)
    assert names(reply["checks"])["determinism.rerun"] == "warn"


def test_rerun_compares_nan_bit_for_bit():
    a = torch.tensor([float("nan"), 1.0])
    assert outputs.rerun([a], [a.clone()], 1e-2, 1e-2, [])[0] == "pass"
    with pytest.raises(OutputCheckError):
        outputs.rerun([a], [torch.tensor([0.0, 1.0])], 1e-2, 1e-2, [])


# -- precision.tf32_flags ----------------------------------------------------------------------


def test_tf32_switched_on_at_import_is_reset(tmp_path):
    body = """
    torch.backends.cuda.matmul.allow_tf32 = True

    class ModelNew(nn.Module):
        def forward(self, x):
            torch.backends.cudnn.allow_tf32 = True
            return torch.relu(x)
    """
    cand = make_candidate(tmp_path, body)
    assert names(cand.checks.entries()) == {"precision.tf32_flags": "warn"}
    assert runtime._tf32_on() == []
    reply, _ = trial(cand, tmp_path)
    assert names(reply["checks"])["precision.tf32_flags"] == "warn"
    assert runtime._tf32_on() == []


def test_tf32_switched_on_while_timed_is_seen_by_the_state_checks(tmp_path):
    """The candidate's timed requests carry no checks (they must cost what the reference's
    cost); the `state` request after timing sees a switch a timed call left on."""
    body = """
    class ModelNew(nn.Module):
        def forward(self, x):
            torch.backends.cuda.matmul.allow_tf32 = True
            return torch.relu(x)
    """
    from kbench_worker.roles.candidate import Session

    session = Session(channel=None)
    session.candidate = make_candidate(tmp_path, body)
    session.time(TimeSetup(mode="offline", seed=3, cycles_per_us=1980))
    assert "checks" not in session.time(Time(n=2))
    assert names(session.state(State(seed=7, forward_seed=8))["checks"])["precision.tf32_flags"] == "warn"
    assert runtime._tf32_on() == []


def test_a_static_output_handed_out_once_warm_is_caught_after_timing(tmp_path):
    """A module that returns one preallocated output only after some calls (as a CUDA graph
    captured after a warm-up does) passes the first trial's independence check; the check after
    timing, when it is warm, finds the shared storage and reports it, so the profiled call
    still runs."""
    body = """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls, self.out = 0, None
        def forward(self, x):
            self.calls += 1
            if self.calls <= 3:
                return torch.relu(x)
            if self.out is None:
                self.out = torch.empty_like(x)
            return torch.clamp(x, min=0, out=self.out)
    """
    from kbench_worker.roles.candidate import Session

    session = Session(channel=None)
    session.candidate = make_candidate(tmp_path, body)
    reply, _ = trial(session.candidate, tmp_path, deep=True)
    assert names(reply["checks"])["outputs.independence"] == "pass"
    session.time(TimeSetup(mode="offline", seed=3, cycles_per_us=1980))
    session.time(Time(n=2))
    stated = session.state(State(seed=7, forward_seed=8))
    assert stated["contract"].startswith("outputs.independence: forward returns the same output storage")
    assert names(stated["checks"])["outputs.independence"] == "fail"


# -- profile.library_share: which kernels are the submission's ---------------------------------

DEFINED = {"relu_kernel", "add_kernel", "Kernel2", "gemv2T_kernel_val", "triton_poi_fused_relu_0"}


@pytest.mark.parametrize(
    "name, custom",
    [
        ("relu_kernel(float const*, float*, int)", True),
        ("void relu_kernel<float>(float const*, float*, int)", True),
        ("void relu_kernel<float>(float const*, …)", True),
        ("_Z11relu_kernelPKfPfi", True),
        ("_Z11relu_kernelIfEvPKT_PS0_i", True),
        ("_ZN12_GLOBAL__N_111relu_kernelEPf", True),
        ("(anonymous namespace)::relu_kernel(float*)", True),
        ("void ns::relu_kernel<4, ns::Op<float> >(int, ns::Op<float>)", True),
        ("add_kernel", True),
        ("add_kernel_0d1d2d3de", True),
        ("add_kernel2", False),
        ("relu_kernel_v2(float*)", False),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel<float> >(int, float*)", False),
        ("void at::native::relu_kernel(float*)", False),
        ("_ZN2at6native11relu_kernelEPf", False),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(Params)", False),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas", False),
        ("nvjet_tst_128x64_64x8_1x2_h_bz_NNT", False),
        ("triton_poi_fused_relu_0", False),
        ("Memcpy DtoD (Device -> Device)", False),
        ("ampere_sgemm_128x64_nn", False),
    ],
)
def test_kernel_classification(name, custom):
    assert profile.is_custom(name, DEFINED) is custom


def test_defined_kernels_from_source():
    source = '''
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

cuda_src = """
template <typename T>
__global__ void __launch_bounds__(256) scale_kernel(const T* x, T* y, int n) {}
template <class Mma>
__global__ static void __launch_bounds__(decltype(size(Mma{}))::value) wgmma_kernel(float* x) {}
extern "C" __global__ void add_one(float* x) {}
__global__
void
multi_line_kernel(float* x) {}
"""

@triton.jit
def tri_kernel(x_ptr):
    pass

@triton.autotune(configs=[], key=[])
@triton.jit
def tuned_kernel(x_ptr):
    pass

def helper():
    pass
'''
    assert profile.defined_kernels(source) == {"scale_kernel", "wgmma_kernel", "add_one", "multi_line_kernel", "tri_kernel", "tuned_kernel"}


# A CUTLASS kernel the submission instantiated is its own when its extension holds the kernel's
# name (by either form); ATen's kernels never are, and a library kernel it did not build stays
# library.
CUTLASS_KERNEL = "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIiEEEEvNT_6ParamsE"
CUTLASS_DEMANGLED = "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int> >(cutlass::gemm::kernel::GemmUniversal<int>::Params)"
ATEN_KERNEL = "_ZN2at6native11relu_kernelEPf"


@pytest.mark.parametrize(
    "name, built, custom",
    [
        (CUTLASS_KERNEL, {CUTLASS_KERNEL}, True),
        (CUTLASS_DEMANGLED, {CUTLASS_DEMANGLED}, True),
        (CUTLASS_KERNEL, set(), False),
        (CUTLASS_KERNEL, {"_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIlEEEEvNT_6ParamsE"}, False),
        (ATEN_KERNEL, {ATEN_KERNEL}, False),
    ],
)
def test_kernels_of_the_submissions_own_extension(name, built, custom):
    assert profile.is_custom(name, set(), built) is custom


def test_names_a_shared_object_holds_with_their_demangled_forms(tmp_path):
    from kbench_worker.checks import symbols

    image = tmp_path / "ext.so"
    image.write_bytes(b"\x7fELF\0" + CUTLASS_KERNEL.encode() + b"\0junk_Z\0" + ATEN_KERNEL.encode() + b"\0")
    found = symbols.names([str(image), str(tmp_path / "missing.so")])
    assert {CUTLASS_KERNEL, CUTLASS_DEMANGLED, ATEN_KERNEL} <= found


def test_profile_summary():
    per_kernel = {"void at::native::fill_kernel(float*)": (2, 1.0), "relu_kernel(float*)": (1, 3.0)}
    found = profile.summarize(per_kernel, {"relu_kernel"}, 3.5)
    assert found == {
        "library_share": 0.25,
        "custom_ms": 3.0,
        "total_ms": 4.0,
        "busy_ms": 3.5,
        "launches": [
            {"name": "relu_kernel(float*)", "launches": 1, "ms": 3.0, "own": True},
            {"name": "void at::native::fill_kernel(float*)", "launches": 2, "ms": 1.0, "own": False},
        ],
    }
    # The reference's profile: nothing of its own.
    assert [k["own"] for k in profile.summarize(per_kernel, set(), 3.5)["launches"]] == [False, False]
    assert profile.summarize({}, set(), 0.0)["library_share"] == 0.0


def test_the_profiler_s_call_is_bracketed_once_after_an_unwatched_one(monkeypatch):
    """`--profile ncu` profiles only between cudaProfilerStart and Stop: the call runs once
    unwatched, then once between the two, the device idle at both ends, and the bracket closes
    even where the call raises."""
    import torch

    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: events.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: events.append("stop"))
    profile.bracketed(lambda: events.append("call"))
    assert events == ["call", "sync", "start", "call", "sync", "stop"]
    calls = []

    def second_raises():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")

    events.clear()
    with pytest.raises(RuntimeError):
        profile.bracketed(second_raises)
    assert events == ["sync", "start", "stop"]


def test_both_roles_answer_the_profiler_s_call_with_their_model_bracketed(tmp_path, monkeypatch):
    """`profiler_call` runs the role's own model twice on the seed's inputs, the second call
    between the profiler's start and stop (the CUDA calls stubbed: on the CPU there is no
    profiler to start)."""
    from types import SimpleNamespace

    import torch

    from kbench_worker.roles import candidate as candidate_role
    from kbench_worker.roles import reference as reference_role
    from kbench_worker.wire.messages import ProfilerCall

    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: events.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: events.append("stop"))
    counted = """
    class ModelNew(nn.Module):
        calls = 0
        def forward(self, x):
            type(self).calls += 1
            return torch.relu(x)
    """
    session = candidate_role.Session(channel=None)
    session.candidate = make_candidate(tmp_path, counted)
    assert session.profiler_call(ProfilerCall(seed=7, forward_seed=11)) == {}
    assert type(session.candidate.model).calls == 2
    assert events == ["sync", "start", "sync", "stop"]
    events.clear()
    reference = reference_role.Session(SimpleNamespace(startup_s=0.0))
    reference.load(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(RELU), set={}, scale="small"))
    assert reference.profiler_call(ProfilerCall(seed=7, forward_seed=11)) == {}
    assert events == ["sync", "start", "sync", "stop"]
    tables = (candidate_role.commands(None), reference_role.commands(SimpleNamespace(startup_s=0.0)))
    assert all("profiler_call" in table for table in tables)


def test_busy_time_counts_concurrent_work_once_and_gaps_not_at_all():
    # Two overlapping kernels (0-3, 2-4), one inside another (5-9 holds 6-7), a gap between.
    assert profile.busy([(5.0, 9.0), (0.0, 3.0), (2.0, 4.0), (6.0, 7.0)]) == 8.0
    assert profile.busy([]) == 0.0


# -- the log ------------------------------------------------------------------------------------


def test_log_keeps_one_entry_per_check_with_the_worst_outcome():
    a, b = CheckName.OUTPUTS_ALIAS, CheckName.DETERMINISM_RERUN
    log = Log()
    log.add(a, "pass", "first", 1.0)
    log.add(b, "skip", "no room", 0.5)
    log.add(a, "warn", "second", 2.0)
    log.add(a, "pass", "third", 1.0)
    assert log.entries() == [
        {"name": "outputs.alias", "outcome": "warn", "evidence": "second", "seconds": 4.0},
        {"name": "determinism.rerun", "outcome": "skip", "evidence": "no room", "seconds": 0.5},
    ]


def test_log_names_the_check_that_proved_the_outputs_wrong():
    """The error record says which check proved the outputs wrong (`check`; kbench reads it, not
    the message): the innermost one that ran, not one whose call only passed the error on."""
    log = Log()

    def differs():
        raise OutputCheckError("determinism.rerun: output 0 differs")

    def mistyped():
        raise OutputTypeError("outputs.exact_type: output 0 is a list")

    def second_call():
        log.run(CheckName.OUTPUTS_EXACT_TYPE, mistyped)

    def raises():
        raise RuntimeError("forward fails")

    for check, run, named in [
        (CheckName.DETERMINISM_RERUN, differs, "determinism.rerun"),
        (CheckName.OUTPUTS_INDEPENDENCE, second_call, "outputs.exact_type"),
    ]:
        with pytest.raises((OutputCheckError, OutputTypeError)) as raised:
            log.run(check, run)
        record = errors.classify(raised.value, "forward")
        assert (record["kind"], record["check"]) == ("output", named)
    with pytest.raises(RuntimeError) as raised:
        log.run(CheckName.OUTPUTS_INDEPENDENCE, raises)
    assert "check" not in errors.classify(raised.value, "forward"), "the forward's own error names no check"


def test_log_takes_only_the_schema_s_check_names():
    log = Log()
    log.add("outputs.alias", "pass", "a name as kbench writes it is the member")
    assert log.entries()[0]["name"] is CheckName.OUTPUTS_ALIAS
    with pytest.raises(ValueError):
        log.add("outputs.aliases", "pass", "a misspelt name")


def test_bits_compare_every_dtype():
    for t in (torch.randn(3), torch.randn(3).half(), torch.tensor([True, False]), torch.randn(2, dtype=torch.complex64)):
        assert outputs.same_bits(t, t.clone())
    assert not outputs.same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))


# -- the control arm of the process check ----------------------------------------------------

LINEAR_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return self.fc(x)

n = 8

def get_inputs():
    return [torch.randn(4, n)]

def get_init_inputs():
    return [n]
"""


def _linear_session(tmp_path, body):
    """A candidate worker's session with `body` submitted for LINEAR_TASK, and the task's path."""
    from kbench_worker.roles.candidate import Session

    task = write(tmp_path, "linear.py", LINEAR_TASK)
    session = Session(channel=None)
    session.candidate = make_candidate(tmp_path, body, task=task, scale=None)
    return session, task


def test_the_control_arm_times_the_tasks_reference_in_the_candidates_process(tmp_path):
    # The submission's own model computes something else: the control arm must not time it.
    body = """
    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
        def forward(self, x):
            return x * 3
    """
    session, task = _linear_session(tmp_path, body)
    reference = Reference(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(task), set={}))
    params.perturb(reference.model, 5)
    session.perturb(Perturb(seed=5))
    setup = TimeSetup(arm="control", mode="offline", seed=3, cycles_per_us=1980)
    warm = session.time(setup)
    # The timed requests do the reference worker's work only: the state checks come apart.
    assert warm["calls"] >= 1 and "checks" not in warm
    control = session.candidate.control.model
    assert type(control).__name__ == "Model"
    x = torch.randn(4, 8)
    with torch.no_grad():
        # Built and perturbed as the reference worker's model is.
        assert torch.equal(control(x), reference.model(x))
    reply = session.time(Time(arm="control", n=3))
    assert len(reply["samples_ms"]) == 3 and "checks" not in reply
    # The candidate's own arm is untouched and still times ModelNew.
    assert session.candidate.timed is None


def test_the_control_arm_times_on_the_candidate_arms_input_sets(tmp_path):
    # Where its inputs and outputs lie can move a kernel's time (level1/33 on an H100): the
    # control is timed in the candidate arm's memory, so the process check sees that too.
    session, _ = _linear_session(tmp_path, LINEAR_TASK + "\nModelNew = Model\n")  # the identity
    session.time(TimeSetup(mode="offline", seed=3, cycles_per_us=1980))
    candidate = session.candidate.timed
    before = [x.clone() for s in candidate.sets for x in s]
    session.time(TimeSetup(arm="control", mode="offline", seed=4, cycles_per_us=1980))
    session.time(Time(arm="control", n=3))
    control = session.candidate.control.timed
    assert control.sets is candidate.sets
    assert control.model is not candidate.model and type(control.model).__name__ == "Model"
    # The control's draws were written into the very tensors the candidate's calls read.
    after = [x for s in candidate.sets for x in s]
    assert len(after) == len(before) and all(not torch.equal(a, b) for a, b in zip(before, after))


def _named(**tensors):
    return list(tensors.items())


def test_parameters_pair_by_name_then_values_then_shape():
    w, b, ones, zeros = torch.randn(6, 4), torch.randn(6), torch.ones(6), torch.zeros(6)
    reference = _named(**{"fc.weight": w, "fc.bias": b, "bias": torch.randn(6), "gn.weight": ones, "gn.bias": zeros})
    # The same five, registered in another order under other names, four of one shape.
    candidate = _named(gn_b=zeros.clone(), gn_w=ones.clone(), added=reference[2][1].clone(), fc_b=b.clone(), fc_w=w.clone())
    pairs, missing, extra = params.pair(reference, candidate)
    assert sorted(pairs) == [("added", "bias", (0,)), ("fc_b", "fc.bias", (0,)), ("fc_w", "fc.weight", (0, 1)), ("gn_b", "gn.bias", (0,)), ("gn_w", "gn.weight", (0,))]
    assert (missing, extra) == ([], [])


def test_a_parameter_stored_transposed_or_reshaped_pairs_by_its_values():
    w, b = torch.randn(5, 5), torch.randn(5)
    # Square: the transposed weight has the weight's own shape, and values decide.
    pairs, missing, extra = params.pair(_named(w=w, b=b), _named(wt=w.t().contiguous(), b=b.reshape(1, 5)))
    assert pairs == [("b", "b", (0,)), ("wt", "w", (1, 0))]
    conv = torch.randn(3, 2, 2, 2)
    flat = conv.permute(0, 2, 3, 1).reshape(3, 8)
    assert params.pair(_named(conv=conv), _named(flat=flat))[0] == [("flat", "conv", (0, 2, 3, 1))]


def test_same_shapes_with_other_values_pair_in_registration_order():
    reference = _named(a=torch.randn(4), b=torch.randn(3, 4))
    pairs, _, _ = params.pair(reference, _named(y=torch.randn(3, 4), x=torch.randn(4)))
    assert pairs == [("y", "b", (0, 1)), ("x", "a", (0,))]


def test_unpaired_parameters_are_named_on_each_side():
    reference = _named(weight=torch.randn(4), bias=torch.randn(4))
    pairs, missing, extra = params.pair(reference, _named(weight=reference[0][1].clone(), pool=torch.full((1, 1, 3), 1 / 3)))
    assert pairs == [("weight", "weight", (0,))]
    assert (missing, extra) == (["bias"], ["pool"])


def test_the_candidate_perturbs_each_parameter_as_its_partner(tmp_path):
    task = write(tmp_path, "linear.py", LINEAR_TASK)
    body = """
    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            fc = nn.Linear(n, n)
            self.scale = nn.Parameter(torch.ones(1), requires_grad=False)
            self.b = nn.Parameter(fc.bias.detach().reshape(1, n).clone())
            self.wt = nn.Parameter(fc.weight.detach().t().contiguous())
        def forward(self, x):
            return (x @ self.wt + self.b) * self.scale
    """
    candidate = make_candidate(tmp_path, body, task=task, scale=None)
    reference = Reference(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(task), set={}))
    shapes = params.perturb(reference.model, 5)
    reply = candidate.perturb(5)
    assert reply["shapes"] == shapes and reply["missing"] == [] and reply["extra"] == ["scale [1]"]
    assert reply["paired"] == ["b [1, 8] = fc.bias [8]", "wt [8, 8] = fc.weight [8, 8] permuted [1, 0]"]
    x = torch.randn(4, 8)
    with torch.no_grad():
        # The same values in another layout: the same outputs, up to the summation order.
        assert torch.allclose(candidate.model(x), reference.model(x), atol=1e-6)
    assert candidate.model.scale.item() == 1.0


def test_restore_puts_back_the_parameters_as_built_in_both_workers(tmp_path):
    """After `params.perturbation`'s trial the later checks and timing judge the parameters as
    built: a module that folded them at construction is right again, bit for bit."""
    from types import SimpleNamespace

    from kbench_worker.roles.reference import Session

    body = """
    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.register_buffer("folded", self.fc.weight.detach().t().contiguous())
        def forward(self, x):
            return x @ self.folded + self.fc.bias
    """
    session, task = _linear_session(tmp_path, body)
    candidate = session.candidate
    reference = Session(SimpleNamespace(startup_s=0.0))
    reference.load(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(task), set={}))
    built = {k: v.clone() for k, v in reference.reference.model.state_dict().items()}
    x = torch.randn(4, 8)
    same = lambda: torch.allclose(candidate.model(x), reference.reference.model(x), atol=1e-6)  # noqa: E731
    with torch.no_grad():
        assert same()
        reference.perturb(Perturb(seed=5))
        session.perturb(Perturb(seed=5))
        assert reference.reference.params == (5,) and candidate.perturbed == 5
        # Stale: the folded copy is not the perturbed weight.
        assert not same()
        reference.perturb(Perturb(seed=5, restore=True))
        session.perturb(Perturb(seed=5, restore=True))
        assert reference.reference.params == () and candidate.perturbed is None
        for k, v in reference.reference.model.state_dict().items():
            assert torch.equal(v, built[k]), k
        assert same()


def test_a_digest_tells_equal_values_from_others(monkeypatch):
    w = torch.randn(6, 6)
    assert params.digest(w) == params.digest(w.clone())
    # The same values elsewhere: transposed, two swapped, another dtype's bits.
    swapped = w.clone().reshape(-1)
    swapped[[0, 1]] = swapped[[1, 0]]
    others = [w.t(), swapped.reshape(6, 6), w.half(), w.double()]
    assert len({params.digest(w), *map(params.digest, others)}) == 5
    # Integer sums: the same digest whatever the chunks.
    whole = params.digest(w)
    monkeypatch.setattr(params, "DIGEST_CHUNK", 7)
    assert params.digest(w) == whole and params.digest(torch.tensor(2.0)) != params.digest(torch.tensor(3.0))


def _built_and_ours():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    built = params.built(model)
    ours = {name: p.detach().clone() for name, p in params.floating(model)}
    return built, ours


@pytest.mark.parametrize(
    "change, own",
    [
        (lambda built, ours: None, True),
        (lambda built, ours: built.clear(), False),  # the reference said nothing (the CPU)
        (lambda built, ours: ours.pop("0.bias"), False),  # not by name
        (lambda built, ours: ours.update({"0.bias": ours["0.bias"].reshape(1, 4)}), False),
        (lambda built, ours: ours.update({"0.bias": ours["0.bias"].double()}), False),
        (lambda built, ours: ours["0.weight"].add_(1e-3), False),  # other values
        # The same values in another layout (channels_last weights in published kernels).
        (lambda built, ours: ours.update({"0.weight": ours["0.weight"].t().contiguous().t()}), False),
        # ModelNew's two weights of ones in one storage: perturbing both would do it twice.
        (lambda built, ours: ours.update({"1.bias": ours["1.weight"]}) or built[3].update(digest=built[2]["digest"]), False),
    ],
)
def test_the_candidate_perturbs_its_own_parameters_only_where_they_are_the_tasks_as_built(change, own):
    built, ours = _built_and_ours()
    change(built, ours)
    found = params.own_parameters(built, ours)
    assert (found is not None) is own
    if own:
        assert [id(p) for p in found] == [id(ours[b["name"]]) for b in built]


def test_digests_that_do_not_fit_in_memory_leave_the_candidate_to_pair(monkeypatch):
    built, ours = _built_and_ours()

    def full(t):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(params, "digest", full)
    assert params.own_parameters(built, ours) is None


def test_a_candidate_with_the_tasks_parameters_perturbs_them_without_building_the_task(tmp_path, monkeypatch):
    task = write(tmp_path, "linear.py", LINEAR_TASK)
    body = """
    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.scale = nn.Parameter(torch.ones(1), requires_grad=False)
        def forward(self, x):
            return self.fc(x) * self.scale
    """
    candidate = make_candidate(tmp_path, body, task=task, scale=None)
    reference = Reference(Load(device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, task=str(task), set={}))
    built = params.built(reference.model)
    shapes = params.perturb(reference.model, 5)
    monkeypatch.setattr(models, "build", lambda *a: pytest.fail("the task's model built again"))
    reply = candidate.perturb(5, built)
    assert reply == {"shapes": shapes, "paired": [], "missing": [], "extra": ["scale [1]"]}
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert torch.equal(candidate.model(x), reference.model(x))
    # Another candidate whose weight is not the task's as built: the task's model is built.
    monkeypatch.undo()
    other = make_candidate(tmp_path, body, task=task, scale=None)
    with torch.no_grad():
        other.model.fc.weight.mul_(2)
    assert other.perturb(5, built)["shapes"] == shapes
    with torch.no_grad():
        assert torch.equal(other.model(x), reference.model(x))


BATCHNORM_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(16)
        with torch.no_grad():
            self.bn.running_mean.fill_(0.5)
            self.bn.running_var.fill_(4.0)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.randn(32, 16)]

def get_init_inputs():
    return []
"""


def test_a_batchnorm_kernel_on_running_statistics_is_told_apart_from_a_wrong_one(tmp_path):
    task = write(tmp_path, "bn.py", BATCHNORM_TASK)
    running = """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(16)
            with torch.no_grad():
                self.bn.running_mean.fill_(0.5)
                self.bn.running_var.fill_(4.0)
            self.bn.eval()

        def forward(self, x):
            return self.bn(x)
    """
    _, checked = _check(tmp_path, task, running, deep=False, atol=1e-4, rtol=1e-4)
    assert not checked["correct"]
    assert checked["reason"].startswith("BatchNorm: the output is the task's model with running statistics"), checked["reason"]
    wrong = """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(16)

        def forward(self, x):
            return self.bn(x) + 1
    """
    _, checked = _check(tmp_path, task, wrong, deep=False, atol=1e-4, rtol=1e-4)
    assert not checked["correct"] and "BatchNorm" not in checked["reason"]


def test_a_timed_calls_reordered_sum_is_judged_against_float64_too(tmp_path):
    """`timing.timed_output_check` judges a miss as the trials do (`precision.fp64_judged`): a
    blockwise sum that misses a tight tolerance is no cheat there either; a wrong one still is."""
    task = write(tmp_path, "mm.py", MATMUL_TASK)
    ref = Reference(Load(device="cpu", precision="fp32", atol=1e-7, rtol=1e-7, task=str(task), set={}))
    a, b = make_inputs(ref.task, 5, "cpu", "fp32")
    blockwise = sum(a[:, k : k + 16] @ b[k : k + 16] for k in reversed(range(0, a.shape[1], 16)))
    pool = kept.Pool(blockwise, path=str(tmp_path / "pool"))
    pool.keep(0, blockwise)
    pool.keep(1, blockwise + 1e-3)
    described = pool.describe()
    checked = ref.check_kept(CheckKept(slot=0, seed=5, forward_seed=9, kept=described))
    assert checked["correct"], checked["reason"]
    assert names(checked["checks"])["precision.fp64_judged"] == "pass"
    wrong = ref.check_kept(CheckKept(slot=1, seed=5, forward_seed=9, kept=described))
    assert not wrong["correct"] and names(wrong["checks"])["precision.fp64_judged"] == "fail"
