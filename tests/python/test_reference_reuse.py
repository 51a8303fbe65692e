"""A kept reference worker loads the task again for the next candidate (kbench `pipeline::reuse`):
whatever the last evaluation changed, the new reference is the one a fresh worker would build."""

import textwrap
from types import SimpleNamespace

import pytest
import torch

from kbench_worker.roles.reference import Session
from kbench_worker.task import models
from kbench_worker.task.inputs import _SHAPED, _shaped, forget_tasks, make_inputs
from kbench_worker.wire.messages import CheckKept, CheckOutputs, Load, Perturb

TASK = textwrap.dedent(
    """
    import torch

    calls = 0
    batch_size = 4
    features = 8

    class Model(torch.nn.Module):
        def __init__(self, features):
            super().__init__()
            self.fc = torch.nn.Linear(features, features)
            self.bn = torch.nn.BatchNorm1d(features)

        def forward(self, x):
            global calls
            calls += 1
            return self.bn(self.fc(x)) * calls

    def get_inputs():
        return [torch.rand(batch_size, features)]

    def get_init_inputs():
        return [features]
    """
)


def _perturb(session):
    session.perturb(Perturb(seed=3))


def _forward(session):
    reference = session.reference
    models.forward(reference.model, make_inputs(reference.task, 5, "cpu", "fp32"), 0)


def _shape_variant(session):
    _shaped(session.reference.task, {"batch_size": 5})


def _state(session):
    """The model's parameters and buffers, the task module's own state, the shape variants held."""
    reference = session.reference
    tensors = {k: v.clone() for k, v in reference.model.state_dict().items()}
    return tensors, reference.task.calls, len(_SHAPED)


def _same(a, b):
    return a[1:] == b[1:] and a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])


@pytest.mark.parametrize("change", [_perturb, _forward, _shape_variant], ids=["perturbed", "forward", "shape_variant"])
def test_a_second_load_rebuilds_what_the_last_evaluation_changed(tmp_path, change):
    task = tmp_path / "task.py"
    task.write_text(TASK)
    load = Load(task=str(task), device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, set={})
    session = Session(SimpleNamespace(startup_s=0.0))
    forget_tasks()  # as in a fresh worker, whatever tests ran before in this process
    session.load(load)
    fresh = _state(session)
    change(session)
    assert not _same(_state(session), fresh)
    session.load(load)
    assert _same(_state(session), fresh)


MEMO_TASK = textwrap.dedent(
    """
    import torch

    calls = 0
    features = 8
    view = 0

    class Model(torch.nn.Module):
        def __init__(self, features):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(features))

        def forward(self, x):
            global calls
            calls += 1
            # With view set, the output is the parameter itself, which the perturbation changes.
            return self.w.view(-1) if view else x * self.w

    def get_inputs():
        return [torch.rand(4, features)]

    def get_init_inputs():
        return [features]
    """
)


def _memo_session(tmp_path):
    task = tmp_path / "task.py"
    task.write_text(MEMO_TASK)
    forget_tasks()
    return Session(SimpleNamespace(startup_s=0.0)), str(task)


def _check(session, tmp_path, seed):
    """A check of the trial with input seed ``seed``, the candidate handing over the task's own
    outputs on those inputs (computed here with the reference's parameters); whether they were
    found correct, and the calls of the reference's forward the check took."""
    reference = session.reference
    inputs = make_inputs(reference.task, seed, "cpu", "fp32")
    w = reference.model.w.detach().clone()
    out = w if reference.task.view else inputs[0] * w
    path = tmp_path / f"cand{seed}.pt"
    torch.save({"outputs": out, "inputs": None}, path)
    before = reference.task.calls
    checked = session.check(CheckOutputs(seed=seed, forward_seed=1, candidate_out=str(path)))
    return checked["correct"], reference.task.calls - before


def _load(session, task, memo, **changes):
    fields = dict(task=task, device="cpu", precision="fp32", atol=1e-4, rtol=1e-4, set={}, memo=memo)
    session.load(Load(**{**fields, **changes}))


def test_a_kept_reference_with_memo_computes_each_trials_outputs_once(tmp_path):
    session, task = _memo_session(tmp_path)
    _load(session, task, memo=True)
    assert _check(session, tmp_path, 5) == (True, 1)
    assert _check(session, tmp_path, 6) == (True, 1)
    _load(session, task, memo=True)
    assert _check(session, tmp_path, 5) == (True, 0)
    assert _check(session, tmp_path, 6) == (True, 0)
    # Perturbed parameters are other outputs: computed, then kept under their own key.
    session.perturb(Perturb(seed=3))
    assert _check(session, tmp_path, 5) == (True, 1)
    _load(session, task, memo=True)
    session.perturb(Perturb(seed=3))
    assert _check(session, tmp_path, 5) == (True, 0)


@pytest.mark.parametrize(
    "changes",
    [{"memo": False}, {"set": {"features": 16}}, {"precision": "bf16"}],
    ids=["without_memo", "another_size", "another_precision"],
)
def test_a_load_of_anything_else_forgets_the_kept_outputs(tmp_path, changes):
    session, task = _memo_session(tmp_path)
    _load(session, task, memo=True)
    _check(session, tmp_path, 5)
    _load(session, task, **{"memo": True, **changes})
    _load(session, task, memo=True)
    assert _check(session, tmp_path, 5) == (True, 1)


def test_the_memo_keeps_a_copy_not_a_view_the_perturbation_changes(tmp_path):
    session, task = _memo_session(tmp_path)
    _load(session, task, memo=True, set={"view": 1})
    assert _check(session, tmp_path, 5) == (True, 1)
    session.perturb(Perturb(seed=3))
    _load(session, task, memo=True, set={"view": 1})
    assert _check(session, tmp_path, 5) == (True, 0)


def test_a_timed_calls_check_keeps_nothing(tmp_path):
    """A timed call's seeds are drawn for its block: no other candidate is sent them."""
    session, task = _memo_session(tmp_path)
    _load(session, task, memo=True)
    reference = session.reference
    timed = CheckKept(slot=0, seed=5, forward_seed=1, kept=None)
    trial = CheckOutputs(seed=5, forward_seed=1, candidate_out="")
    assert reference.memo_key("forward", timed) is None
    assert reference.memo_key("forward", trial) is not None
    runs = []
    for _ in range(2):
        reference.memo.get(reference.memo_key("forward", timed), lambda: runs.append(1))
    assert len(runs) == 2 and not reference.memo.kept
