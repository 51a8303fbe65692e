"""Reference worker (trusted): task code and kbench's own only, never a submission.

Builds the task's Model, makes the same inputs as the candidate from the trial's seed, receives
the candidate's outputs and post-call inputs (CUDA IPC views of its memory, or a tensors-only
file read with ``weights_only``), checks the inputs against its own pristine copy, runs the
reference and compares (`checks.correctness`, and `checks.float64` where float64 judges), here,
where no submission code has run.
"""

import copy
import functools
import gc
import json

import torch

from ..checks import correctness, float64, kernelbench, profile, runtime
from ..checks.log import Log
from ..task import models, params, taskfile
from ..task.inputs import forget_tasks, load_task, make_inputs
from ..timing import arms, kept, modes
from ..wire import errors, transfer
from ..wire.messages import Checked, CheckKept, CheckName, CheckOutputs, Empty, Load, Loaded, Perturb, Perturbed, Profile, Profiled, ProfilerCall, Time, Timed, TimeSetup, Warmed
from ..wire.protocol import error, serve
from . import memo


class TransferError(RuntimeError):
    """The candidate's outputs could not be received by IPC (not a verdict on the kernel)."""


class Reference:
    def __init__(self, req, kept_outputs=None):
        self.device = req.device
        self.precision = req.precision
        self.atol = req.atol
        self.rtol = req.rtol
        runtime.strict_fp32()
        self.task = load_task(req.task, taskfile.overrides(req.task, req.scale, req.set))
        # `precision.fp32_accumulation`: the task declares how its outputs are judged.
        self.accumulation = getattr(self.task, "KBENCH_JUDGE", None) == "fp32_accumulation"
        self.model = models.build(self.task.Model, models.init_inputs(self.task), self.device, self.precision)
        # BatchNorm's running statistics as built, before training-mode calls move them: what a
        # kernel that normalises with running statistics reads (`explain_batchnorm`).
        self.running = {
            name: buffer.clone()
            for module_name, m in self.model.named_modules()
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training
            for name, buffer in m.named_buffers(prefix=module_name)
        }
        self.timed = None
        self.compiled = None
        # The reference's outputs kept across the task's candidates (`memo`), and the parameters
        # they were computed with: the seeds of the perturbations so far (`Session.perturb`).
        self.memo = kept_outputs if kept_outputs is not None else memo.Memo()
        self.params = ()
        # The parameters' values before the perturbation, while it holds (`Session.perturb`).
        self.kept = []

    def memo_key(self, what, req):
        """A trial's key in the memo: what was run, on which parameters and inputs. None for a
        timed call's check (`CheckKept`), whose seeds are drawn for each timed block: no other
        candidate is sent them."""
        if not isinstance(req, CheckOutputs):
            return None
        return (what, self.params, req.seed, req.forward_seed, memo.variant_key(req.variant))

    def profiled(self, req):
        """One profiled call (after timing: profiling leaves state in the process): its kernels'
        launches, which kbench compares with the candidate's (`profile.reference_ops`), and the
        time the GPU was busy, for the host-speed allowance of a forward that synchronizes with
        the host inside."""
        inputs = make_inputs(self.task, req.seed, self.device, self.precision)
        per_kernel, busy_ms = profile.kernel_times(lambda: models.forward(self.model, inputs, req.forward_seed))
        return profile.summarize(per_kernel, set(), busy_ms)

    def receive(self, req):
        """The candidate's outputs and post-call inputs: IPC views of its memory, or a file."""
        if req.ipc is not None:
            try:
                return transfer.import_cuda(req.ipc["outputs"]), transfer.import_cuda(req.ipc["inputs"])
            except Exception as exc:  # noqa: BLE001 - kbench retries the trial through a file
                raise TransferError(f"CUDA IPC import failed: {type(exc).__name__}: {exc}") from exc
        try:
            sent = torch.load(req.candidate_out, map_location="cpu", weights_only=True)
            return sent["outputs"], sent["inputs"]
        except Exception as exc:  # noqa: BLE001 - the candidate wrote this file
            raise errors.OutputTypeError(f"the candidate's outputs could not be read: {exc}") from exc

    def check(self, req):
        models.release_memory(self.device)
        log = Log()
        inputs = make_inputs(self.task, req.seed, self.device, self.precision, req.variant)
        cand, cand_inputs = self.receive(req)
        # Inputs first, while the reference's own are pristine (its forward may work in place).
        changed = correctness.handed_over(correctness.inputs_integrity, inputs, cand_inputs, log) if cand_inputs is not None else []
        del cand_inputs
        ref = self.memo.get(self.memo_key("forward", req), functools.partial(models.forward, self.model, inputs, req.forward_seed))
        del inputs
        result = correctness.handed_over(correctness.compare, ref, cand, self.atol, self.rtol, log)
        fp32 = self.precision == "fp32" and not changed
        if (req.variant or {}).get("kind") in ("signed", "scaled", "shifted") and "max_abs_diff" in result and fp32:
            float64.judge_shift(self, req, ref, cand, result, log)
        elif "output" in result and fp32:
            result = float64.judge_miss(self, req, ref, cand, result, log)
        if self.accumulation and "max_abs_diff" in result and not changed:
            float64.judge_accumulation(self, req, cand, result, log)
        if "output" in result and not result["correct"]:
            self.explain_batchnorm(req, cand, result)
        elif result["correct"] and req.deep and fp32:
            float64.fp64_error_ratio(self, req, ref, cand, result, log)
        if req.kernelbench_tolerance is not None:
            result["kernelbench_correct"] = correctness.handed_over(kernelbench.correct, ref, cand, req.kernelbench_tolerance)
            result["kernelbench_needed"] = correctness.handed_over(kernelbench.needed, ref, cand)
        if result["correct"] and changed:
            # Right values, written into the caller's inputs: a breach of the module contract.
            result["contract"] = f"{CheckName.INPUTS_INTEGRITY}: forward modified its input(s) {changed}"
        del ref, cand
        # Give the cache back now: the candidate's next call needs the room (a 16 GB task ran
        # out of memory while this worker still cached its last outputs and inputs).
        models.release_memory(self.device)
        return {**result, "checks": log.entries()}

    def check_kept(self, req):
        """`timing.timed_output_check`: the output of one timed call, read from the candidate's
        pool (`kept.read`) while the candidate waits for its next request, against the
        reference's on the inputs kbench derived for that call. A pool that cannot be read is
        the candidate's (it described it)."""
        models.release_memory(self.device)
        log = Log()
        inputs = make_inputs(self.task, req.seed, self.device, self.precision)
        cand = kept.read(req.kept, req.slot)
        ref = models.forward(self.model, inputs, req.forward_seed)
        del inputs
        result = correctness.handed_over(correctness.compare, ref, cand, self.atol, self.rtol, log)
        if "output" in result and self.precision == "fp32":
            # A miss is judged against float64 as the trials' are (`precision.fp64_judged`): a
            # timed call's output is no cheat for summing in another order.
            result = float64.judge_miss(self, req, ref, cand, result, log)
        del ref
        if self.accumulation and "max_abs_diff" in result:
            # Judged as the trials are: float64 decides (`precision.fp32_accumulation`).
            float64.judge_accumulation(self, req, cand, result, log)
        del cand
        models.release_memory(self.device)
        return {**result, "checks": log.entries()}

    def explain_batchnorm(self, req, cand, result):
        """A wrong output's cause when the task's reference normalises with BatchNorm in training
        mode (batch statistics, as KernelBench's models run) and the candidate's output is the
        same model's in eval mode with the running statistics it was built with: the reason says
        so first. Costs a copy of the model and one call, on a wrong output only."""
        if not self.running:
            return
        model = copy.deepcopy(self.model).eval()
        model.load_state_dict(self.running, strict=False)
        inputs = make_inputs(self.task, req.seed, self.device, self.precision, req.variant)
        evaluated = models.forward(model, inputs, req.forward_seed)
        if correctness.handed_over(correctness.compare, evaluated, cand, self.atol, self.rtol, Log())["correct"]:
            cause = "BatchNorm: the output is the task's model with running statistics (eval mode); the task's reference normalises with each batch's statistics (training mode)"
            result["reason"] = f"{cause}; {result['reason']}"
        del model, evaluated, inputs
        models.release_memory(self.device)


