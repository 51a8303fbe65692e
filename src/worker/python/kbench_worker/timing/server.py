"""`--mode server`: isolated requests reaching an idle GPU, each timed by the device and the host."""

import statistics
import time

import torch

from ..checks import runtime
from ..task import models
from ..task.inputs import make_inputs
from .offline import INPUT_SETS
from .seeds import derive_seed


class ServerModel:
    """The server scenario (docs/design/timing.md, "Server-scenario mode"): isolated requests reaching an
    idle GPU after an exponential gap (drawn by kbench), on rotating input sets with no flush
    (the gap and the rotation make them cold) and no blocker: host submission is part of a
    request's latency. Per request: host clock, start event, call, stop event, synchronize, host
    clock; the device time and the request latency are both returned."""

    def __init__(self, model, task, seed_base, device, precision, warmup=3):
        models.release_memory(device)
        self.model, self.device = model, device
        self.cuda = device.startswith("cuda")
        self.sets = [make_inputs(task, derive_seed(seed_base, k), device, precision) for k in range(INPUT_SETS)]
        self.taken = 0
        self.clock = runtime.sm_clock(device)
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)
        times = [self.request()[0] for _ in range(warmup)]
        self.warm = {"median_ms": statistics.median(times), "calls": warmup}

    def request(self):
        inputs = self.sets[self.taken % len(self.sets)]
        self.taken += 1
        with torch.no_grad():
            t0 = time.perf_counter()
            if self.cuda:
                self.start.record()
            self.model(*inputs)
            if self.cuda:
                self.stop.record()
                self.stop.synchronize()
            latency = (time.perf_counter() - t0) * 1e3
        return (self.start.elapsed_time(self.stop) if self.cuda else latency), latency

    def requests(self, gaps_ms):
        """Each request after its idle gap, with the SM clock read just before it (None without
        NVML), since an idle GPU clocks down between requests."""
        device, latency, clocks = [], [], []
        for gap in gaps_ms:
            time.sleep(gap / 1e3)
            clocks.append(self.clock() if self.clock else None)
            d, lat = self.request()
            device.append(d)
            latency.append(lat)
        return {"samples_ms": device, "latency_ms": latency, "sm_mhz": clocks}
