"""Reference worker (trusted): task code and harness only, never a submission.

Builds the task's Model, makes the same inputs as the candidate from the trial's seed, receives
the candidate's outputs and post-call inputs (CUDA IPC views of its memory, or a tensors-only
file read with ``weights_only``), checks the inputs against its own pristine copy, runs the
reference and compares, here, where no submission code has run.
"""

import copy
import functools
import gc
import json
import math
import time

import torch

from . import cause, checks, harness, kept, kernelbench, memo, outputs, precision, profile, runtime, taskfile, timing, transfer
from .messages import Checked, CheckKept, CheckOutputs, Load, Loaded, Perturb, Perturbed, Profile, Profiled, Time, Timed, TimeSetup, Warmed
from .protocol import error, serve


def _peak(r):
    """max|r| (NaN when r holds NaN), in chunks."""
    return max((rp.abs().max().item() for rp, _ in outputs.pieces(r, r) if rp.numel()), default=0.0)


def scaled_atol(r, atol):
    """`correctness.scaled_tolerance`: (atol to use, max|ref|). Outputs far below atol (softmax
    over 393,216 columns is ~2.5e-6) would let zeros pass, so atol is capped at 1 % of the
    reference's own largest magnitude (kept when that is zero or not finite)."""
    peak = _peak(r)
    if 0.0 < peak < math.inf:
        return min(atol, 0.01 * peak), peak
    return atol, peak


def compare(ref, cand, atol, rtol, log, excused=()):
    """Verdict of one trial: {'correct', 'reason', 'max_abs_diff', 'max_rel_diff'} and, for
    values beyond the tolerance, the 'output' that missed it; the scaled
    tolerance's entry goes to ``log`` when it tightened atol. Outputs in ``excused`` (judged
    against float64 already) skip the tolerance."""
    differs = _structure(ref, cand, log)
    if differs:
        return {"correct": False, "reason": f"outputs.structure: {differs}"}
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    cands = list(cand) if isinstance(cand, (tuple, list)) else [cand]
    worst_abs = worst_rel = 0.0
    scaled = []  # (evidence, seconds) of outputs whose atol was tightened
    for i, (r, c) in enumerate(zip(refs, cands)):
        if tuple(c.shape) != tuple(r.shape):
            return {"correct": False, "reason": f"output {i} has shape {list(c.shape)}, expected {list(r.shape)}"}
        if c.dtype != r.dtype:
            return {"correct": False, "reason": f"output {i} has dtype {c.dtype}, expected {r.dtype}"}
        c = c.to(r.device)
        exact = not (r.is_floating_point() or r.is_complex())
        tol = atol
        if not exact:
            started = time.perf_counter()
            tol, peak = scaled_atol(r, atol)
            if tol < atol:
                scaled.append((f"output {i}: atol {atol:g} -> {tol:.3g} (1% of max|ref| {peak:.3g})", time.perf_counter() - started))
        mismatch = False
        for rp, cp in outputs.pieces(r, c):
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
            mismatch |= i not in excused and not torch.allclose(cp, rp, atol=tol, rtol=rtol)
            del diff
        if mismatch and exact:
            return {"correct": False, "reason": f"output {i} differs (exact comparison, dtype {r.dtype})"}
        if mismatch:
            # The scaled atol decided only if the output passes with the given one.
            decided = tol < atol and all(torch.allclose(cp, rp, atol=atol, rtol=rtol) for rp, cp in outputs.pieces(r, c))
            _log_scaled(log, scaled, "fail" if decided else "pass")
            shown = f"atol {atol}" if not decided else f"correctness.scaled_tolerance: atol {atol} scaled to {tol:.3g}, 1% of max|ref| {peak:.3g}"
            return {
                "correct": False,
                "reason": f"output {i} differs: max abs diff {worst_abs:.3g} ({shown}; rtol {rtol})",
                "output": i,
                "max_abs_diff": worst_abs,
                "max_rel_diff": worst_rel,
            }
    _log_scaled(log, scaled, "pass")
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 - JSON has no inf
    return {"correct": True, "reason": "", "max_abs_diff": finite(worst_abs), "max_rel_diff": finite(worst_rel)}


