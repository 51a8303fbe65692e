"""Notice whether a submission brings a kernel of its own.

kbench records which compiled or JIT kernels a submission created while it was imported and
built: a torch C++/CUDA extension (cpp_extension.load / load_inline), a Triton kernel or a CuPy
kernel. A correct submission with none of them is pure PyTorch: verdict `no_kernel`.
"""

import sys

import torch.utils.cpp_extension as cpp_extension

_seen = []


def watch_extensions():
    """Wrap cpp_extension's loaders before the submission imports them."""
    for name in ("load", "load_inline"):
        original = getattr(cpp_extension, name)

        def wrapped(*args, __original=original, __name=name, **kwargs):
            module = __original(*args, **kwargs)
            _seen.append(f"cpp_extension.{__name}:{kwargs.get('name', args[0] if args else '?')}")
            return module

        setattr(cpp_extension, name, wrapped)


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
