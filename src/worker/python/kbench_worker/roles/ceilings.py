"""Speed-of-light ceilings of the GPU this worker sees (docs/design/timing.md 10.4 item 18), about 2 s.

* ``copy_gbps``: a 1 GiB device-to-device copy, counting the bytes read and the bytes written;
* ``gemm_tflops``: an 8192^3 matmul per dtype: ``fp32`` with TF32 explicitly off, ``tf32``,
  ``bf16`` and ``fp16``.

Each is the best of a few timed runs (CUDA events, after one warm-up run): a ceiling is what the
GPU can reach, so the fastest run is the estimate and slower ones were disturbed (clock ramp,
power cap, a neighbour). A private ``torch.cuda._sleep`` holds the stream while the host
enqueues, so launch latency stays out of the time. Trusted role: it imports no task or
submission.

Request ``{"cmd": "ceilings"}``, reply ``{"ok": true, "ceilings": {...}}``.
"""

import time

from ..wire.protocol import error, serve

COPY_BYTES = 1 << 30
COPY_RUNS = 5
GEMM_N = 8192
GEMM_RUNS = 3
# (key, torch dtype name, allow_tf32 for float32 matmuls)
GEMM_DTYPES = (("fp32", "float32", False), ("tf32", "float32", True), ("bf16", "bfloat16", False), ("fp16", "float16", False))
# GPU cycles the stream sleeps ahead of each timed run (~0.5 ms): longer than the host needs to
# enqueue the events and the run.
HOLD_CYCLES = 1_000_000


def _best_ms(torch, fn, runs):
    """Fastest of `runs` event-timed calls of `fn`, after one untimed warm-up call."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(runs):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(HOLD_CYCLES)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def copy_gbps(torch):
    src = torch.ones(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _best_ms(torch, lambda: dst.copy_(src), COPY_RUNS)
    return 2 * COPY_BYTES / (ms / 1e3) / 1e9


def gemm_tflops(torch, dtype, allow_tf32):
    a = torch.randn(GEMM_N, GEMM_N, dtype=dtype, device="cuda")
    b = torch.randn(GEMM_N, GEMM_N, dtype=dtype, device="cuda")
    out = torch.empty(GEMM_N, GEMM_N, dtype=dtype, device="cuda")
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    try:
        ms = _best_ms(torch, lambda: torch.mm(a, b, out=out), GEMM_RUNS)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return 2 * GEMM_N**3 / (ms / 1e3) / 1e12


def measure():
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: ceilings are measured on a GPU only")
    started = time.perf_counter()
    found = {"copy_gbps": copy_gbps(torch), "gemm_tflops": {}}
    torch.cuda.empty_cache()
    for key, dtype, allow_tf32 in GEMM_DTYPES:
        found["gemm_tflops"][key] = gemm_tflops(torch, getattr(torch, dtype), allow_tf32)
        torch.cuda.empty_cache()
    found["gpu"] = torch.cuda.get_device_name(0)
    found["measured_s"] = time.perf_counter() - started
    return found


def commands(channel):
    """The ceilings worker's table: command -> handler."""
    return {"ceilings": lambda req: {"ceilings": measure()}}


def failure(cmd, exc):
    return error("ceilings", f"{type(exc).__name__}: {exc}", exc)


def run(channel):
    serve(channel, commands(channel), failure)