def _structure(ref, cand, log):
    """`outputs.structure`: the candidate's outputs are built as the reference's: a tensor where
    it returns a tensor (not a list or tuple of one), a tuple where it returns a tuple and a list
    where a list, nested alike. Returns how they differ, or None."""
    expected, got = outputs.structure(ref), outputs.structure(cand)
    differs = f"forward returned {got}, the reference returns {expected}" if got != expected else None
    log.add("outputs.structure", "fail" if differs else "pass", differs or got)
    return differs


def _log_scaled(log, scaled, outcome):
    if scaled:
        log.add("correctness.scaled_tolerance", outcome, "; ".join(e for e, _ in scaled), sum(t for _, t in scaled))


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
        if not all(torch.equal(x, y) for x, y in outputs.pieces(a, b)):
            changed.append(i)
    return changed


def _handed_over(step, *args):
    """``step`` on what the candidate handed over (its outputs, its inputs after the call): what
    it raises is the candidate's (`incorrect`, the exception as the reason), never an error of the
    reference's own (a skip). Out of memory and CUDA errors stay the worker's."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001 - the candidate chose what it handed over
        if harness.classify(exc, "check")["kind"] in ("oom", "cuda"):
            raise
        raise harness.OutputTypeError(f"checking what the candidate handed over raised {cause.line(exc)}") from exc


class TransferError(RuntimeError):
    """The candidate's outputs could not be received by IPC (not a verdict on the kernel)."""


