"""A kept reference worker loads the task again for the next candidate (kbench `pipeline::reuse`):
whatever the last evaluation changed, the new reference is the one a fresh worker would build."""

import textwrap
from types import SimpleNamespace

import pytest
import torch

from kbench_worker import harness
from kbench_worker.messages import Load, Perturb
from kbench_worker.reference import Session

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
    harness.forward(reference.model, harness.make_inputs(reference.task, 5, "cpu", "fp32"), 0)


def _shape_variant(session):
    harness._shaped(session.reference.task, {"batch_size": 5})


def _state(session):
    """The model's parameters and buffers, the task module's own state, the shape variants held."""
    reference = session.reference
    tensors = {k: v.clone() for k, v in reference.model.state_dict().items()}
    return tensors, reference.task.calls, len(harness._SHAPED)


def _same(a, b):
    return a[1:] == b[1:] and a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])


@pytest.mark.parametrize("change", [_perturb, _forward, _shape_variant], ids=["perturbed", "forward", "shape_variant"])
def test_a_second_load_rebuilds_what_the_last_evaluation_changed(tmp_path, change):
    task = tmp_path / "task.py"
    task.write_text(TASK)
    load = Load(task=str(task), device="cpu", precision="fp32", atol=1e-2, rtol=1e-2, set={})
    session = Session(SimpleNamespace(startup_s=0.0))
    harness.forget_tasks()  # as in a fresh worker, whatever tests ran before in this process
    session.load(load)
    fresh = _state(session)
    change(session)
    assert not _same(_state(session), fresh)
    session.load(load)
    assert _same(_state(session), fresh)
