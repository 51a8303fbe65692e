"""KernelBench's verdict: its rule on one trial's outputs (`kernelbench.correct`, `needed`), and
its eval run as KernelBench runs it (`kernelbench.Eval`, `kernelbench.environment`)."""

import textwrap

import pytest
import torch

from conftest import write
from kbench_worker.checks import kernelbench
from kbench_worker.checks.kernelbench import NEVER

TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b) * SCALE

SCALE = 1.0
N = 64

def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]

def get_init_inputs():
    return []
"""

LABELS_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, labels):
        return torch.nn.functional.nll_loss(x, labels)

def get_inputs():
    return [torch.randn(8, 5).log_softmax(dim=1), torch.randint(0, 5, (8,))]

def get_init_inputs():
    return []
"""


def evaluate(tmp_path, body, task=TASK, overrides=None):
    task_path = write(tmp_path, "task.py", task)
    sub = write(tmp_path, "sub.py", "import torch\nimport torch.nn as nn\n" + textwrap.dedent(body))
    return kernelbench.Eval(str(task_path), str(sub), overrides or {}, "cpu", "fp32")


MATMUL = """
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b) * SCALE + OFFSET

OFFSET = {offset}
"""


# -- the rule ----------------------------------------------------------------------------------


def test_kernelbench_verdict_is_allclose_at_its_tolerance_and_the_shapes():
    ref = torch.randn(64, 64)
    assert kernelbench.correct(ref, ref + 1e-3, 1e-2)
    assert not kernelbench.correct(ref, ref + 1e-3, 1e-4)
    assert kernelbench.correct((ref, ref), (ref, ref + 1e-3), 1e-2)
    assert not kernelbench.correct(ref, ref.reshape(32, 128), 1e-2)
    assert not kernelbench.correct(ref, (ref,), 1e-2)
    assert not kernelbench.correct(ref, ref.double(), 1e-2)
    # The softmax kbench fails with its scaled tolerance passes KernelBench's rule.
    tiny = torch.softmax(torch.rand(2, 100_000), dim=1)
    assert kernelbench.correct(tiny, torch.zeros_like(tiny), 1e-4)


@pytest.mark.parametrize(
    "cand, tolerances",
    [
        (lambda r: r + 1e-3, (1e-2, 1e-4)),
        (lambda r: r * (1 + 3e-5), (1e-4, 1e-5)),
        (lambda r: r.clone(), (0.0, None)),
        (lambda r: torch.where(r > 1, torch.full_like(r, float("inf")), r), (None, 1e-2)),
        (lambda r: torch.where(r > 1, torch.full_like(r, float("nan")), r), (None, 1e-2)),
        (lambda r: r.reshape(32, 128), (None, 1e-2)),
        (lambda r: (r,), (None, 1e-2)),
    ],
    ids=["offset", "relative", "exact", "inf", "nan", "shape", "structure"],
)
def test_kernelbench_needed_gives_the_verdict_at_any_tolerance(cand, tolerances):
    """The least tolerance `needed` reports agrees with allclose at the tolerances around it:
    KernelBench's verdict at 1e-4 and at 1e-2 from one run."""
    torch.manual_seed(0)
    ref = torch.randn(64, 64)
    out = cand(ref)
    needed = kernelbench.needed(ref, out)
    passes, fails = tolerances
    if passes is None:
        assert needed == NEVER
    else:
        assert needed <= passes and kernelbench.correct(ref, out, passes)
    if fails is not None:
        assert needed > fails and not kernelbench.correct(ref, out, fails)


# -- the eval, run as KernelBench runs it --------------------------------------------------------


@pytest.mark.parametrize("offset, correct", [(0.0, True), (1e-3, False), (1.0, False)])
def test_each_trial_is_judged_by_allclose_and_says_what_it_needs(tmp_path, offset, correct):
    ev = evaluate(tmp_path, MATMUL.format(offset=offset))
    for index in range(3):
        got = ev.trial(index, 1e-4)
        assert got["correct"] == correct
        if correct:
            assert got == {"correct": True, "needed": 0.0, "reason": ""}
        else:
            needed = got["needed"]
            assert needed > 1e-4 and got["reason"] == f"not allclose at 0.0001 (needs {needed:.3g})"
    # A miss of 1e-3 passes KernelBench's older 1e-2; a miss of 1 no tolerance of its passes.
    assert ev.trial(0, 1e-2)["correct"] == (offset < 1e-2)


