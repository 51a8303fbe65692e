"""Environment probe: what kbench records with every run and what `kbench doctor` checks."""

import importlib.util
import os
import platform
import re
import shutil
import sys

from ..wire.protocol import error, serve


def facts():
    import torch
    import torch.utils.cpp_extension as cpp_extension

    found = {
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "gpus": [],
        "cuda_home": cpp_extension.CUDA_HOME,
        "nvcc": shutil.which("nvcc") or (cpp_extension.CUDA_HOME and shutil.which("nvcc", path=f"{cpp_extension.CUDA_HOME}/bin")),
        "ninja": cpp_extension.is_ninja_available(),
        "cxx": shutil.which("c++") or shutil.which("g++"),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
    if found["cuda_available"]:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            found["gpus"].append(
                {
                    "index": i,
                    "name": p.name,
                    # Keys the cached speed-of-light ceilings (kbench's sol.rs); older torch has none.
                    "uuid": str(p.uuid) if getattr(p, "uuid", None) is not None else None,
                    "capability": f"{p.major}.{p.minor}",
                    "memory_bytes": p.total_memory,
                    "sm_count": p.multi_processor_count,
                    "l2_bytes": p.L2_cache_size,
                }
            )
    found["cutlass"] = cutlass()
    return found


def cutlass():
    """CUTLASS's headers as CUDA-L2's kernels find them (`kbench import cuda-l2`): $CUTLASS_DIR,
    else the nvidia-cutlass package's copy (located, not imported: its imports need packages the
    headers do not). "VERSION at FOLDER", or None."""
    root = os.environ.get("CUTLASS_DIR")
    if not root:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = os.path.join(list(spec.submodule_search_locations)[0], "source")
    version = os.path.join(root, "include", "cutlass", "version.h")
    if not os.path.isfile(version):
        return None
    with open(version) as f:
        text = f.read()
    parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return f"{'.'.join(m.group(1) if m else '?' for m in parts)} at {root}"


def commands(channel):
    """The probe's table: command -> handler."""
    return {"probe": lambda req: {"facts": facts()}}


def failure(cmd, exc):
    return error("probe", f"{type(exc).__name__}: {exc}", exc)


def run(channel):
    serve(channel, commands(channel), failure)
