"""KernelBench's verdict on a submission (`kernelbench_correct`): its rule, and its eval as it runs.

The rule (`correct`, `needed`) judges one trial's outputs as KernelBench's `allclose` does; the
reference worker applies it to kbench's own trials. `Eval` runs KernelBench's eval
(`eval_kernel_against_ref`) again as KernelBench runs it, for `kernelbench.environment`: kbench's
trials are strict fp32, on inputs of kbench's seeds, the reference in a process of its own, and
KernelBench's verdict on a kernel can depend on each of those. So, in the candidate worker:

- the task's source and then the submission's run from strings in one namespace (the
  submission's names replace the task's, and what it defines has no source file, so
  `torch.jit.script` of its functions fails there as it does in KernelBench);
- both models are built on the CPU after seeding `SEED` and moved to the device, under PyTorch's
  own switches (cuDNN TF32) and whatever the submission sets, which apply to the reference too;
- each trial's seed is drawn as KernelBench draws it, its inputs made on the CPU and cast to the
  run's precision (integer inputs too, as KernelBench does) before they move to the device; the
  reference is called, then the submission, on the same inputs; the last trial's device inputs
  are let go before the next trial's are made (KernelBench rebinds its name to the CPU inputs
  first), so those can reuse their memory, while the last trial's outputs are still held (a
  CUDA graph that copies from the address of the input it was captured with reads this trial's
  data only at the same address);
- a trial passes when both outputs have the same shape and are `torch.allclose` at the
  tolerance (atol = rtol); anything raised fails it.

The reference runs in the submission's process, as in KernelBench: this is KernelBench's
verdict, as open to a submission's interference as KernelBench's own, and never kbench's.
"""

import torch

from ..task import models, returns, taskfile
from ..wire import cause
from . import outputs

# `eval_kernel_against_ref`'s seed: of the weights, and of the draws of its trials' seeds.
SEED = 42

# `needed` for a trial no tolerance of KernelBench's passes.
NEVER = 1.0


def allclose(r, c, atol, rtol):
    """`torch.allclose` of one output against the reference's, in pieces (same shape and dtype:
    otherwise not close)."""
    if tuple(c.shape) != tuple(r.shape) or c.dtype != r.dtype:
        return False
    return all(torch.allclose(cp, rp, atol=atol, rtol=rtol) for rp, cp in outputs.pieces(r, c.to(r.device)))


def correct(ref, cand, tol):
    """KernelBench's own verdict on one trial: the outputs have the reference's structure and
    shapes and ``torch.allclose(out, ref, atol=tol, rtol=tol)``; nothing else (no scaled
    tolerance, no float64). A dtype allclose cannot compare fails, as it raises in KernelBench."""
    refs, cands = returns.tensors(ref), returns.tensors(cand)
    if returns.structure(ref) != returns.structure(cand):
        return False
    return all(allclose(r, c, tol, tol) for r, c in zip(refs, cands))


def needed(ref, cand):
    """The least tolerance at which KernelBench's rule passes this trial: the largest
    |out - ref| / (1 + |ref|) over the outputs (`allclose` with atol = rtol = t holds from there
    on, up to float32 rounding at the boundary), computed in float64; `NEVER` where no tolerance
    of KernelBench's versions passes it (another structure, shape or dtype, a NaN, a difference
    of 1 or more). It gives KernelBench's verdict at any tolerance from one run."""
    refs, cands = returns.tensors(ref), returns.tensors(cand)
    if returns.structure(ref) != returns.structure(cand):
        return NEVER
    worst = 0.0
    for r, c in zip(refs, cands):
        if tuple(c.shape) != tuple(r.shape) or c.dtype != r.dtype:
            return NEVER
        for rp, cp in outputs.pieces(r, c.to(r.device)):
            r64, c64 = rp.double(), cp.double()
            # Equal values (equal infinities too) are close at any tolerance; a NaN never is.
            ratio = torch.where(r64 == c64, torch.zeros_like(r64), (c64 - r64).abs() / (1 + r64.abs()))
            piece = float(ratio.max()) if ratio.numel() else 0.0
            if not piece < NEVER:  # NaN, inf or >= 1
                return NEVER
            worst = max(worst, piece)
    return worst


