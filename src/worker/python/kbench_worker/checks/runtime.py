"""Runtime checks on the candidate worker's process state around each call.

`runtime.thread_count`, `runtime.l2_persist_limit` and `precision.tf32_flags`: a submission can
leave work running on a thread of its own, make inputs survive the L2 flush by raising the
persisting-L2 limit, or switch fp32 math to TF32. Baselines are taken before the submission is
imported; each check returns (outcome, evidence) for `log.Log.run` or raises
`errors.TamperError`.
"""

import _thread
import ctypes
import functools
import os
import sys
import time
from pathlib import Path

import torch

from ..wire.errors import TamperError
from ..wire.messages import CheckName

# How long a new OS thread with no thread state is waited for: a thread that just started gets to
# count itself as a Python thread, one that just ended to leave the OS's list of threads.
SETTLE_S = 0.05

# cudaLimitPersistingL2CacheSize in cudaLimit (CUDA runtime API).
_PERSISTING_L2 = 0x06

# torch >= 2.9 spells the TF32 switches as fp32_precision ("ieee" = true fp32) beside the
# legacy allow_tf32 flags; a submission may use either, so both are read and reset.
_PRECISION_SWITCHES = (
    "fp32_precision",
    "cuda.matmul.fp32_precision",
    "cudnn.fp32_precision",
    "cudnn.conv.fp32_precision",
    "cudnn.rnn.fp32_precision",
)


def sm_clock(device):
    """A reader of the device's current SM clock in MHz through NVML (nvidia-ml-py), read only;
    None on the CPU or where NVML cannot be reached. The device is found by its UUID, so the
    reading is this GPU's whatever CUDA_VISIBLE_DEVICES maps."""
    if not device.startswith("cuda"):
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(torch.device(device)).uuid)
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001 - no nvidia-ml-py, no driver library, an unknown UUID
        return None
    return lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)


def warm_thread_pools(device):
    """Start torch's intra-op CPU pool (and the device's libraries) before the baseline thread
    count: torch's first parallel CPU op starts a thread per core, which is not the
    submission's doing."""
    a = torch.ones(256, 256)
    (a @ a).sum()
    torch.ones(1 << 20).sum()
    if device.startswith("cuda"):
        b = torch.ones(256, 256, device=device)
        (b @ b).sum().item()


class Threads:
    """A census of the process's threads: its OS threads (``/proc/self/task``, which lists native
    threads too), the interpreter's thread states (by ids unique for the process's life, where the
    OS and ``threading`` reuse a thread's id) and each Python thread's outermost frame (held, so a
    thread with a Python frame is told new from old by that frame object).

    The candidate takes one before it imports the submission, once torch's intra-op pool and, on
    a GPU, the CUDA context and cuBLAS have started their threads (`warm_thread_pools`); every
    thread alive after a call that was not alive then is the submission's, or one that a library
    started for it."""

    def __init__(self):
        self.count = _thread._count()
        self.states = _thread_states()
        self.roots = {id(root): root for root in map(_root, sys._current_frames().values())}
        self.tids = _tids()

    def check(self):
        """`runtime.thread_count`: a thread still alive after forward returned can do the work
        the timed call skipped, so every thread that was not alive at the census fails, but those
        that torch or Triton started (inductor's compile pool, Triton's async compile, tqdm's
        monitor), which warn. A Python thread is named by where its code starts; one whose target
        is a builtin (an extension's launch function) has no frame to show, yet has a thread
        state: new states are counted up to what ``_thread._count`` allows (C code makes states
        for its own threads calling into Python, briefly), so a thread ending during the call
        hides no new one; a new frame outside the libraries is a thread of the submission's
        whatever started it (a ctypes callback on a native thread too). An OS thread with no
        thread state is a native one (libc's pthread_create, std::thread, an OpenMP pool of the
        submission's own): it fails. A new OS thread not yet seen as a Python thread is waited
        for up to `SETTLE_S`: a thread that ``_thread`` just started counts itself once it holds
        the GIL, and one that just ended leaves the OS's list shortly after ``join`` returned."""
        deadline = time.monotonic() + SETTLE_S
        found = self._new()
        while found["unseen"] > 0 and time.monotonic() < deadline:
            time.sleep(SETTLE_S / 10)
            found = self._new()
        python, native, library, tids = found["python"], found["native"], found["library"], found["tids"]
        counts = f"OS threads {len(self.tids)} before the import, {tids} now"
        if python > 0:
            where = ", ".join(found["own"][:4] + ["no Python frame"] * (python > len(found["own"])))
            raise TamperError(f"{CheckName.RUNTIME_THREAD_COUNT}: forward left {python} Python thread(s) running ({where}; {counts})")
        if native > 0:
            raise TamperError(f"{CheckName.RUNTIME_THREAD_COUNT}: forward left {native} native thread(s) running, with no Python thread state ({counts})")
        if library:
            return "warn", f"{len(library)} torch/Triton thread(s) ({', '.join(library)}); {counts}"
        return "pass", f"no new thread ({counts})"

    def _new(self):
        """The threads alive now that were not at the census: Python threads of the
        submission's (``python``, those with a frame named in ``own``) and of the libraries
        (``library``), native threads (``native``), and the new OS threads neither Python count
        holds yet (``unseen``)."""
        tids = _tids()
        states = _thread_states()
        started = len(states - self.states)
        ended = len(self.states - states)
        new = [f for f in sys._current_frames().values() if id(_root(f)) not in self.roots]
        library = [f for f in new if _library_thread(f)]
        own = [f for f in new if not any(f is lib for lib in library)]
        python = max(len(own), min(started, _thread._count() - self.count + ended) - len(library))
        return {
            "python": python,
            "own": [_entry(f) for f in own],
            "library": [_entry(f) for f in library],
            "native": len(tids - self.tids) - started,
            "unseen": len(tids - self.tids) - python - len(library),
            "tids": len(tids),
        }


