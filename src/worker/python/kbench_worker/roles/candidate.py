"""Candidate worker (untrusted): imports one submission and runs ModelNew on the inputs of a trial.

It never sees the reference's outputs: it writes its own outputs to the file kbench names, and
the reference worker compares. Inputs come from the pristine task module with the trial's seed,
never from the submission's own get_inputs, so a submission cannot shrink its problem.
"""

import os
from pathlib import Path

import torch

from ..checks import integrity, kernelbench, kernels, outputs, poison, profile, provenance, runtime, symbols
from ..checks.log import Log
from ..task import models, params, returns, taskfile
from ..task.inputs import input_shapes, load_task, make_inputs
from ..timing import arms, modes
from ..wire import cause, errors, transfer
from ..wire.errors import TamperError
from ..wire.messages import CheckName, Empty, Judged, KernelbenchTrial, Load, Loaded, Perturb, Perturbed, Profile, Profiled, ProfilerCall, Shipped, State, Stated, Time, Timed, TimeSetup, Trial, Warmed
from ..wire.protocol import error, serve


def _variant(req):
    """The input variant of a trial's request; the other requests whose calls the checks repeat
    (`state`, `profile`) have none."""
    return req.variant if isinstance(req, Trial) else None


class Candidate:
    def __init__(self, req):
        self.device = req.device
        self.precision = req.precision
        self.cuda = self.device.startswith("cuda")
        # determinism.rerun tells nondeterminism (within tolerance) from wrong results.
        self.atol, self.rtol = req.atol, req.rtol
        # This submission's build cache (TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR): the worker was
        # started before kbench knew which submission it would run.
        os.environ.update(req.env or {})
        overrides = taskfile.overrides(req.task, req.scale, req.set)
        self.task = load_task(req.task, overrides)
        # Baselines before the submission runs: threads of torch's own pools, true fp32, the L2 limit.
        runtime.strict_fp32()
        runtime.warm_thread_pools(self.device)
        self.threads = runtime.Threads()
        self.l2 = runtime.L2Limit() if self.cuda else None
        kernels.watch_extensions()
        kernels.build_report("before import")
        self.snapshot = integrity.Snapshot()
        kernels.phase = "import"
        self.module = taskfile.load(req.submission, overrides, strict=False)
        kernels.build_report("after import")
        self.defined = profile.defined_kernels(Path(req.submission).read_text())
        cls = getattr(self.module, "ModelNew", None)
        if cls is None:
            raise LookupError("the submission defines no ModelNew")
        self.init = models.init_inputs(self.task)
        kernels.phase = "__init__"
        self.model = models.build(cls, self.init, self.device, self.precision)
        kernels.phase = "forward"
        self.checks = Log()  # what the import and the constructor did
        self.checks.run(CheckName.PRECISION_TF32_FLAGS, runtime.tf32_flags)
        self.timed = None
        self.shared = None
        self.perturbed = None  # the seed of `params.perturbation`, while it holds
        self.kept = []  # ModelNew's parameters' values before it (`params.kept_values`)
        self.control = None

    def trial(self, req):
        """Run one call under the runtime checks (with ``deep``, the expensive ones too) and hand
        its outputs and its (possibly modified) inputs to kbench."""
        self.shared = None
        models.release_memory(self.device)
        log = Log()
        inputs = make_inputs(self.task, req.seed, self.device, self.precision, req.variant)
        reply = {"input_shapes": input_shapes(inputs)}
        out = self.call(inputs, req.forward_seed, poison.NAN, log)
        if req.deep:
            out = self.deep(req, out, log)
        models.release_memory(self.device)  # the poison: the reference worker needs the room
        reply.update(outputs=returns.describe(out), checks=log.entries())
        # A breach of the module contract is kbench's to judge once the outputs are compared.
        reply["contract"] = log.breach
        return {**reply, **self.hand_over(out, inputs, req)}

    def hand_over(self, out, inputs, req):
        """Outputs and the post-call inputs, for the reference worker: CUDA IPC views kept alive
        until it has read them, or a tensors-only file."""
        tensors = tuple(x for x in inputs if isinstance(x, torch.Tensor))
        if req.transport == "none":
            return {}  # nothing compares them (the sanitizer's trial: the tool watches the call)
        if req.transport == "ipc":
            try:
                # Copies in memory of this worker's own: a CUDA graph's private pool (torch.compile's
                # CUDA graph trees) shared by IPC breaks that pool ("invalid device pointer" in a
                # later call), and KernelBench, which shares nothing, never sees that.
                sent = _copies(out)
                ipc = {"outputs": transfer.export_cuda(sent), "inputs": transfer.export_cuda(tensors)}
                self.shared = (sent, inputs)
                return {"ipc": ipc}
            except (TypeError, torch.cuda.OutOfMemoryError):
                pass  # not plain CUDA tensors, or no room to copy: the file path below checks and sends them
        torch.save({"outputs": transfer.to_host(out), "inputs": transfer.to_host(tensors)}, req.out)
        return {}

    def call(self, inputs, seed, pattern, log):
        """One forward under the per-call runtime checks, in the order that keeps each one
        meaningful: poison before, the type before any attribute is read, the current stream
        (on the CPU, a copy of the outputs) before the device-wide synchronize, threads, the
        outputs settled and process state after it."""
        if self.cuda:
            log.run(CheckName.MEMORY_POISONED_ALLOCATOR, poison.poison, self.device, pattern)
        out = models.forward(self.model, inputs, seed)
        log.run(CheckName.OUTPUTS_EXACT_TYPE, outputs.exact_type, out)
        # On the CPU, the outputs as forward returned them, for `outputs.settled`.
        returned = None if self.cuda else outputs.snapshot(returns.tensors(out))
        if self.cuda:
            log.run(CheckName.TIMING_STREAM_JOIN, outputs.stream_join, returns.tensors(out))
        models.synchronize(self.device)
        log.run(CheckName.OUTPUTS_ALIAS, integrity.alias, out, inputs, self.model)
        log.run(CheckName.RUNTIME_THREAD_COUNT, self.threads.check)
        if returned is not None:
            log.run(CheckName.OUTPUTS_SETTLED, outputs.settled, returns.tensors(out), returned)
        if self.cuda:
            log.run(CheckName.RUNTIME_L2_PERSIST_LIMIT, self.l2.check)
        log.run(CheckName.PRECISION_TF32_FLAGS, runtime.tf32_flags)
        return out

    def deep(self, req, out, log):
        """The expensive checks (trial 0): another call on other inputs, a rerun on the same
        inputs. Each entry's time includes its extra call. Returns the outputs to hand over: the
        call's, or their copies where the next call made them unreadable (torch.compile's CUDA
        graphs: `outputs.independence` records the breach, and the values are still compared)."""
        first = returns.tensors(out)
        copies = outputs.snapshot(first)
        log.run(CheckName.OUTPUTS_INDEPENDENCE, _unless_oom, self.independence, req, first, copies, log)
        if copies is not None and outputs.overwritten(first):
            out, first = returns.rebuilt(out, copies), copies
        del copies  # unless they stand for the outputs now: the rerun's call needs the room
        log.run(CheckName.DETERMINISM_RERUN, _unless_oom, self.rerun, req, first, log)
        return out

    def perturb(self, seed, built=None):
        """`params.perturbation`: ModelNew's parameters get the values the reference worker's
        get. Paired here, where both lists can be seen. Where ModelNew's parameters are the
        task's as the reference worker built them (``built``, `params.own_parameters`), they are
        perturbed in place, as the reference's are. Else this worker builds the task's Model as
        the reference worker does (same initialisation), pairs ModelNew's parameters with it by
        what they are (`params.pair`), perturbs it with the same seed, and copies each
        parameter's new values into its partner (transposed and reshaped alike); the copy is
        then dropped. A parameter of ModelNew's without a partner (a constant the reference
        computes inline) is left as it is; one of the reference's without a partner is named for
        kbench to fail. The pairing runs in the untrusted worker, but the trial that follows is
        compared with the reference worker's own perturbed model: a false pairing only fails."""
        ours = dict(params.floating(self.model))
        self.kept = params.kept_values(ours.values())
        named = lambda name, p: f"{name} {list(p.shape)}"  # noqa: E731
        own = params.own_parameters(built, ours)
        if own is not None:
            shapes = params.perturb_tensors(own, seed)
            taken = {b["name"] for b in built}
            return {"shapes": shapes, "paired": [], "missing": [], "extra": [named(c, p) for c, p in ours.items() if c not in taken]}
        reference = models.build(self.task.Model, self.init, self.device, self.precision)
        pairs, missing, extra = params.pair(params.floating(reference), list(ours.items()))
        shapes = params.perturb(reference, seed)
        theirs = dict(params.floating(reference))
        paired = []  # the pairs not by the same name and shape, for the evidence
        with torch.no_grad():
            for c, r, dims in pairs:
                ours[c].copy_(theirs[r].permute(dims).reshape(ours[c].shape))
                permuted = dims != tuple(range(len(dims)))
                if c != r or ours[c].shape != theirs[r].shape or permuted:
                    paired.append(f"{named(c, ours[c])} = {named(r, theirs[r])}" + (f" permuted {list(dims)}" if permuted else ""))
        reply = {"shapes": shapes, "paired": paired, "missing": [named(r, theirs[r]) for r in missing], "extra": [named(c, ours[c]) for c in extra]}
        del reference, theirs
        models.release_memory(self.device)
        return reply

    def restore(self):
        """ModelNew's parameters as they were before `perturb`."""
        params.restore(self.kept)
        self.kept, self.perturbed = [], None

    def profile(self, req):
        """`profile.library_share` and `profile.library_output`, asked for after timing:
        profiling leaves state in the process (an identity run that profiled before timing
        measured host-bound networks up to 20 % slower in this worker than in the reference's),
        and so may the traced calls, which run last."""
        self.shared = None
        log, reply = Log(), {}
        if self.cuda:
            log.run(CheckName.PROFILE_LIBRARY_SHARE, _unless_oom, self.library_share, req, reply)
        log.run(CheckName.PROFILE_LIBRARY_OUTPUT, _unless_oom, self.library_output, req)
        # Extensions built lazily in forward count too, and so do the builds that failed.
        return {**reply, "checks": log.entries(), **self.kernel_report()}

    def kernel_report(self):
        return {"kernels": kernels.found(self.module), "build_failures": kernels.failures(), "compiled": kernels.compiled(), "defined": sorted(self.defined)}

    def independence(self, req, first, copies, log):
        other = make_inputs(self.task, req.seed + 1, self.device, self.precision, _variant(req))
        second = self.call(other, req.forward_seed, poison.FINITE, log)
        return outputs.independence(first, copies, returns.tensors(second))

    def rerun(self, req, first, log):
        # The trial's inputs made again from its seed (a copy held during the first call would
        # double the memory of multi-GB tasks).
        again_inputs = make_inputs(self.task, req.seed, self.device, self.precision, _variant(req))
        before = outputs.state(self.model)
        again = self.call(again_inputs, req.forward_seed, poison.FINITE, log)
        changed = outputs.changed_state(before, outputs.state(self.model))
        return outputs.rerun(first, returns.tensors(again), self.atol, self.rtol, changed)

    def library_share(self, req, reply):
        # Inputs no earlier call saw, and poisoned memory: otherwise a scavenger finds the
        # independence call's output in freed memory and the profile sees no work at all.
        inputs = make_inputs(self.task, req.seed + 2, self.device, self.precision)
        poison.poison(self.device, poison.NAN)
        per_kernel, busy_ms = profile.kernel_times(lambda: models.forward(self.model, inputs, req.forward_seed))
        built = symbols.names(kernels.objects())
        found = reply["profile"] = profile.summarize(per_kernel, self.defined, busy_ms, built)
        return "pass", f"library kernels {found['library_share']:.0%} of {found['total_ms']:.3f} ms GPU time"

    def library_output(self, req):
        """Two traced calls, on signed and on scaled inputs no earlier call saw (a degenerate
        task's identity, a ReLU of positive values, hides the kernel's work on one of them)."""
        variants = ({"kind": "signed"}, {"kind": "scaled", "factor": 8})
        try:
            traces = [self.traced(req, req.seed + 3 + n, variant) for n, variant in enumerate(variants)]
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a call the dispatch mode breaks is not traced, never judged
            return "skip", f"not traced: {type(exc).__name__}: {exc}"
        return provenance.judge(traces)

    def traced(self, req, seed, variant):
        inputs = make_inputs(self.task, seed, self.device, self.precision, variant)
        return provenance.library_output(lambda: models.forward(self.model, inputs, req.forward_seed), lambda: models.synchronize(self.device))

    def after_timing(self, req):
        """The checks once timing is done: the process state (a switch flipped while timed), and
        `outputs.independence` again, since a module may hand out one static output (a CUDA
        graph's) only once it has warmed up, after the trials' calls; its breach is reported,
        not raised, so the profiled call still runs. The timed input sets are let go first: the
        calls need the room."""
        self.shared = self.timed = self.control = None
        models.release_memory(self.device)
        log = Log()
        if self.cuda:
            log.run(CheckName.RUNTIME_L2_PERSIST_LIMIT, self.l2.check)
        log.run(CheckName.PRECISION_TF32_FLAGS, runtime.tf32_flags)
        log.run(CheckName.OUTPUTS_INDEPENDENCE, _unless_oom, self.warm_independence, req, log)
        return {"checks": log.entries(), "contract": log.breach}

    def warm_independence(self, req, log):
        inputs = make_inputs(self.task, req.seed, self.device, self.precision)
        first = returns.tensors(self.call(inputs, req.forward_seed, poison.NAN, log))
        return self.independence(req, first, outputs.snapshot(first), log)

    def time(self, req):
        """The candidate's arm by default; ``arm: control`` times the task's own reference in
        this process (`arms.Control`)."""
        self.shared = None
        if req.arm != "control":
            return modes.handle(self, req, shared=True)
        if req.cmd == "time_setup":
            self.control = arms.Control(self)
        return modes.handle(self.control, req)