def _set_seed(seed):
    """KernelBench's `set_seed`: the CPU's generator and the current GPU's."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def _run(path, overrides, strict, namespace):
    """Run the file's source (with the run's size overrides) in ``namespace``, as from a string."""
    source = open(path, encoding="utf-8").read()
    exec(taskfile.rewrite(source, overrides, "<string>", strict), namespace)


class Eval:
    """KernelBench's eval of one submission against its task, one trial per `trial` call."""

    def __init__(self, task_path, submission_path, overrides, device, precision):
        self.device = device
        self.dtype = models.DTYPES[precision]
        namespace = {}
        _run(task_path, overrides, True, namespace)
        model, init_inputs, self.get_inputs = (namespace.get(n) for n in ("Model", "get_init_inputs", "get_inputs"))
        _set_seed(SEED)
        init = [self._process(x) for x in init_inputs()]
        with torch.no_grad():
            _set_seed(SEED)
            reference = model(*init)
        _run(submission_path, overrides, False, namespace)
        model_new = namespace.get("ModelNew")
        if model_new is None:
            raise LookupError("the submission defines no ModelNew")
        with torch.no_grad():
            _set_seed(SEED)
            candidate = model_new(*init)
            self.reference = reference.to(device=device, dtype=self.dtype)
            self.candidate = candidate.to(device=device, dtype=self.dtype)
        self._synchronize()
        # The last trial's inputs and outputs, held until the next trial's replace them.
        self.inputs = self.output = self.output_new = None

    def _process(self, x):
        """An input as KernelBench hands it over: a tensor cast to the precision, on the device."""
        return x.to(dtype=self.dtype).to(device=self.device) if isinstance(x, torch.Tensor) else x

    def _synchronize(self):
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def trial(self, index, tolerance):
        """Trial ``index`` (from 0) as KernelBench runs it: whether it passes at ``tolerance``,
        the least tolerance that passes it (`needed`), and why it failed."""
        torch.manual_seed(SEED)
        seed = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(index + 1)][index]
        with torch.no_grad():
            _set_seed(seed)
            self.inputs = self.get_inputs()
            self.inputs = inputs = [self._process(x) for x in self.inputs]
            _set_seed(seed)
            reference = self.reference.to(device=self.device, dtype=self.dtype)
            _set_seed(seed)
            candidate = self.candidate.to(device=self.device, dtype=self.dtype)
            try:
                self.output = output = reference(*inputs)
                self._synchronize()
            except Exception as exc:  # noqa: BLE001 - KernelBench's eval fails the kernel
                return _failed(f"the reference's call raised {cause.line(exc)}")
            try:
                self.output_new = output_new = candidate(*inputs)
                self._synchronize()
                if output.shape != output_new.shape:
                    return _failed(f"output shape {list(output_new.shape)}, expected {list(output.shape)}")
                passed = torch.allclose(output, output_new, atol=tolerance, rtol=tolerance)
            except Exception as exc:  # noqa: BLE001 - KernelBench's eval fails the kernel
                return _failed(f"the submission's call raised {cause.line(exc)}")
        try:
            least = needed(output, output_new)
        except Exception:  # noqa: BLE001 - an output `needed` cannot read (a Tensor subclass)
            least = NEVER
        if passed:
            # allclose decided at this tolerance, and it holds at every larger one.
            least = min(least, tolerance)
        reason = "" if passed else f"not allclose at {tolerance:g} (needs {least:.3g})"
        return {"correct": passed, "needed": least, "reason": reason}


def _failed(reason):
    return {"correct": False, "needed": NEVER, "reason": reason}
