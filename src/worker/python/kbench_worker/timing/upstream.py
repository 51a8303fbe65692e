"""`--mode kernelbench`: upstream KernelBench's timing loop, for side-by-side comparison."""

import time

import torch

from ..task import models
from ..task.inputs import make_inputs
from .seeds import derive_seed


class KernelBenchModel:
    """Upstream KernelBench's loop, for side-by-side comparison: one input set, 3 warm-up calls,
    then per sample a 256 MB write (memset) flush, start event, call, stop event, synchronize;
    no blocker, so the host's launch latency is inside the time. On the CPU, perf_counter."""

    FLUSH_BYTES = 256 << 20

    def __init__(self, model, task, seed_base, device, precision, warmup=3):
        models.release_memory(device)
        self.model = model
        self.cuda = device.startswith("cuda")
        self.inputs = make_inputs(task, derive_seed(seed_base, 0), device, precision)
        if self.cuda:
            self.flush_buffer = torch.empty(self.FLUSH_BYTES, dtype=torch.uint8, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)
        for _ in range(warmup):
            models.forward(model, self.inputs, 0)
        models.synchronize(device)

    def samples(self, n):
        out = []
        with torch.no_grad():
            for _ in range(n):
                if not self.cuda:
                    t0 = time.perf_counter()
                    self.model(*self.inputs)
                    out.append((time.perf_counter() - t0) * 1e3)
                    continue
                torch.cuda.synchronize()
                self.flush_buffer.zero_()
                self.start.record()
                self.model(*self.inputs)
                self.stop.record()
                torch.cuda.synchronize()
                out.append(self.start.elapsed_time(self.stop))
        return {"samples_ms": out}