class Reference:
    def __init__(self, req, kept_outputs=None):
        self.device = req.device
        self.precision = req.precision
        self.atol = req.atol
        self.rtol = req.rtol
        runtime.strict_fp32()
        self.task = harness.load_task(req.task, taskfile.overrides(req.task, req.scale, req.set))
        # `precision.fp32_accumulation`: the task declares how its outputs are judged.
        self.accumulation = getattr(self.task, "KBENCH_JUDGE", None) == "fp32_accumulation"
        self.model = harness.build(self.task.Model, harness.init_inputs(self.task), self.device, self.precision)
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

    def _key(self, what, req):
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
        inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision)
        per_kernel, busy_ms = profile.kernel_times(lambda: harness.forward(self.model, inputs, req.forward_seed))
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
            raise harness.OutputTypeError(f"the candidate's outputs could not be read: {exc}") from exc

    def check(self, req):
        harness.release_memory(self.device)
        log = checks.Log()
        inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision, req.variant)
        cand, cand_inputs = self.receive(req)
        # Inputs first, while the reference's own are pristine (its forward may work in place).
        changed = _handed_over(self.inputs_integrity, inputs, cand_inputs, log) if cand_inputs is not None else []
        del cand_inputs
        ref = self.memo.get(self._key("forward", req), functools.partial(harness.forward, self.model, inputs, req.forward_seed))
        del inputs
        result = _handed_over(compare, ref, cand, self.atol, self.rtol, log)
        fp32 = self.precision == "fp32" and not changed
        if (req.variant or {}).get("kind") in ("signed", "scaled", "shifted") and "max_abs_diff" in result and fp32:
            self.judge_shift(req, ref, cand, result, log)
        elif "output" in result and fp32:
            result = self.judge_miss(req, ref, cand, result, log)
        if self.accumulation and "max_abs_diff" in result and not changed:
            self.judge_accumulation(req, cand, result, log)
        if "output" in result and not result["correct"]:
            self.explain_batchnorm(req, cand, result)
        elif result["correct"] and req.deep and fp32:
            self.fp64_error_ratio(req, ref, cand, result, log)
        if req.kernelbench_tolerance is not None:
            result["kernelbench_correct"] = _handed_over(kernelbench.correct, ref, cand, req.kernelbench_tolerance)
            result["kernelbench_needed"] = _handed_over(kernelbench.needed, ref, cand)
        if result["correct"] and changed:
            # Right values, written into the caller's inputs: a breach of the module contract.
            result["contract"] = f"inputs.integrity: forward modified its input(s) {changed}"
        del ref, cand
        # Give the cache back now: the candidate's next call needs the room (a 16 GB task ran
        # out of memory while this worker still cached its last outputs and inputs).
        harness.release_memory(self.device)
        return {**result, "checks": log.entries()}

    def check_kept(self, req):
        """`timing.timed_output_check`: the output of one timed call, read from the candidate's
        pool (`kept.read`) while the candidate waits for its next request, against the
        reference's on the inputs kbench derived for that call. A pool that cannot be read is
        the candidate's (it described it)."""
        harness.release_memory(self.device)
        log = checks.Log()
        inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision)
        cand = kept.read(req.kept, req.slot)
        ref = harness.forward(self.model, inputs, req.forward_seed)
        del inputs
        result = _handed_over(compare, ref, cand, self.atol, self.rtol, log)
        if "output" in result and self.precision == "fp32":
            # A miss is judged against float64 as the trials' are (`precision.fp64_judged`): a
            # timed call's output is no cheat for summing in another order.
            result = self.judge_miss(req, ref, cand, result, log)
        del ref
        if self.accumulation and "max_abs_diff" in result:
            # Judged as the trials are: float64 decides (`precision.fp32_accumulation`).
            self.judge_accumulation(req, cand, result, log)
        del cand
        harness.release_memory(self.device)
        return {**result, "checks": log.entries()}

    @staticmethod
    def inputs_integrity(inputs, cand_inputs, log):
        """`inputs.integrity`: the candidate's inputs after its call, against a pristine copy."""
        started = time.perf_counter()
        changed = modified_inputs(inputs, cand_inputs)
        evidence = f"forward modified its input(s) {changed}" if changed else f"{len(cand_inputs)} tensor input(s) unchanged"
        log.add("inputs.integrity", "fail" if changed else "pass", evidence, time.perf_counter() - started)
        return changed

    def fp64_error_ratio(self, req, ref, cand, result, log):
        """`precision.fp64_error_ratio`: the candidate's RMS error against a float64 run of the
        reference, relative to PyTorch fp32's own; more than `precision.LIMIT` times fails the
        trial. A reference that cannot run in float64 (memory, an op without float64) skips.
        Returns the outcome (None without floating outputs)."""
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        cands = list(cand) if isinstance(cand, (tuple, list)) else [cand]
        if not any(r.is_floating_point() for r in refs):
            return None
        started = time.perf_counter()
        try:
            refs64 = self._float64(req)
            outcome, evidence = precision.judge(refs, refs64, cands)
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            outcome, evidence = "skip", f"the reference does not run in float64: {type(exc).__name__}: {str(exc)[:200]}"
        refs64 = None
        harness.release_memory(self.device)
        log.add("precision.fp64_error_ratio", outcome, evidence, time.perf_counter() - started)
        if outcome == "fail":
            result.update(correct=False, reason=f"precision.fp64_error_ratio: {evidence}")
        return outcome

    def judge_shift(self, req, ref, cand, result, log):
        """`inputs.mean_shift` and `inputs.distribution_perturbation` (signed, scaled inputs) are
        judged against float64, not PyTorch's fp32: far from zero fp32 loses digits in every
        honest kernel too, PyTorch's included. The candidate is correct when its error is within
        `precision.LIMIT` times PyTorch fp32's; where no float64 run is possible the tolerance
        check stands."""
        if self.fp64_error_ratio(req, ref, cand, result, log) == "pass":
            result.update(correct=True, reason="")

    def judge_miss(self, req, ref, cand, result, log):
        """`precision.fp64_judged`, on any trial: an output that missed the tolerance is judged
        against a float64 run of the reference (`precision.judge_miss`); one within
        `precision.SUM_LIMIT` of PyTorch fp32's errors is summation reordered and the comparison
        goes on past it. Where the reference is ill-conditioned (PyTorch fp32 itself is off
        float64 wholesale: a mean that cancels to ~0) float64 cannot decide, and an output within
        the tolerance before its scaling to the output's size is inconclusive, not failed: the
        comparison goes on past it too. Otherwise the tolerance verdict stands, the float64
        comparison joining its reason; a reference that cannot run in float64 adds nothing.
        Returns the result."""
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        cands = list(cand) if isinstance(cand, (tuple, list)) else [cand]
        excused = set()
        try:
            refs64 = self._float64(req)
        except (RuntimeError, TypeError, NotImplementedError):
            harness.release_memory(self.device)
            return result
        while "output" in result:
            started = time.perf_counter()
            index = result["output"]
            outcome, evidence = precision.judge_miss(refs[index], refs64[index], cands[index])
            inconclusive = outcome == "skip" and precision.ill_conditioned(refs[index], refs64[index]) and _handed_over(kernelbench.allclose, refs[index], cands[index], self.atol, self.rtol)
            if inconclusive:
                evidence += f"; within the unscaled tolerance (atol {self.atol:g}, rtol {self.rtol:g}): inconclusive, not failed"
            if len(refs) > 1:
                evidence = f"output {index}: {evidence}"
            log.add("precision.fp64_judged", outcome, evidence, time.perf_counter() - started)
            if outcome != "pass" and not inconclusive:
                result["reason"] += f"; {evidence}"
                break
            excused.add(index)
            result = _handed_over(compare, ref, cand, self.atol, self.rtol, log, excused)
        del refs64
        harness.release_memory(self.device)
        return result

    def judge_accumulation(self, req, cand, result, log):
        """`precision.fp32_accumulation`, on every trial of a task that declares it: each floating
        output against the reference run in float64, beside the reference run in fp32 (fp32
        accumulation) rounded to the output's dtype (`precision.judge_accumulation`). It decides
        the trial's values: a failure makes a trial within the tolerance incorrect (and joins the
        reason of one that missed it), and a pass makes one that missed the tolerance correct
        when every output was judged. The tolerance compares with PyTorch's own half-precision
        product, whose rounding (cuBLAS's split-K partial sums in fp16) can be the larger
        error: float64 tells which side is off."""
        started = time.perf_counter()
        cands = list(cand) if isinstance(cand, (tuple, list)) else [cand]
        try:
            refs64 = self._run_as(req, torch.float64)
            refs32 = self._run_as(req, torch.float32)
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            harness.release_memory(self.device)
            log.add("precision.fp32_accumulation", "skip", f"the reference does not run in float64 and fp32: {type(exc).__name__}: {str(exc)[:200]}", time.perf_counter() - started)
            return
        fp16_ratio = self._fp16_accumulation(req, refs32, refs64, cands)
        judged = []  # (outcome, evidence) per floating output
        for i, (r32, r64, c) in enumerate(zip(refs32, refs64, cands)):
            if c.is_floating_point():
                outcome, evidence = precision.judge_accumulation(r32.to(c.dtype), r64, c.to(r64.device), fp16_ratio)
                judged.append((outcome, f"output {i}: {evidence}" if len(cands) > 1 else evidence))
        del refs64, refs32
        harness.release_memory(self.device)
        if not judged:
            return
        outcome, evidence = next((j for j in judged if j[0] == "fail"), judged[0])
        log.add("precision.fp32_accumulation", outcome, evidence, time.perf_counter() - started)
        if outcome == "pass" and not result["correct"] and len(judged) == len(cands):
            result.update(correct=True, reason="")
        if outcome != "fail":
            return
        if result["correct"]:
            result.update(correct=False, reason=f"precision.fp32_accumulation: {evidence}")
        else:
            result["reason"] += f"; precision.fp32_accumulation: {evidence}"

    def _fp16_accumulation(self, req, refs32, refs64, cands):
        """An fp16 accumulator's `precision.accumulation_ratio` on the trial's inputs, from the
        task's `kbench_fp16_accumulation` (one output: the product's first rows), or None where
        the task has none."""
        accumulate = getattr(self.task, "kbench_fp16_accumulation", None)
        if accumulate is None or len(cands) != 1:
            return None
        variant = getattr(req, "variant", None)
        inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision, variant)
        with torch.no_grad():
            out = accumulate(*inputs)
        rows = out.shape[0]
        return precision.accumulation_ratio(refs32[0][:rows].to(out.dtype), refs64[0][:rows], out.to(refs64[0].device))

    def explain_batchnorm(self, req, cand, result):
        """A wrong output's cause when the task's reference normalises with BatchNorm in training
        mode (batch statistics, as KernelBench's models run) and the candidate's output is the
        same model's in eval mode with the running statistics it was built with: the reason says
        so first. Costs a copy of the model and one call, on a wrong output only."""
        if not self.running:
            return
        model = copy.deepcopy(self.model).eval()
        model.load_state_dict(self.running, strict=False)
        inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision, req.variant)
        evaluated = harness.forward(model, inputs, req.forward_seed)
        if _handed_over(compare, evaluated, cand, self.atol, self.rtol, checks.Log())["correct"]:
            cause = "BatchNorm: the output is the task's model with running statistics (eval mode); the task's reference normalises with each batch's statistics (training mode)"
            result["reason"] = f"{cause}; {result['reason']}"
        del model, evaluated, inputs
        harness.release_memory(self.device)

    def _float64(self, req):
        """The reference's outputs in float64 (`_run_as`)."""
        return self._run_as(req, torch.float64)

    def _run_as(self, req, dtype):
        """The reference's outputs in ``dtype``: a copy of the model in it (freed on return) on
        the trial's inputs cast to it, with the same forward seed."""
        # A timed call's check (`CheckKept`) has no variant: its inputs are the shipped kind.
        variant = getattr(req, "variant", None)

        def run():
            model = copy.deepcopy(self.model).to(dtype)
            inputs = harness.make_inputs(self.task, req.seed, self.device, self.precision, variant)
            inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            out = harness.forward(model, inputs, req.forward_seed)
            return list(out) if isinstance(out, (tuple, list)) else [out]

        return self.memo.get(self._key(str(dtype), req), run)


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
        inputs = harness.make_inputs(self.task, seed, self.device, self.precision)
        harness.forward(self.model, inputs, 0)
        harness.synchronize(self.device)
        self.compile_s = time.perf_counter() - started


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
            harness.forget_tasks()
            gc.collect()
            harness.release_memory(device)
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
        (`harness.built`), for the candidate worker to match its own with. On the CPU it does
        not: digesting there costs more than the candidate's building the task's model again.
        Nor where the digests' working memory does not fit beside the task's. ``restore`` puts
        back the values the perturbation replaced, and the memo's key with them."""
        model = self.reference.model
        if req.restore:
            harness.restore(self.reference.kept)
            self.reference.kept = []
            self.reference.params = tuple(s for s in self.reference.params if s != req.seed)
            return {}
        self.reference.kept = harness.kept_values([p for _, p in harness.floating(model)])
        built = None
        if self.reference.device.startswith("cuda"):
            try:
                built = harness.built(model)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
        shapes = harness.perturb(model, req.seed)
        self.reference.params += (req.seed,)
        return {"shapes": shapes, "built": built}

    def time(self, req: TimeSetup | Time) -> Warmed | Timed:
        """Arm A (eager) by default; ``arm: compile`` times torch.compile of the same model."""
        if req.arm != "compile":
            return timing.handle(self.reference, req)
        if req.cmd == "time_setup":
            self.reference.compiled = Compiled(self.reference, req.seed)
        reply = timing.handle(self.reference.compiled, req)
        return {**reply, "compile_s": self.reference.compiled.compile_s}

    def profile(self, req: Profile) -> Profiled:
        return {"profile": self.reference.profiled(req)}


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
    }


def failure(cmd, exc):
    """A transfer that failed (kbench may retry through a file), or the reference's own error."""
    if isinstance(exc, TransferError):
        return error("transfer", str(exc), exc)
    return harness.classify(exc, f"reference {cmd}", kind="reference")


def run(channel):
    serve(channel, commands(channel), failure)
