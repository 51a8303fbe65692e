"""The C++ names a submission's built extension holds, for `profile.library_share`.

A kernel a submission instantiates from a header-only template library (CUTLASS's
`cutlass::device_kernel<...>`, CuTe, CUB) carries that library's namespace, as the library's own
kernels do; what makes it the submission's is that its code is in the submission's shared object.
The host code nvcc writes registers every kernel of the object with the CUDA runtime under the
device's mangled name, a string in the object's read-only data: the name the profiler reports.
(The object's defined symbols are not enough: nvcc 13 gives a template kernel's host stub
internal linkage, `_ZN7cutlassL13device_kernel...`, not the device's `_ZN7cutlass13device_kernel...`,
and CUDA-L2's CUTLASS kernels read as library code on an H100.) Read here as every `_Z` string of
the file, demangled with the C++ runtime's `__cxa_demangle` as the profiler demangles kernel names.
"""

import ctypes
import re

_MANGLED = re.compile(rb"_Z[\x21-\x7e]+(?=\0)")


def names(paths):
    """The mangled names (`_Z...`) held in the files at ``paths``, and their demangled forms;
    files that cannot be read add nothing."""
    found = set()
    for path in paths:
        try:
            with open(path, "rb") as f:
                found |= {m.decode("ascii") for m in _MANGLED.findall(f.read())}
        except OSError:
            continue
    return found | {d for d in map(_demangle, found) if d}


def _demangle(name):
    """`__cxa_demangle`'s text for ``name`` (as kineto names kernels), or None."""
    if _cxa is None:
        return None
    status = ctypes.c_int()
    text = _cxa(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not text:
        return None
    try:
        return ctypes.string_at(text).decode("utf-8", "replace")
    finally:
        _free(text)


def _runtime():
    try:
        cxx, libc = ctypes.CDLL("libstdc++.so.6"), ctypes.CDLL(None)
    except OSError:
        return None, None
    cxa = cxx.__cxa_demangle
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return cxa, libc.free


_cxa, _free = _runtime()
