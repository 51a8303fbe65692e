"""The perturbed inputs of `inputs.distribution_perturbation` and `inputs.mean_shift`
(_transform): each moves the values it is meant to move and keeps an input's exact zeros,
the structure a task may define (level1/14's triangular matrices)."""

import pytest
import torch

from kbench_worker.task.inputs import _transform

VARIANTS = [
    {"kind": "signed"},
    {"kind": "scaled", "factor": 8.0},
    {"kind": "shifted", "spreads": 100.0},
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["kind"])
def test_a_triangular_input_stays_triangular(variant):
    x = torch.triu(torch.rand(16, 16, generator=torch.Generator().manual_seed(0)))
    y = _transform(x, variant)
    assert torch.equal(torch.tril(y, -1), torch.zeros(16, 16))
    upper = torch.triu(torch.ones(16, 16, dtype=torch.bool))
    assert not torch.equal(y[upper], x[upper])


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ({"kind": "signed"}, lambda x: x * 2 - 1),
        ({"kind": "scaled", "factor": 8.0}, lambda x: x * 8),
        ({"kind": "shifted", "spreads": 100.0}, lambda x: x + 100 * x.std()),
    ],
    ids=["signed", "scaled", "shifted"],
)
def test_an_input_without_zeros_moves_everywhere(variant, expected):
    x = torch.rand(64, generator=torch.Generator().manual_seed(1)) + 0.01
    y = _transform(x, variant)
    assert torch.equal(y, expected(x))


def test_signed_leaves_an_input_with_negatives_alone():
    x = torch.randn(64, generator=torch.Generator().manual_seed(2))
    assert _transform(x, {"kind": "signed"}) is x
