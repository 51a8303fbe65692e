"""The timing requests of either worker (`time_setup`, `time`), dispatched by the session's mode:
kbench's own (`offline.TimedModel`), upstream KernelBench's (`upstream.KernelBenchModel`) or the
server scenario (`server.ServerModel`).
"""

import os

from .offline import TimedModel
from .server import ServerModel
from .upstream import KernelBenchModel


def _or(value, default):
    """A field kbench may leave out of a `time` request, else its default."""
    return default if value is None else value


def handle(worker, req, shared=False):
    """The timing commands, for either worker (`worker` has model, task, device, precision and a
    `timed` slot): `time_setup` (build and warm up, in the request's mode), `time` (a block of
    samples, or of server requests after the gaps it names). At set-up the calling thread, which
    submits every timed call, moves to the CPU kbench set aside for this GPU's timing, the same
    for both workers (cpus.rs). A worker with a ``beside`` arm times beside it (`TimedModel`);
    ``shared``: the arm's kept outputs are for the reference worker to read (the candidate's)."""
    if req.cmd == "time_setup":
        worker.timed = None
        if req.cpu is not None:
            os.sched_setaffinity(0, {req.cpu})
        if req.mode == "kernelbench":
            worker.timed = KernelBenchModel(worker.model, worker.task, req.seed, worker.device, worker.precision)
            return {}
        if req.mode == "server":
            worker.timed = ServerModel(worker.model, worker.task, req.seed, worker.device, worker.precision)
            return worker.timed.warm
        beside = getattr(worker, "beside", None)
        worker.timed = TimedModel(worker.model, worker.task, req.seed, worker.device, worker.precision, req.kept, beside, shared)
        return worker.timed.warmup(req.cycles_per_us)
    if isinstance(worker.timed, KernelBenchModel):
        return worker.timed.samples(req.n)
    if isinstance(worker.timed, ServerModel):
        return worker.timed.requests(req.gaps_ms)
    return worker.timed.samples(req.n, _or(req.blocker_cycles, 0), _or(req.audits, 0), _or(req.burst, 1), req.seed, _or(req.keep, 0))
