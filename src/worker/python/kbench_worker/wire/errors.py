"""What goes wrong, as the wire says it: the exceptions a runtime check raises to say what it found
(wrong outputs, cheating, a breach of the module contract), and `classify`, which makes any
exception raised by task or submission code a protocol error record of the kind it is.
"""

import torch

from . import cause
from .protocol import error


class OutputTypeError(TypeError):
    """forward returned something other than plain tensors."""


class OutputCheckError(RuntimeError):
    """A runtime check proved the outputs wrong, deliberately or not; the message names the check,
    and `Log.run` sets ``check`` to it (the error record's `check`)."""


class TamperError(RuntimeError):
    """A runtime check caught the submission cheating; the message names the check."""


class ContractError(RuntimeError):
    """A runtime check found the module breaking kbench's module contract, which KernelBench's
    eval does not check (it writes into its inputs, returns the same output storage on every
    call, keeps state between calls): `contract` where the outputs are right, `incorrect` where
    they are not. The message names the check."""


# torch.compile's CUDA graphs raise this when a caller reads an output a later replay overwrote:
# the module hands out the same output storage on every call.
OVERWRITTEN = "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"
# A failed CUDA graph capture whose exception was caught leaves the CUDA generator capturing;
# its next draw outside a capture raises this.
_CAPTURE_LEFT_OPEN = "Offset increment outside graph capture encountered unexpectedly"


def build_error(exc):
    """The error record of an extension build that failed (`cause.is_build_failure`): its one
    line, and the toolchain drift it shows, if any, in a field of its own."""
    return error("build", cause.build_message(exc), exc, drift=cause.drifted(str(exc)))


def classify(exc, phase, kind=None):
    """Map an exception raised by task or submission code to a protocol error: its kind is
    ``kind``, or the phase (``load``, ``forward``), unless the exception says more."""
    text = str(exc)
    if isinstance(exc, (OutputTypeError, OutputCheckError)):
        return error("output", text, check=getattr(exc, "check", None))
    if isinstance(exc, ContractError):
        return error("contract", text)
    if OVERWRITTEN in text:
        return error("contract", f"{phase}: {cause.line(exc)} (torch.compile's CUDA graphs hand out the same output storage on every call)", exc)
    if _CAPTURE_LEFT_OPEN in text:
        return error(
            kind or phase,
            f"{phase}: {cause.line(exc)} (a CUDA graph capture the submission began failed and it went on, which leaves the GPU's "
            "random number generator in capture state: nothing can draw random numbers on the GPU after it, kbench's inputs "
            "included; KernelBench's eval makes its inputs on the CPU and does not meet it)",
            exc,
        )
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text:
        return error("oom", f"{phase}: out of memory: {cause.line(exc)}", exc, fatal=True)
    accelerator_error = getattr(torch, "AcceleratorError", ())
    if isinstance(exc, accelerator_error) or "CUDA error" in text or "CUDA driver error" in text:
        return error("cuda", f"{phase}: {cause.line(exc)}", exc, fatal=True)
    return error(kind or phase, f"{phase}: {cause.line(exc)}", exc)
