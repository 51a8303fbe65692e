"""The inputs of a trial, made alike in both workers: the task loaded (and loaded again with more
constants for a shape variant), the seeded draw, the input variants.

Inputs are made directly on the target device from a per-trial seed, so both workers hold
identical inputs without copying them (and without a multi-GB detour through host memory).
"""

import json

import torch

from . import models, taskfile

# Where each loaded task came from, so a shape variant can load it again with more constants.
_SOURCES = {}
# Task modules re-loaded for a shape variant, by (task module name, constants).
_SHAPED = {}


def load_task(path, overrides):
    """Load a task file as both workers do, remembering how, for shape variants."""
    task = taskfile.load(path, overrides)
    _SOURCES[task.__name__] = (path, overrides)
    return task


def forget_tasks():
    """Forget every task loaded so far and its shape variants: the next load starts as in a fresh
    worker (a kept reference worker's next candidate, kbench `pipeline::reuse`)."""
    _SOURCES.clear()
    _SHAPED.clear()


def _shaped(task, values):
    """The task re-loaded with more constants (`inputs.shape_perturbation`), once per set."""
    key = (task.__name__, json.dumps(values, sort_keys=True))
    if key not in _SHAPED:
        path, overrides = _SOURCES[task.__name__]
        name = f"{task.__name__}_shape{len(_SHAPED)}"
        _SHAPED[key] = taskfile.load(path, {**overrides, **values}, module_name=name)
    return _SHAPED[key]


def _transform(x, variant):
    """`inputs.distribution_perturbation` on one floating input: signed inputs make in-place
    fixes and identity shortcuts (ReLU on [0, 1)) visible; scaled inputs move outputs to O(1).
    `inputs.mean_shift`: the input offset by ``spreads`` times its standard deviation, so a
    variance taken as E[x^2] - E[x]^2 in fp32 cancels catastrophically (zero-mean inputs hide it).
    Exact zeros stay zero: they are the input's structure (a triangular matrix), which a kernel may
    rely on as the task defines it; random values are never exactly zero."""
    if variant["kind"] == "signed":
        y = x * 2 - 1 if x.numel() and x.min() >= 0 else x
    elif variant["kind"] == "scaled":
        y = x * variant["factor"]
    elif variant["kind"] == "shifted":
        y = x + variant["spreads"] * x.std() if x.numel() > 1 else x
    else:
        raise ValueError(f"unknown input variant {variant['kind']!r}")
    zeros = x == 0
    return y.masked_fill_(zeros, 0) if y is not x and zeros.any() else y


def make_inputs(task, seed, device, precision, variant=None):
    """The inputs of one trial, identical in both workers for the same seed and variant."""
    if variant is not None and variant["kind"] == "shape":
        task, variant = _shaped(task, variant["set"]), None
    models.seed_generators(seed)
    with torch.device(device):
        inputs = task.get_inputs()
    if variant is not None:
        inputs = [_transform(x, variant) if _floating(x) else x for x in inputs]
    dtype = models.DTYPES[precision]
    # Integer and boolean inputs keep their dtype (upstream casts labels to float and breaks L1/95).
    return [x.to(dtype) if _floating(x) else x for x in inputs]


def _floating(x):
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def input_shapes(inputs):
    """Each input's shape (None for a non-tensor argument), to show what a trial ran."""
    return [list(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs]
