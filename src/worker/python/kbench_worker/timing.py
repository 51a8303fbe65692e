"""Timing v1: device time of one call, cold L2, launch latency kept out.

Per sample on the worker's default stream (many honest kernels launch on the legacy default
stream, so the harness never switches streams): read-flush a buffer of twice the L2 size,
enqueue a fixed sleep kernel as a blocker so the host has queued the whole call before it
starts, record the start event, call, record the stop event, synchronize. On the CPU a
sample is perf_counter around the call. The full protocol (adaptive stopping, NVML, audit
samples) replaces this module's loop, not its record: a list of per-call milliseconds.
"""

import time

import torch

from . import harness

# ~100 µs at H100 clocks: longer than PyTorch's host submission of most forwards.
BLOCKER_CYCLES = 200_000


class Timer:
    def __init__(self, device):
        self.device = device
        self.cuda = device.startswith("cuda")
        if self.cuda:
            l2 = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size
            self.flush_buffer = torch.ones(max(2 * l2, 1 << 20) // 4, device=device)
            self.flush_sink = torch.empty((), device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def sample(self, call):
        if not self.cuda:
            t0 = time.perf_counter()
            call()
            return (time.perf_counter() - t0) * 1e3
        torch.sum(self.flush_buffer, dim=0, out=self.flush_sink)
        torch.cuda._sleep(BLOCKER_CYCLES)
        self.start.record()
        call()
        self.stop.record()
        self.stop.synchronize()
        return self.start.elapsed_time(self.stop)

    def samples(self, call, n):
        return [self.sample(call) for _ in range(n)]


class KernelBenchTimer(Timer):
    """Upstream KernelBench's loop, for side-by-side comparison: before each call a 256 MB write
    (memset) flush, then start event, call, stop event, synchronize; no blocker, so the host's
    launch latency is inside the time. On the CPU, perf_counter around the call."""

    FLUSH_BYTES = 256 << 20

    def __init__(self, device):  # noqa: D107 - its own flush buffer, not Timer's read flush
        self.cuda = device.startswith("cuda")
        if self.cuda:
            self.flush_buffer = torch.empty(self.FLUSH_BYTES, dtype=torch.uint8, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def sample(self, call):
        if not self.cuda:
            t0 = time.perf_counter()
            call()
            return (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        self.flush_buffer.zero_()
        self.start.record()
        call()
        self.stop.record()
        torch.cuda.synchronize()
        return self.start.elapsed_time(self.stop)


class TimedModel:
    """One worker's timed arm: the model, one input set made from the timing seed, the timer.
    Set up on the first timing request, after the correctness trials, with memory released so
    the other worker on the GPU has room."""

    def __init__(self, model, task, seed, device, precision, mode="offline", warmup=3):
        harness.release_memory(device)
        self.model = model
        self.timer = KernelBenchTimer(device) if mode == "kernelbench" else Timer(device)
        self.inputs = harness.make_inputs(task, seed, device, precision)
        for _ in range(warmup):
            harness.forward(model, self.inputs, 0)
        harness.synchronize(device)

    def samples(self, n):
        with torch.no_grad():
            return self.timer.samples(lambda: self.model(*self.inputs), n)
