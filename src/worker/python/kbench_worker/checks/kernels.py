"""Notice whether a submission brings a kernel of its own.

kbench records which compiled or JIT kernels a submission created while it was imported and
built: a torch C++/CUDA extension (cpp_extension.load / load_inline), a Triton kernel or a CuPy
kernel. A correct submission with none of them is pure PyTorch: verdict `no_kernel`. A build
that raised is kept too, with where it ran (import, `__init__`, forward) and its first error
line: a module that caught it and fell back to PyTorch is `no_kernel` for that reason. Builds
run with `verbose=False` whatever the submission asked: only then does torch put the compiler's
output into the error it raises.

It also records which loads compiled something in this process (ninja ran a step under
TORCH_EXTENSIONS_DIR) rather than loading what the compile pool had built: the build record's
`pool_compiled` and `slot_compiled`.

Every load builds where the compile pool's build is found again: in TORCH_EXTENSIONS_DIR, never
in a `build_directory` of the submission's own (commonly a temporary folder, private to the
pool's sandbox). `load`'s sources are handed to torch as copies named by their contents (under
TORCH_EXTENSIONS_DIR/.kbench-sources, written once), unless one includes a file beside it: a
submission that writes its sources when it runs, into a temporary folder or
its working folder, otherwise gives ninja newer or other files than the pool built, and the GPU
slot compiles again (on an H100, four CUDA-L1 kernels spent 20-69 s of the slot on it).

A build that failed in the compile pool is not compiled again on the GPU: the pool leaves its
error text in the build folder, keyed by the load's arguments, and the same load in the GPU
worker raises that text at once (a compile that fails takes tens of seconds of the GPU slot,
and the same sources and flags fail the same way). Loads whose flags name the `native`
architecture are not remembered: the pool has no GPU to resolve it.
"""

import hashlib
import inspect
import os
import re
import sys
from pathlib import Path

import torch.utils.cpp_extension as cpp_extension

from ..wire import cause

_seen = []
_failed = []
_compiled = []
_objects = []  # the shared objects the loads returned
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
            kwargs = _arguments(__name, args, kwargs)
            ext = kwargs.get("name", "?")
            before = _ninja_steps()
            remembered = _failure_file(__name, kwargs)
            try:
                if remembered is not None and remembered.is_file():
                    raise RuntimeError(remembered.read_text(errors="replace"))
                module = __original(**kwargs)
            except BaseException as exc:
                built = cause.is_build_failure(exc)
                why = cause.build_message(exc) if built else cause.line(exc)
                _failed.append({"extension": str(ext), "phase": phase, "cause": why, "drift": cause.drifted(str(exc)) if built else None})
                _remember_failure(remembered, exc)
                raise
            _seen.append(f"cpp_extension.{__name}:{ext}")
            _objects.append(getattr(module, "__file__", None))
            if any(steps > before.get(folder, 0) for folder, steps in _ninja_steps().items()):
                _compiled.append(f"cpp_extension.{__name}:{ext}")
            return module

        wrapped._kbench_watched = True
        setattr(cpp_extension, name, wrapped)


# The loaders' parameters in order, from this torch (the submission may pass any by position).
_PARAMETERS = {name: list(inspect.signature(getattr(cpp_extension, name)).parameters) for name in ("load", "load_inline")}


def _arguments(loader, args, kwargs):
    """The load's arguments as keywords, as kbench runs it: quiet (only then does torch put the
    compiler's output into the error it raises), in TORCH_EXTENSIONS_DIR rather than a build
    folder of its own, and `load`'s sources as copies named by their contents."""
    kwargs = {**dict(zip(_PARAMETERS[loader], args)), **kwargs, "verbose": False}
    kwargs.pop("build_directory", None)
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    sources = kwargs.get("sources")
    sources = [sources] if isinstance(sources, (str, os.PathLike)) else sources
    if loader == "load" and root and isinstance(sources, (list, tuple)):
        contents = [_standalone(s) for s in sources]
        if all(data is not None for data in contents):
            kwargs["sources"] = [_by_contents(Path(root), Path(s), data) for s, data in zip(sources, contents)]
    return kwargs


def _standalone(source):
    """The contents of `source` if it is a file that includes no file beside it (a copy
    elsewhere builds the same), else None."""
    path = Path(source) if isinstance(source, (str, os.PathLike)) else None
    if path is None or not path.is_file():
        return None
    data = path.read_bytes()
    quoted = re.findall(r'^\s*#\s*include\s*"([^"]+)"', data.decode(errors="replace"), re.MULTILINE)
    return None if any((path.parent / name).exists() for name in quoted) else data


def _by_contents(root, source, data):
    """A copy of `source` (holding `data`) named by its contents, written only if absent (an
    older copy keeps the time the pool's build saw); `source` itself where the copy cannot be
    written."""
    copy = root / ".kbench-sources" / hashlib.sha256(data).hexdigest()[:32] / source.name
    try:
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            partial = copy.with_name(f".{copy.name}.{os.getpid()}")
            partial.write_bytes(data)
            os.replace(partial, copy)
    except OSError:
        return str(source)
    return str(copy)


def _failure_file(loader, kwargs):
    """Where a failed build of this load is remembered, or None (no build folder, or flags that
    name the `native` architecture, which the pool has no GPU to resolve). Only the flags are
    searched: sources that say "alternative" once kept two CUDA-L1 failures from being
    remembered (20-56 s of the GPU slot each, on an H100)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    flags = " ".join(str(kwargs.get(k) or "") for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"))
    if not root or "native" in flags:
        return None
    text = repr((loader, sorted(kwargs.items())))
    return Path(root) / ".kbench-failed-builds" / hashlib.sha256(text.encode()).hexdigest()


def _remember_failure(path, exc):
    """Keep a build failure's text for the GPU worker."""
    if not remember or path is None or path.exists() or "Error building extension" not in str(exc):
        return
    try:
        # A build that failed before torch made its folder leaves TORCH_EXTENSIONS_DIR unmade.
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
    cupy_kinds = tuple(getattr(cupy, n) for n in ("RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel") if cupy and hasattr(cupy, n))
    for name, value in vars(module).items():
        if triton_jit is not None and isinstance(value, triton_jit):
            kinds.append(f"triton:{name}")
        elif cupy_kinds and isinstance(value, cupy_kinds):
            kinds.append(f"cupy:{name}")
    return kinds


def objects():
    """The files of the extensions the submission loaded (their kernels are its own)."""
    return [path for path in _objects if isinstance(path, str)]


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
