"""Candidate worker (untrusted): imports one submission and runs ModelNew on the inputs of a trial.

It never sees the reference's outputs: it writes its own outputs to the file kbench names, and
the reference worker compares. Inputs come from the pristine task module with the trial's seed,
never from the submission's own get_inputs, so a submission cannot shrink its problem.
"""

import os
import traceback

import torch

from . import harness, integrity, kernels, taskfile, transfer
from .compile import build_message, is_build_failure
from .protocol import error
from .timing import TimedModel


class Candidate:
    def __init__(self, req):
        self.device = req["device"]
        self.precision = req["precision"]
        # This submission's build cache (TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR): the worker was
        # started before kbench knew which submission it would run.
        os.environ.update(req.get("env", {}))
        overrides = taskfile.overrides(req["task"], req.get("scale"), req.get("set"))
        self.task = taskfile.load(req["task"], overrides)
        kernels.watch_extensions()
        kernels.build_report("before import")
        self.snapshot = integrity.Snapshot()
        self.module = taskfile.load(req["submission"], overrides, strict=False)
        kernels.build_report("after import")
        self.kernels = kernels.found(self.module)
        cls = getattr(self.module, "ModelNew", None)
        if cls is None:
            raise LookupError("the submission defines no ModelNew")
        self.init = harness.init_inputs(self.task)
        self.model = harness.build(cls, self.init, self.device, self.precision)
        self.timed = None
        self.shared = None

    def trial(self, req):
        """Run one call and hand its outputs and its (possibly modified) inputs to kbench."""
        self.shared = None
        harness.release_memory(self.device)
        inputs = harness.make_inputs(self.task, req["seed"], self.device, self.precision)
        out = harness.forward(self.model, inputs, req["forward_seed"])
        harness.synchronize(self.device)
        aliased = integrity.aliased_outputs(out, inputs, self.model)
        if aliased:
            raise TamperError(f"outputs.alias: {'; '.join(aliased[:4])}")
        tensors = tuple(x for x in inputs if isinstance(x, torch.Tensor))
        reply = {"outputs": harness.describe(out)}
        if req.get("transport") == "ipc":
            try:
                reply["ipc"] = {"outputs": transfer.export_cuda(out), "inputs": transfer.export_cuda(tensors)}
                self.shared = (out, inputs)  # alive until the reference worker has read them
                return reply
            except TypeError:
                pass  # not plain CUDA tensors: the file path below checks and reports them
        torch.save({"outputs": harness.to_host(out), "inputs": harness.to_host(tensors)}, req["out"])
        return reply

    def time(self, req):
        if self.timed is None:
            self.shared = None
            self.timed = TimedModel(
                self.model, self.task, req["seed"], self.device, self.precision, req.get("mode", "offline")
            )
        return {"samples_ms": self.timed.samples(req["n"])}


class TamperError(RuntimeError):
    """A runtime check caught the submission cheating; the message names the check."""


def verify(candidate):
    changed = candidate.snapshot.changed() if candidate is not None else []
    if changed:
        raise TamperError(f"integrity.monkeypatch_snapshot: the submission rebound {', '.join(changed[:8])}")


def load_error(exc):
    if isinstance(exc, SyntaxError):
        return error("syntax", f"syntax error: {exc.msg} (line {exc.lineno})", exc)
    if isinstance(exc, LookupError) and "ModelNew" in str(exc):
        return error("no_model_new", str(exc))
    if is_build_failure(exc):
        return error("build", build_message(exc), exc)
    return harness.classify(exc, "load")


def run(channel):
    candidate = None
    for req in channel.requests():
        cmd = req["cmd"]
        try:
            if cmd == "load":
                candidate = Candidate(req)
                harness.release_memory(candidate.device)
                verify(candidate)
                channel.reply({"ok": True, "kernels": candidate.kernels, "startup_s": channel.startup_s})
            elif cmd == "trial":
                reply = candidate.trial(req)
                verify(candidate)
                channel.reply({"ok": True, **reply})
            elif cmd == "perturb":
                channel.reply({"ok": True, "shapes": harness.perturb(candidate.model, req["seed"])})
            elif cmd == "time":
                reply = candidate.time(req)
                verify(candidate)
                channel.reply({"ok": True, **reply})
            elif cmd == "exit":
                return
            else:
                channel.reply({"ok": False, "error": error("protocol", f"unknown command {cmd}")})
        except BaseException as exc:  # noqa: BLE001 - any failure of submission code is a result
            traceback.print_exc()
            if isinstance(exc, TamperError):
                record = error("cheat", str(exc))
            else:
                record = load_error(exc) if cmd == "load" else harness.classify(exc, "forward")
            channel.reply({"ok": False, "error": record})
            if record["fatal"]:
                return
