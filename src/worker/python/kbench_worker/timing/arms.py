"""The arms a worker times beside its own model: torch.compile of the reference's model
(`--baseline eager,compile`) in the reference worker, and the task's reference in the candidate's
process (the process check's control arm).
"""

import time

import torch

from ..task import models, params
from ..task.inputs import make_inputs
from .offline import TimedModel


class Compiled:
    """Arm B (`--baseline eager,compile`): torch.compile of the reference's model (the same
    module and parameters, perturbed ones included), inductor in its default mode after a
    dynamo reset, as KernelBench's baselines compile. Its first call compiles, outside the
    clock; then it is timed like any arm, with its own input sets."""

    def __init__(self, reference, seed):
        self.task, self.device, self.precision = reference.task, reference.device, reference.precision
        self.timed = None
        torch._dynamo.reset()
        self.model = torch.compile(reference.model, backend="inductor", mode="default")
        started = time.perf_counter()
        inputs = make_inputs(self.task, seed, self.device, self.precision)
        models.forward(self.model, inputs, 0)
        models.synchronize(self.device)
        self.compile_s = time.perf_counter() - started


class Control:
    """The control arm of the process check (`timing.process`): the task's reference model,
    built as the reference worker builds it (same initialisation, same parameter perturbation),
    timed in the candidate's process beside the candidate's arm, on its input sets. Against the
    reference worker's own times it shows how differently this process runs the same kernels
    (cuDNN and cuBLAS choose algorithms per process) and how fast they run where the
    candidate's inputs and outputs lie (level1/33's BatchNorm kernel runs up to 8 % slower on
    an H100 for some placements of its 4 GiB input and output, fixed for an arm that holds
    one input set). The submission can slow it down, which only widens its own interval."""

    def __init__(self, candidate):
        self.task, self.device, self.precision = candidate.task, candidate.device, candidate.precision
        self.timed = None
        self.beside = candidate.timed if isinstance(candidate.timed, TimedModel) else None
        self.model = models.build(self.task.Model, candidate.init, self.device, self.precision)
        if candidate.perturbed is not None:
            params.perturb(self.model, candidate.perturbed)
