"""Reference worker (trusted): task code and harness only, never a submission.

Builds the task's Model, makes the same inputs as the candidate from the trial's seed, runs the
reference, loads the candidate's outputs from the file the candidate wrote (tensors only:
``weights_only``) and compares them here, where no submission code has run.
"""

import math
import traceback

import torch

from . import harness, taskfile, transfer
from .protocol import error
from .timing import Timer


def compare(ref, cand, atol, rtol):
    """Verdict of one trial: {'correct', 'reason', 'max_abs_diff', 'max_rel_diff'}."""
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    cands = list(cand) if isinstance(cand, (tuple, list)) else [cand]
    if len(refs) != len(cands):
        return {"correct": False, "reason": f"{len(cands)} outputs, expected {len(refs)}"}
    worst_abs = worst_rel = 0.0
    for i, (r, c) in enumerate(zip(refs, cands)):
        if type(c) is not torch.Tensor:
            return {"correct": False, "reason": f"output {i} is a {type(c).__name__}, not a torch.Tensor"}
        if tuple(c.shape) != tuple(r.shape):
            return {"correct": False, "reason": f"output {i} has shape {list(c.shape)}, expected {list(r.shape)}"}
        if c.dtype != r.dtype:
            return {"correct": False, "reason": f"output {i} has dtype {c.dtype}, expected {r.dtype}"}
        c = c.to(r.device)
        if r.is_floating_point() or r.is_complex():
            if torch.isnan(r).any():
                return {"correct": False, "reason": f"the reference output {i} holds NaN: task not checkable at these inputs"}
            if torch.isnan(c).any():
                return {"correct": False, "reason": f"output {i} holds NaN"}
            diff = (c.double() - r.double()).abs()
            if diff.numel():
                worst_abs = max(worst_abs, diff.max().item())
                worst_rel = max(worst_rel, (diff / r.double().abs().clamp_min(1e-30)).max().item())
            if not torch.allclose(c, r, atol=atol, rtol=rtol):
                return {
                    "correct": False,
                    "reason": f"output {i} differs: max abs diff {worst_abs:.3g} (atol {atol}, rtol {rtol})",
                    "max_abs_diff": worst_abs,
                    "max_rel_diff": worst_rel,
                }
        elif not torch.equal(c, r):
            return {"correct": False, "reason": f"output {i} differs (exact comparison, dtype {r.dtype})"}
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 - JSON has no inf
    return {"correct": True, "reason": "", "max_abs_diff": finite(worst_abs), "max_rel_diff": finite(worst_rel)}


class TransferError(RuntimeError):
    """The candidate's outputs could not be received by IPC (not a verdict on the kernel)."""


class Reference:
    def __init__(self, req):
        self.device = req["device"]
        self.precision = req["precision"]
        self.atol = req["atol"]
        self.rtol = req["rtol"]
        self.task = taskfile.load(req["task"], taskfile.overrides(req["task"], req.get("scale"), req.get("set")))
        self.model = harness.build(self.task.Model, harness.init_inputs(self.task), self.device, self.precision)
        self.timer = None

    def check(self, req):
        inputs = harness.make_inputs(self.task, req["seed"], self.device, self.precision)
        ref = harness.forward(self.model, inputs, req["forward_seed"])
        del inputs
        if req.get("ipc") is not None:
            try:
                cand = transfer.import_cuda(req["ipc"])
            except Exception as exc:  # noqa: BLE001 - kbench retries the trial through a file
                raise TransferError(f"CUDA IPC import failed: {type(exc).__name__}: {exc}") from exc
        else:
            try:
                cand = torch.load(req["candidate_out"], map_location="cpu", weights_only=True)
            except Exception as exc:  # noqa: BLE001 - the candidate wrote this file
                raise harness.OutputTypeError(f"the candidate's outputs could not be read: {exc}") from exc
        return compare(ref, cand, self.atol, self.rtol)

    def time(self, req):
        if self.timer is None:
            self.timer = Timer(self.device)
            self.inputs = harness.make_inputs(self.task, req["seed"], self.device, self.precision)
            for _ in range(req.get("warmup", 3)):
                harness.forward(self.model, self.inputs, 0)
            harness.synchronize(self.device)
        with torch.no_grad():
            samples = self.timer.samples(lambda: self.model(*self.inputs), req["n"])
        return {"samples_ms": samples}


def run(channel):
    reference = None
    for req in channel.requests():
        cmd = req["cmd"]
        try:
            if cmd == "load":
                reference = Reference(req)
                channel.reply({"ok": True, "startup_s": channel.startup_s})
            elif cmd == "check":
                channel.reply({"ok": True, **reference.check(req)})
            elif cmd == "time":
                channel.reply({"ok": True, **reference.time(req)})
            elif cmd == "exit":
                return
            else:
                channel.reply({"ok": False, "error": error("protocol", f"unknown command {cmd}")})
        except BaseException as exc:  # noqa: BLE001 - reported to kbench, which decides
            traceback.print_exc()
            if isinstance(exc, TransferError):
                channel.reply({"ok": False, "error": error("transfer", str(exc), exc)})
                continue
            record = harness.classify(exc, f"reference {cmd}")
            channel.reply({"ok": False, "error": record})
            if record["fatal"]:
                return