def _thread_states():
    """The ids of the interpreter's thread states (``PyThreadState_GetID``), read with the GIL
    held."""
    api = ctypes.pythonapi
    ids = set()
    state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while state:
        ids.add(api.PyThreadState_GetID(state))
        state = api.PyThreadState_Next(state)
    return ids


def _declare_thread_state_api():
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_Get.argtypes = []
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    api.PyThreadState_GetID.restype = ctypes.c_uint64
    api.PyThreadState_GetID.argtypes = [ctypes.c_void_p]


_declare_thread_state_api()


def _root(frame):
    """A thread's outermost frame."""
    while frame.f_back is not None:
        frame = frame.f_back
    return frame


def _tids():
    """The ids of the process's OS threads, native ones included."""
    return set(os.listdir("/proc/self/task"))


def _bottom(frame):
    """The frames of a thread from its first (outermost) call on, skipping threading's own."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    return [f for f in reversed(stack) if Path(f.f_code.co_filename).name != "threading.py"]


def _entry(frame):
    """Where a thread started: file and function of its outermost frame outside threading.py."""
    calls = _bottom(frame)
    if not calls:
        return "a builtin target"
    code = calls[0].f_code
    return f"{Path(code.co_filename).name}:{code.co_name}"


def _library_roots():
    """torch, and the libraries it starts threads of when loaded: Triton (async compile), tqdm
    (inductor's progress bars start tqdm's monitor thread)."""
    roots = [Path(torch.__file__).parent]
    for name in ("triton", "tqdm"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.append(Path(module.__file__).parent)
    return [str(r) + os.sep for r in roots]


def _library_thread(frame):
    """A thread that torch or Triton started (inductor's compile pool reader, Triton's async
    compile), judged by where its own code starts: a submission's target is its own function,
    or a builtin (no Python frame outside threading.py). A worker of the standard library's
    thread pool starts in the standard library: it is torch's when its pool is inductor's."""
    calls = _bottom(frame)
    if not calls:
        return False
    if calls[0].f_code.co_filename.startswith(tuple(_library_roots())):
        return True
    ref = calls[0].f_locals.get("executor_reference") if calls[0].f_code.co_name == "_worker" else None
    pool = ref() if callable(ref) else None
    return pool is not None and pool is _inductor_pool()


def _inductor_pool():
    """The thread pool torch.compile compiles in (``AsyncCompile.pool``), once it exists."""
    module = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(module, "AsyncCompile", None), "pool", None)
    made = getattr(pool, "cache_info", None)
    return pool() if made is not None and made().currsize else None


def _cudart():
    """The CUDA runtime torch loaded (found in /proc/self/maps), else one by its usual names."""
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        maps = []
    paths = [line.split(None, 5)[-1] for line in maps if "libcudart.so" in line]
    for name in dict.fromkeys(paths + ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        fn = lib.cudaDeviceGetLimit
        fn.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    return None


class L2Limit:
    """`runtime.l2_persist_limit` (GPU): the persisting-L2 limit as it was before the import.
    Persisting lines survive the timer's L2 flush; the baseline is not necessarily 0 (an H100
    VM read 9,830,400 bytes before any submission ran)."""

    def __init__(self):
        self._get = _cudart()
        self.baseline, self.why = self._read() if self._get else (None, "libcudart could not be loaded")

    def _read(self):
        value = ctypes.c_size_t()
        status = self._get(ctypes.byref(value), _PERSISTING_L2)
        if status != 0:
            return None, f"cudaDeviceGetLimit returned error {status}"
        return value.value, ""

    def check(self):
        if self.baseline is None:
            return "skip", self.why
        now, why = self._read()
        if now is None:
            return "skip", why
        if now != self.baseline:
            raise TamperError(f"{CheckName.RUNTIME_L2_PERSIST_LIMIT}: the persisting-L2 limit went from {self.baseline:,} to {now:,} bytes")
        return "pass", f"persisting-L2 limit {now:,} bytes, as before the import"


def _backend(path):
    return functools.reduce(getattr, path.split("."), torch.backends)


def _switch(path):
    """The object that holds switch ``path`` (under torch.backends) and the switch's name."""
    parent, _, name = path.rpartition(".")
    return (_backend(parent) if parent else torch.backends), name


def strict_fp32():
    """True fp32 for matmuls and convolutions (cuDNN allows TF32 by default): the reference must
    be exact fp32, and a candidate gets no free TF32 speedup."""
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for path in _PRECISION_SWITCHES:
        holder, name = _switch(path)
        if hasattr(holder, name):
            setattr(holder, name, "ieee")


def _tf32_on():
    """The TF32 switches that are on (a getter that raises means legacy and new APIs were
    mixed, which only happens when something set one)."""
    legacy = {
        "float32_matmul_precision": lambda: torch.get_float32_matmul_precision() != "highest",
        "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    }
    on = []
    for name, read in legacy.items():
        try:
            if read():
                on.append(name)
        except RuntimeError:
            on.append(name)
    for path in _PRECISION_SWITCHES:
        try:
            value = _backend(path)
        except AttributeError:
            continue
        if value != "ieee":
            on.append(path)
    return on


def tf32_flags():
    """`precision.tf32_flags`: a submission that switched TF32 on gets true fp32 back; a warning,
    since the switch is neutralised and `precision.fp64_error_ratio` judges real precision."""
    on = _tf32_on()
    if not on:
        return "pass", "TF32 off"
    strict_fp32()
    return "warn", f"the submission switched on {', '.join(on)}; reset to true fp32"