def _unless_oom(check, *args):
    """A deep check's result, or a skip when its extra call does not fit in device memory."""
    try:
        return check(*args)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return "skip", "out of device memory for the extra call"


def verify(candidate):
    changed = candidate.snapshot.changed() if candidate is not None else []
    if changed:
        raise TamperError(f"{CheckName.INTEGRITY_MONKEYPATCH_SNAPSHOT}: the submission rebound {', '.join(changed[:8])}")


def _copies(out):
    """The plain CUDA tensors among the outputs copied (anything else left for `export_cuda` to
    refuse), in the same container."""
    if isinstance(out, (tuple, list)):
        return (list if type(out) is list else tuple)(_copies(t) for t in out)
    return out.detach().clone() if type(out) is torch.Tensor and out.is_cuda else out


def load_error(exc):
    if isinstance(exc, SyntaxError):
        return error("syntax", f"syntax error: {exc.msg} (line {exc.lineno})", exc)
    if isinstance(exc, LookupError) and "ModelNew" in str(exc):
        return error("no_model_new", str(exc))
    if cause.is_build_failure(exc):
        return errors.build_error(exc)
    return errors.classify(exc, "load")


class Session:
    """The candidate worker's requests; ``load`` makes the one submission it runs."""

    def __init__(self, channel):
        self.channel = channel
        self.candidate = None
        self.kernelbench = None

    def load(self, req: Load) -> Loaded:
        if req.kernelbench:
            return self.load_kernelbench(req)
        self.candidate = Candidate(req)
        models.release_memory(self.candidate.device)
        verify(self.candidate)
        return {**self.candidate.kernel_report(), "startup_s": self.channel.startup_s, "checks": self.candidate.checks.entries()}

    def load_kernelbench(self, req: Load) -> Loaded:
        """`kernelbench.environment`: the task and the submission loaded as KernelBench's eval
        loads them, for its trials alone (`kernelbench.Eval`)."""
        os.environ.update(req.env or {})  # this submission's build cache
        overrides = taskfile.overrides(req.task, req.scale, req.set)
        self.kernelbench = kernelbench.Eval(req.task, req.submission, overrides, req.device, req.precision)
        return {"startup_s": self.channel.startup_s}

    def kernelbench_trial(self, req: KernelbenchTrial) -> Judged:
        return self.kernelbench.trial(req.index, req.tolerance)

    def trial(self, req: Trial) -> Shipped:
        reply = self.candidate.trial(req)
        verify(self.candidate)
        # Extensions built on the first call show up here, not at load.
        return {**reply, "compiled": kernels.compiled()}

    def perturb(self, req: Perturb) -> Perturbed:
        if req.restore:
            self.candidate.restore()
            return {}
        self.candidate.perturbed = req.seed
        return self.candidate.perturb(req.seed, req.built)

    def time(self, req: TimeSetup | Time) -> Warmed | Timed:
        # Nothing beyond the reference's work: `timing.wall_envelope` compares both workers'
        # timing requests by kbench's clock (the state checks, which `state` runs after timing,
        # added ~0.75 ms a request on an H100 when they ran here).
        return self.candidate.time(req)

    def state(self, req: State) -> Stated:
        """The checks once timing is done, outside every timed request."""
        reply = self.candidate.after_timing(req)
        verify(self.candidate)
        return reply

    def profile(self, req: Profile) -> Profiled:
        reply = self.candidate.profile(req)
        verify(self.candidate)
        return reply

    def profiler_call(self, req: ProfilerCall) -> Empty:
        """`--profile ncu`: one forward watched by the profiler outside (no check runs: the
        profiler's figures decide nothing)."""
        c = self.candidate
        inputs = make_inputs(c.task, req.seed, c.device, c.precision)
        profile.bracketed(lambda: models.forward(c.model, inputs, req.forward_seed))
        verify(c)
        return {}


def commands(channel):
    """The candidate worker's table: command -> handler."""
    session = Session(channel)
    return {
        "load": session.load,
        "trial": session.trial,
        "kernelbench_trial": session.kernelbench_trial,
        "perturb": session.perturb,
        "time_setup": session.time,
        "time": session.time,
        "state": session.state,
        "profile": session.profile,
        "profiler_call": session.profiler_call,
        "ping": lambda req: {},
    }


def failure(cmd, exc):
    """What a raising request is: a cheat caught, a failed load, or the forward's error."""
    if isinstance(exc, TamperError):
        return error("cheat", str(exc))
    return load_error(exc) if cmd == "load" else errors.classify(exc, "forward")


def run(channel):
    serve(channel, commands(channel), failure)
