"""python -m kbench_worker {compile|reference|candidate|probe|inspect|check}"""

import sys
import time

from .protocol import Channel

STARTED = time.perf_counter()


def main():
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    channel = Channel()
    if role == "compile":
        from . import compile as worker
    elif role == "reference":
        from . import reference as worker
    elif role == "candidate":
        from . import candidate as worker
    elif role == "probe":
        from . import probe as worker
    elif role == "check":
        from . import static_check as worker  # standard library only: never imports torch
    elif role == "inspect":
        from . import inspect as worker
    else:
        sys.exit(f"unknown role {role!r}: expected compile, reference, candidate, probe, inspect or check")
    if role in ("reference", "candidate"):
        # Pay for torch's import and the CUDA context before the first request: kbench starts
        # these workers ahead of need, while the previous evaluation runs.
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()
        channel.startup_s = time.perf_counter() - STARTED
    worker.run(channel)


if __name__ == "__main__":
    main()
