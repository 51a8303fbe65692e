"""python -m kbench_worker {compile|reference|candidate|probe|inspect|check|ceilings}"""

import faulthandler
import os
import sys
import time

from .wire.protocol import Channel

STARTED = time.perf_counter()


def die_with_parent():
    """Be killed when the process that started this worker ends: kbench, or the sandbox's
    `unshare`, which kbench's end kills. kbench asks for it before exec, but a change of uid
    (the sandbox's, when kbench is root) clears it, so it is asked again here, before any
    submission code runs."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def main():
    # A crash in native code (a submission's kernel wrapper, a driver) leaves its Python stack
    # in the worker's log instead of a bare signal.
    faulthandler.enable()
    die_with_parent()
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role == "reference":
        # Trusted: not dumpable, so /proc/<pid>/mem and /proc/<pid>/fd (its pipes) are closed to
        # processes without CAP_SYS_PTRACE, even of the same uid.
        import ctypes

        PR_SET_DUMPABLE = 4
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if role == "compile":
        # Builds (and the compilers they start) yield the CPU to the evaluating slots' workers,
        # whose start-up and load the pool's parallel builds otherwise slow several-fold.
        os.nice(10)
    channel = Channel()
    if role == "compile":
        from .roles import compile as worker
    elif role == "reference":
        from .roles import reference as worker
    elif role == "candidate":
        from .roles import candidate as worker
    elif role == "probe":
        from .roles import probe as worker
    elif role == "check":
        from . import static_check as worker  # standard library only: never imports torch
    elif role == "inspect":
        from .roles import inspect as worker
    elif role == "ceilings":
        from .roles import ceilings as worker
    else:
        sys.exit(f"unknown role {role!r}: expected compile, reference, candidate, probe, inspect, check or ceilings")
    if role in ("reference", "candidate"):
        # Pay for torch's import and the CUDA context before the first request: kbench starts
        # these workers ahead of need, while the previous evaluation runs.
        import torch
        import torch._dynamo  # noqa: F401 - see below
        import torch.profiler  # noqa: F401

        # Importing torch._dynamo rebinds library functions (torch.manual_seed gets a wrapper
        # that keeps dynamo out of it); many paths import it lazily on a GPU. Done here, before
        # the candidate snapshots the names it watches, so that library rebinding is not taken
        # for a submission's. CUDA is initialized here too, so the snapshot sees the GPU's
        # generators (`models.seed_generators`).
        if torch.cuda.is_available():
            torch.cuda.init()
        channel.startup_s = time.perf_counter() - STARTED
    worker.run(channel)


if __name__ == "__main__":
    main()