def test_its_trials_draw_their_seeds_and_inputs_as_kernelbench_does(tmp_path):
    """Seed 42, one `randint(0, 2**32 - 1)` per trial, each trial's inputs made on the CPU after
    seeding with its own: the inputs of KernelBench's eval, not kbench's."""
    ev = evaluate(tmp_path, MATMUL.format(offset=0.0))
    ev.trial(1, 1e-4)
    torch.manual_seed(42)
    seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(2)]
    torch.manual_seed(seeds[1])
    expected = [torch.randn(64, 64), torch.randn(64, 64)]
    assert all(torch.equal(x, y) for x, y in zip(ev.inputs, expected))


def test_a_trials_inputs_are_made_once_the_last_trials_are_let_go(tmp_path):
    """As in KernelBench's loop, where `inputs = get_inputs()` rebinds the name before the device
    copies are made: the last trial's inputs are gone by then (their memory can serve the next
    trial's, which a CUDA graph captured on an input's address depends on), its outputs are not."""
    body = """
    import weakref

    SEEN = []

    class ModelNew(nn.Module):
        def forward(self, a, b):
            out = torch.matmul(a, b) * SCALE
            SEEN[:] = [weakref.ref(a), weakref.ref(b), weakref.ref(out)]
            return out
    """
    ev = evaluate(tmp_path, body)
    seen, alive, process = ev.get_inputs.__globals__["SEEN"], [], ev._process
    ev._process = lambda x: (alive.append([r() is not None for r in seen]), process(x))[1]
    ev.trial(0, 1e-4)
    ev.trial(1, 1e-4)
    # Two inputs a trial: trial 0's made before any call; trial 1's with trial 0's inputs gone
    # and its output still held.
    assert alive == [[], [], [False, False, True], [False, False, True]]


def test_the_submission_runs_in_the_tasks_namespace_from_a_string(tmp_path):
    """Both sources run in one namespace: a constant the submission assigns is the reference's
    too. Its functions have no source file, so `torch.jit.script` of one fails, as in
    KernelBench (a kernel that falls back to another path there is judged on that path)."""
    body = """
    SCALE = 3.0

    def _plus_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1.0

    try:
        _extra = torch.jit.script(_plus_one)
    except Exception:
        _extra = None

    class ModelNew(nn.Module):
        def forward(self, a, b):
            out = torch.matmul(a, b) * 3.0
            return out if _extra is None else _extra(out)
    """
    got = evaluate(tmp_path, body).trial(0, 1e-4)
    assert got["correct"], got


def test_what_kernelbench_cannot_run_fails(tmp_path):
    # KernelBench casts every input to the precision, integer labels too: its reference raises.
    got = evaluate(tmp_path, "class ModelNew(nn.Module):\n    def forward(self, x, labels):\n        return x.sum()\n", task=LABELS_TASK).trial(0, 1e-4)
    assert not got["correct"] and got["needed"] == NEVER
    assert got["reason"].startswith("the reference's call raised RuntimeError"), got["reason"]
    # The submission's call raising, or another shape.
    raising = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        raise ValueError('no kernel')\n"
    got = evaluate(tmp_path, raising).trial(0, 1e-4)
    assert got["reason"] == "the submission's call raised ValueError: no kernel"
    reshaped = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b).reshape(32, 128)\n"
    got = evaluate(tmp_path, reshaped).trial(0, 1e-4)
    assert (got["correct"], got["reason"]) == (False, "output shape [32, 128], expected [64, 64]")
    with pytest.raises(LookupError, match="defines no ModelNew"):
        evaluate(tmp_path, "class Model2(nn.Module):\n    pass\n")


def test_the_runs_sizes_apply_to_both_sources(tmp_path):
    ev = evaluate(tmp_path, MATMUL.format(offset=0.0) + "\nN = 64\n", overrides={"N": 8})
    got = ev.trial(0, 1e-4)
    assert got["correct"] and [list(x.shape) for x in ev.inputs] == [[8, 8], [8, 8]]
