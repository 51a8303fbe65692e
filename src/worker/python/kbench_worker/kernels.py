"""Notice whether a submission brings a kernel of its own.

kbench records which compiled or JIT kernels a submission created while it was imported and
built: a torch C++/CUDA extension (cpp_extension.load / load_inline), a Triton kernel or a CuPy
kernel. A correct submission with none of them is pure PyTorch: verdict `no_kernel`. A build
that raised is kept too, with where it ran (import, `__init__`, forward) and its first error
line: a module that caught it and fell back to PyTorch is `no_kernel` for that reason. Builds
run with `verbose=False` whatever the submission asked (unless it passes it by position): only
then does torch put the compiler's output into the error it raises.

It also records which loads compiled something in this process (ninja ran a step under
TORCH_EXTENSIONS_DIR) rather than loading what the compile pool had built: the build record's
`pool_compiled` and `slot_compiled`.

A build that failed in the compile pool is not compiled again on the GPU: the pool leaves its
error text in the build folder, keyed by the load's arguments, and the same load in the GPU
worker raises that text at once (a compile that fails takes tens of seconds of the GPU slot,
and the same sources and flags fail the same way). Loads whose flags name the `native`
architecture are not remembered: the pool has no GPU to resolve it.
"""

import hashlib
import os
import sys
from pathlib import Path

import torch.utils.cpp_extension as cpp_extension

from . import cause

_seen = []
_failed = []
_compiled = []
# Where the submission is: "import", "__init__" or "forward" (set by the candidate worker).
phase = "import"
# Whether build failures are left in the build folder: in the compile pool only.
remember = False


def _ninja_steps():
    """Build steps ninja has logged so far, per extension folder of this process's cache."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root or not Path(root).is_dir():
        return {}
    return {log.parent.name: len(log.read_text(errors="replace").splitlines()) for log in Path(root).glob("*/.ninja_log")}


def watch_extensions():
    """Wrap cpp_extension's loaders before the submission imports them (once per process)."""
    for name in ("load", "load_inline"):
        original = getattr(cpp_extension, name)
        if getattr(original, "_kbench_watched", False):
            continue

        def wrapped(*args, __original=original, __name=name, **kwargs):
            ext = kwargs.get("name", args[0] if args else "?")
            before = _ninja_steps()
            remembered = _failure_file(__name, args, kwargs)
            try:
                if remembered is not None and remembered.is_file():
                    raise RuntimeError(remembered.read_text(errors="replace"))
                module = __original(*args, **{**kwargs, **_quiet(args)})
            except BaseException as exc:
                why = cause.build_message(exc) if cause.is_build_failure(exc) else cause.line(exc)
                _failed.append({"extension": str(ext), "phase": phase, "cause": why})
                _remember_failure(remembered, exc)
                raise
            _seen.append(f"cpp_extension.{__name}:{ext}")
            if any(steps > before.get(folder, 0) for folder, steps in _ninja_steps().items()):
                _compiled.append(f"cpp_extension.{__name}:{ext}")
            return module

        wrapped._kbench_watched = True
        setattr(cpp_extension, name, wrapped)


def _quiet(args):
    """`verbose=False` for a load whose arguments do not already reach it (load's 8th, and
    load_inline's 10th, positional parameter): quiet, torch puts the compiler's output into the
    error it raises."""
    return {"verbose": False} if len(args) < 7 else {}


def _failure_file(loader, args, kwargs):
    """Where a failed build of this load is remembered, or None (no build folder, or flags that
    depend on the machine's GPU). Its own build folder is not part of the key: submissions put
    it beside their file, and the pool and the GPU worker see the file in different places."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    text = repr((loader, args, sorted((k, v) for k, v in kwargs.items() if k != "build_directory")))
    if not root or "native" in text:
        return None
    return Path(root) / ".kbench-failed-builds" / hashlib.sha256(text.encode()).hexdigest()


def _remember_failure(path, exc):
    """Keep a build failure's text for the GPU worker."""
    if not remember or path is None or path.exists() or "Error building extension" not in str(exc):
        return
    try:
        # With a `build_directory` of its own, torch never makes TORCH_EXTENSIONS_DIR itself.
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(exc))
    except OSError:
        pass


def failures():
    """The extension builds that raised, each {extension, phase, cause}."""
    return list(_failed)


def compiled():
    """The loads that compiled in this process, in order (a load of a cached build is absent)."""
    return list(_compiled)


def found(module):
    """The kernels the submission module created, as short descriptions."""
    kinds = list(_seen)
    triton_jit = getattr(sys.modules.get("triton.runtime.jit"), "JITFunction", None)
    cupy = sys.modules.get("cupy")
    cupy_kinds = tuple(
        getattr(cupy, n) for n in ("RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel") if cupy and hasattr(cupy, n)
    )
    for name, value in vars(module).items():
        if triton_jit is not None and isinstance(value, triton_jit):
            kinds.append(f"triton:{name}")
        elif cupy_kinds and isinstance(value, cupy_kinds):
            kinds.append(f"cupy:{name}")
    return kinds


def build_report(label):
    """Print each extension build's ninja log and flags to the worker's log: evidence of whether
    a load rebuilt what the compile pool built."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root or not Path(root).is_dir():
        return
    print(f"[kbench] {label}: TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST')}", file=sys.stderr)
    for log in sorted(Path(root).glob("*/.ninja_log")):
        lines = log.read_text().splitlines()[1:]
        print(f"[kbench] {label}: {log.parent.name}: {len(lines)} ninja steps so far", file=sys.stderr)
        ninja = log.parent / "build.ninja"
        if ninja.exists():
            flags = [line for line in ninja.read_text().splitlines() if line.startswith(("cuda_cflags", "cuda_post_cflags", "cflags", "nvcc", "cxx"))]
            print("\n".join(f"[kbench] {label}:   {f[:400]}" for f in flags), file=sys.stderr)
