"""Reference worker (trusted): task code and harness only, never a submission.

Builds the task's Model, makes the same inputs as the candidate from the trial's seed, receives
the candidate's outputs and post-call inputs (CUDA IPC views of its memory, or a tensors-only
file read with ``weights_only``), checks the inputs against its own pristine copy, runs the
reference and compares, here, where no submission code has run.
"""

import math
import traceback

import torch

from . import harness, taskfile, transfer
from .protocol import error
from .timing import TimedModel


# Elements per comparison step: bounds the temporaries of a comparison on multi-GB outputs.
CHUNK = 1 << 26


def _chunks(r, c):
    """Matching flat pieces of two same-shape tensors (whole tensors when not contiguous)."""
    if r.is_contiguous() and c.is_contiguous():
        return zip(r.view(-1).split(CHUNK), c.view(-1).split(CHUNK))
    return [(r, c)]


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
        exact = not (r.is_floating_point() or r.is_complex())
        mismatch = False
        for rp, cp in _chunks(r, c):
            if exact:
                mismatch |= not torch.equal(rp, cp)
                continue
            if torch.isnan(rp).any():
                return {"correct": False, "uncheckable": True, "reason": f"the reference output {i} holds NaN at these inputs"}
            if torch.isnan(cp).any():
                return {"correct": False, "reason": f"output {i} holds NaN"}
            diff = (cp.double() - rp.double()).abs()
            if diff.numel():
                worst_abs = max(worst_abs, diff.max().item())
                worst_rel = max(worst_rel, (diff / rp.double().abs().clamp_min(1e-30)).max().item())
            mismatch |= not torch.allclose(cp, rp, atol=atol, rtol=rtol)
            del diff
        if mismatch and exact:
            return {"correct": False, "reason": f"output {i} differs (exact comparison, dtype {r.dtype})"}
        if mismatch:
            return {
                "correct": False,
                "reason": f"output {i} differs: max abs diff {worst_abs:.3g} (atol {atol}, rtol {rtol})",
                "max_abs_diff": worst_abs,
                "max_rel_diff": worst_rel,
            }
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 - JSON has no inf
    return {"correct": True, "reason": "", "max_abs_diff": finite(worst_abs), "max_rel_diff": finite(worst_rel)}


def modified_inputs(pristine, returned):
    """Indices of tensor inputs that the candidate's call changed (exact, bit for bit)."""
    tensors = [x for x in pristine if isinstance(x, torch.Tensor)]
    if len(returned) != len(tensors):
        return list(range(len(tensors)))
    changed = []
    for i, (a, b) in enumerate(zip(tensors, returned)):
        if type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
            changed.append(i)
            continue
        b = b.to(a.device)
        if not all(torch.equal(x, y) for x, y in _chunks(a, b)):
            changed.append(i)
    return changed


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
        self.timed = None

    def receive(self, req):
        """The candidate's outputs and post-call inputs: IPC views of its memory, or a file."""
        if req.get("ipc") is not None:
            try:
                return transfer.import_cuda(req["ipc"]["outputs"]), transfer.import_cuda(req["ipc"]["inputs"])
            except Exception as exc:  # noqa: BLE001 - kbench retries the trial through a file
                raise TransferError(f"CUDA IPC import failed: {type(exc).__name__}: {exc}") from exc
        try:
            sent = torch.load(req["candidate_out"], map_location="cpu", weights_only=True)
            return sent["outputs"], sent["inputs"]
        except Exception as exc:  # noqa: BLE001 - the candidate wrote this file
            raise harness.OutputTypeError(f"the candidate's outputs could not be read: {exc}") from exc

    def check(self, req):
        harness.release_memory(self.device)
        inputs = harness.make_inputs(self.task, req["seed"], self.device, self.precision)
        cand, cand_inputs = self.receive(req)
        # Inputs first, while the reference's own are pristine (its forward may work in place).
        changed = modified_inputs(inputs, cand_inputs)
        del cand_inputs
        ref = harness.forward(self.model, inputs, req["forward_seed"])
        del inputs
        result = compare(ref, cand, self.atol, self.rtol)
        if result["correct"] and changed:
            result.update(correct=False, reason=f"forward modified its input(s) {changed}")
        return result

    def time(self, req):
        if self.timed is None:
            self.timed = TimedModel(
                self.model, self.task, req["seed"], self.device, self.precision, req.get("mode", "offline")
            )
        return {"samples_ms": self.timed.samples(req["n"])}


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
            elif cmd == "perturb":
                channel.reply({"ok": True, "shapes": harness.perturb(reference.model, req["seed"])})
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
