"""`profile.library_share` (GPU): how much of one forward's GPU time ran the submission's kernels,
and every kernel's launches, which kbench compares with the reference's (`profile.reference_ops`).

A submission that computes with the reference's own aten/cuBLAS ops and launches a decorative
kernel passes every output check. Profiling one call and attributing each kernel's device time
to the submission (a `__global__` function or `@triton.jit` function it defines, or a kernel
whose full name the extension it built registers: a CUTLASS template it instantiated) or to a
library (everything else: cuBLAS, cutlass, nvjet, cuDNN, at::native, kernels torch.compile
generated) measures that; kbench applies the run's policy. Misreading a custom kernel as library
only hurts the submission, so library markers win over a matching short name; ATen's namespaces
win over everything.
"""

import ast
import re

# Kernels that are library code whatever the submission names its own: namespaces and name
# patterns of torch, CUTLASS, CUB, cuBLAS, cuDNN and inductor's generated Triton kernels.
_LIBRARY_NAMESPACES = {"at", "c10", "cutlass", "cute", "cub", "thrust", "flash", "cudnn", "cublas", "cublasLt"}
# ATen's kernels stay library code even where a submission compiles their templates itself.
_TORCH_NAMESPACES = {"at", "c10", "torch"}
_LIBRARY_PATTERN = re.compile(r"^(nvjet|sm\d+_xmma|cutlass|cudnn|cublas|cutensor)|^triton_(poi|red|per|tem)_")

# Words after `__global__` that are not the function's name.
_NOT_NAMES = {"__launch_bounds__", "__attribute__", "__maxnreg__", "alignas", "__cluster_dims__"}
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")


def defined_kernels(source):
    """Names of the kernels a submission defines in its source: `__global__` functions (in
    load_inline strings or anywhere else in the text) and `@triton.jit` functions."""
    names = set()
    for match in re.finditer(r"__global__\b", source):
        name = _first_call_name(source[match.end() : match.end() + 1000])
        if name:
            names.add(name)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_jit(d) for d in node.decorator_list):
            names.add(node.name)
    return names


def _first_call_name(text):
    """The first name followed by `(` in ``text`` that is not a qualifier, a qualifier's
    parenthesised arguments skipped (`__launch_bounds__(decltype(size(mma))::value)`)."""
    at = 0
    while (word := _CALLED.search(text, at)) is not None:
        if word.group(1) not in _NOT_NAMES:
            return word.group(1)
        depth = 0
        for at in range(word.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[at], 0)
            if depth == 0:
                break
        at += 1
    return None


def _is_jit(decorator):
    """`@triton.jit`, `@jit`, `@triton.jit(...)` (also numba's `@cuda.jit`: a kernel too)."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
    return name == "jit"


def _mangled_path(name):
    """The qualified name's parts of an Itanium-mangled symbol (_Z...), or None when it is not
    one this reader understands (templates stop it: the name is read before them)."""
    rest = name[2:].lstrip("L")
    nested = rest.startswith("N")
    rest = rest[1:].lstrip("rVK") if nested else rest
    parts = []
    while (m := re.match(r"(\d+)", rest)) is not None:
        length = int(m.group(1))
        start = len(m.group(1))
        parts.append(rest[start : start + length])
        rest = rest[start + length :]
        if not nested:
            break
    return parts or None


def _demangled_path(name):
    """The qualified name's parts of a demangled signature: `void ns::foo<float>(float const*)`
    gives ['ns', 'foo']; a plain name (Triton) gives itself."""
    text = name.replace("(anonymous namespace)", "anonymous")
    head, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            head.append(ch)
    words = "".join(head).split()
    return words[-1].split("::") if words else []


def kernel_path(name):
    """The parts of a kernel's qualified name, mangled or not."""
    path = _mangled_path(name) if name.startswith("_Z") else None
    return path or _demangled_path(name)


def is_custom(name, defined, built=frozenset()):
    """Whether a profiled kernel is one the submission defines: its full name is one the
    extension it built holds (``built``: `symbols.names`, so a CUTLASS template it instantiated
    is its own) outside torch's namespaces, or its own (unqualified) name is one of ``defined``
    (Triton's older names append `_0d1d2de`-style suffixes) and neither its namespace nor its
    name marks a library."""
    path = kernel_path(name)
    if name in built and not _TORCH_NAMESPACES & set(path[:-1]):
        return True
    if not path or _LIBRARY_NAMESPACES & set(path[:-1]) or _LIBRARY_PATTERN.search(path[-1]):
        return False
    own = path[-1]
    return any(own == d or re.fullmatch(rf"{re.escape(d)}_\d\w*", own) for d in defined)


def summarize(per_kernel, defined, busy_ms, built=frozenset()):
    """The reply's profile from ``per_kernel`` (name -> (launches, ms)): library share of GPU
    time, custom and total ms, the time the device was busy, and every kernel's launches and ms,
    whether it is the submission's own (`own`, `is_custom`), the longest first."""
    total = sum(ms for _, ms in per_kernel.values())
    launches = [{"name": name, "launches": count, "ms": ms, "own": is_custom(name, defined, built)} for name, (count, ms) in sorted(per_kernel.items(), key=lambda item: -item[1][1])]
    custom = sum(k["ms"] for k in launches if k["own"])
    return {
        "library_share": (total - custom) / total if total else 0.0,
        "custom_ms": custom,
        "total_ms": total,
        "busy_ms": busy_ms,
        "launches": launches,
    }


def busy(intervals):
    """Length of the union of (start, end) intervals: the time the device was busy, concurrent
    work counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def kernel_times(call):
    """Over one ``call()``, from torch's profiler: per kernel name, its launches and device
    milliseconds; and the milliseconds the device was busy (`busy`)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    per_kernel, intervals = {}, []
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            count, ms = per_kernel.get(event.name, (0, 0.0))
            per_kernel[event.name] = (count + 1, ms + event.time_range.elapsed_us() / 1e3)
            intervals.append((event.time_range.start / 1e3, event.time_range.end / 1e3))
    return per_kernel, busy(intervals)


def bracketed(call):
    """`call` for a kernel profiler that watches the process from outside and profiles only
    between cudaProfilerStart and cudaProfilerStop (``ncu --profile-from-start off``): once
    before, unwatched, so lazy set-up (cuBLAS handles, extensions built on first use, autotuning)
    stays out, then once between the two, the device idle at both ends."""
    import torch

    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        call()
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()
