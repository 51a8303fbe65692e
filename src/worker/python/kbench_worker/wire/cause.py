"""Why something failed, in one line a person can act on.

Compiler output, TorchScript tracebacks and CUDA messages run to pages; reports get one line
(the first compiler error, the TorchScript error itself, the first line of anything else) and
the whole text stays in the worker's log.
"""

import re

LINE_CHARS = 300

# A compiler's error line: gcc/clang `file:line:col: error: ...`, nvcc `... error: ...` and
# `nvcc fatal : ...`, ptxas, the linker. Ninja's and torch's own summary lines are not causes.
_COMPILER_ERROR = re.compile(r"(\berror\b|\bfatal\b|undefined reference)", re.IGNORECASE)
_NOT_A_CAUSE = ("Error building extension", "FAILED:", "ninja: build stopped", "CalledProcessError", "error: command")
# A compiler's command line echoed by ninja (its flags may say -Wno-error).
_COMMAND = re.compile(r"\s-c\s.*\s-o\s")
_EXTENSION = re.compile(r"Error building extension '([^']+)'")
# The folders of an absolute path (build folders are long and say nothing): `/a/b/main.cpp:8` -> `main.cpp:8`.
_FOLDERS = re.compile(r"(?<![\w.])/(?:[^\s/:'\"]+/)+")
# The exception line inside a TorchScript traceback (`RuntimeError: ...`, `builtins.ValueError: ...`).
_RAISED = re.compile(r"^\s*[\w.]*(Error|Exception):")
# Toolchain drift: a build that failed because the toolchain moved on, not because of the kernel.
# torch 2.11 removed the `Tensor::type()` overload the AT_DISPATCH macros accepted (g++: "cannot
# convert 'const at::DeprecatedTypeProperties' to 'c10::ScalarType'"); CUDA 13's nvcc dropped
# the oldest architectures ("nvcc fatal : Unsupported gpu architecture 'compute_70'").
_DISPATCH_TYPE = re.compile(r"DeprecatedTypeProperties.*ScalarType")
_OLD_ARCH = re.compile(r"Unsupported gpu architecture '((?:sm|compute)_\w+)'")


def _clip(line):
    line = " ".join(line.split())
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def first_compiler_error(text):
    """The first line of compiler output that states an error, or None."""
    for line in text.splitlines():
        if _COMPILER_ERROR.search(line) and not _COMMAND.search(line) and not any(skip in line for skip in _NOT_A_CAUSE):
            return _clip(_FOLDERS.sub("", line))
    return None


def is_build_failure(exc):
    text = f"{type(exc).__name__}: {exc}"
    return "Error building extension" in text or "CalledProcessError" in text or "CompilationError" in text


def drifted(text):
    """What of the toolchain moved, when compiler output shows a known case of toolchain drift,
    else None: the error record's `drift` (kbench's verdict `environment` reads that field)."""
    if _DISPATCH_TYPE.search(text):
        import torch

        version = torch.__version__.split("+")[0]
        return f"the kernel uses AT_DISPATCH on x.type(), which torch {version} removed (use x.scalar_type())"
    arch = _OLD_ARCH.search(text)
    if arch:
        return f"the installed nvcc no longer supports {arch.group(1)} (--compat raises it)"
    return None


def drift(text):
    """`environment: <what of the toolchain moved>; ` (`drifted`) for the message people read,
    else ""."""
    moved = drifted(text)
    return f"environment: {moved}; " if moved else ""


def build_message(exc):
    """`extension 'x' failed to build: <first compiler error>`, after the toolchain drift it
    shows (`drift`)."""
    text = str(exc)
    name = _EXTENSION.search(text)
    what = f"extension '{name.group(1)}'" if name else "the extension"
    found = first_compiler_error(text) or line(exc)
    return f"{drift(text)}{what} failed to build: {found}"


def line(exc):
    """`Type: the informative line` of an exception. In a TorchScript error that is the
    exception the scripted code raised (the last `...Error:` line), marked as TorchScript."""
    text = str(exc)
    lines = [s for s in text.splitlines() if s.strip()]
    if "TorchScript" in text or type(exc).__module__.startswith("torch.jit"):
        raised = [s for s in lines if _RAISED.match(s)]
        return _clip(f"TorchScript {type(exc).__name__}: {(raised or lines or [''])[-1 if raised else 0].strip()}")
    return _clip(f"{type(exc).__name__}: {lines[0].strip() if lines else ''}".rstrip(": "))