class Session:
    """The reference worker's requests; ``load`` makes the task's reference."""

    def __init__(self, channel):
        self.channel = channel
        self.reference = None
        self.memo = memo.Memo()

    def load(self, req: Load) -> Loaded:
        """The task's reference, built as in a fresh worker. kbench keeps a clean reference worker
        for the task's next candidate (`pipeline::reuse`) and sends ``load`` again: what the last
        candidate's evaluation left (the model with perturbed parameters and moved BatchNorm
        statistics, the timed arms and their pools, the shape variants' modules) goes first, and
        its GPU memory with it."""
        if self.reference is not None:
            device = self.reference.device
            self.reference = None
            forget_tasks()
            gc.collect()
            models.release_memory(device)
        self.memo.start((req.task, req.scale, json.dumps(req.set, sort_keys=True), req.device, req.precision) if req.memo else None)
        self.reference = Reference(req, self.memo)
        # The task's integer constants, as loaded: kbench picks a shape perturbation from them.
        constants = {k: v for k, v in vars(self.reference.task).items() if type(v) is int and not k.startswith("_")}
        return {"startup_s": self.channel.startup_s, "constants": constants}

    def check(self, req: CheckOutputs) -> Checked:
        return self.reference.check(req)

    def check_kept(self, req: CheckKept) -> Checked:
        return self.reference.check_kept(req)

    def perturb(self, req: Perturb) -> Perturbed:
        """New parameter values; on a GPU the reply names the parameters as built first
        (`params.built`), for the candidate worker to match its own with. On the CPU it does
        not: digesting there costs more than the candidate's building the task's model again.
        Nor where the digests' working memory does not fit beside the task's. ``restore`` puts
        back the values the perturbation replaced, and the memo's key with them."""
        model = self.reference.model
        if req.restore:
            params.restore(self.reference.kept)
            self.reference.kept = []
            self.reference.params = tuple(s for s in self.reference.params if s != req.seed)
            return {}
        self.reference.kept = params.kept_values([p for _, p in params.floating(model)])
        built = None
        if self.reference.device.startswith("cuda"):
            try:
                built = params.built(model)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
        shapes = params.perturb(model, req.seed)
        self.reference.params += (req.seed,)
        return {"shapes": shapes, "built": built}

    def time(self, req: TimeSetup | Time) -> Warmed | Timed:
        """Arm A (eager) by default; ``arm: compile`` times torch.compile of the same model."""
        if req.arm != "compile":
            return modes.handle(self.reference, req)
        if req.cmd == "time_setup":
            self.reference.compiled = arms.Compiled(self.reference, req.seed)
        reply = modes.handle(self.reference.compiled, req)
        return {**reply, "compile_s": self.reference.compiled.compile_s}

    def profile(self, req: Profile) -> Profiled:
        return {"profile": self.reference.profiled(req)}

    def profiler_call(self, req: ProfilerCall) -> Empty:
        """`--profile ncu`: one forward of the reference watched by the profiler outside."""
        r = self.reference
        inputs = make_inputs(r.task, req.seed, r.device, r.precision)
        profile.bracketed(lambda: models.forward(r.model, inputs, req.forward_seed))
        return {}


def commands(channel):
    """The reference worker's table: command -> handler."""
    session = Session(channel)
    return {
        "load": session.load,
        "check": session.check,
        "check_kept": session.check_kept,
        "perturb": session.perturb,
        "time_setup": session.time,
        "time": session.time,
        "profile": session.profile,
        "profiler_call": session.profiler_call,
    }


def failure(cmd, exc):
    """A transfer that failed (kbench may retry through a file), or the reference's own error."""
    if isinstance(exc, TransferError):
        return error("transfer", str(exc), exc)
    return errors.classify(exc, f"reference {cmd}", kind="reference")


def run(channel):
    serve(channel, commands(channel), failure)
