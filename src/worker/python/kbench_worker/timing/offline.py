"""kbench's timing (`--mode offline`): device time of one call with cold L2 and launch latency kept
out (docs/design/timing.md 10.2), and the warm-up before the samples.

One sample, on the worker's default stream (many honest kernels launch on the legacy default
stream, so kbench never switches streams), after a device-wide synchronize:

1. fresh input contents are drawn for the input set about to be used (one of up to four,
   rotating, so addresses repeat only every fourth call) from the sample's seed;
2. a blocker, a fixed sleep kernel long enough that the host has queued the whole sample before
   it ends, so host submission stays outside the events; whether it was long enough is seen
   directly: if the start event has already completed by the time the host has queued the stop
   event, the stream went idle during submission and the sample is counted as an overflow
   (kbench then lengthens the blocker and takes the round again);
3. behind the blocker, the new contents are written into the set in place, without bumping its
   version counter, so no cache keyed on pointer, identity, version or contents can answer the
   call (`timing.fresh_inputs_per_call`), and no work started on another stream while the
   blocker holds this one can compute on them (it reads the previous contents and fails the
   timed output check); then a read-based flush of twice the L2 size;
4. start event, the call, stop event; the time between them (for calls under 10 µs, a burst:
   several calls on distinct input sets, all written before the flush, divided by their number).

kbench (Rust) drives the schedule: interleaved blocks of samples across the reference and the
candidate worker, adaptive stopping, NVML telemetry, the audit and envelope checks. Each arm
copies the output of every timed call into a pool after the call's stop event (`kept.Pool`);
kbench has the reference worker read one slot of the candidate's pool after each checked round
(`timing.timed_output_check`), the reference's pool only does the same work, so neither arm's
wall time holds more (`timing.wall_envelope`). The inputs' seeds are `seeds`'.

On the CPU a sample is perf_counter around the call, with the same fresh inputs.
"""

import statistics
import time

import torch

from ..checks import outputs
from ..task import models
from ..task.inputs import make_inputs
from . import kept
from .seeds import derive_seed

# Input sets per arm, memory permitting (docs/design/timing.md step 5).
INPUT_SETS = 4
# The extra input sets may take this share of the GPU's memory: the other worker times on it too.
EXTRA_SETS_SHARE = 0.1
# Warm-up (step 10): at least WARMUP_CALLS calls, then on until the calls are steady (the median
# of the last WARMUP_WINDOW within WARMUP_STEADY of the median of the WARMUP_WINDOW before them) or
# WARMUP_MS of device time is spent; capped at WARMUP_CAP_S.
WARMUP_CALLS = 10
WARMUP_WINDOW = 4
WARMUP_STEADY = 0.02
WARMUP_MS = 100.0
WARMUP_CAP_S = 2.0
# The warm-up's blocker, in µs: three times the previous call's submission, within these bounds.
WARMUP_BLOCKER_MIN_US = 50.0
WARMUP_BLOCKER_MAX_US = 100_000.0


def warmed(times):
    """Whether a warm-up with these call times (ms) may stop: enough calls, and either steady
    (a forward that has stopped getting faster: caches, clocks and lazy set-up settled) or
    WARMUP_MS of device time spent, however they vary."""
    if len(times) < WARMUP_CALLS:
        return False
    if sum(times) >= WARMUP_MS:
        return True
    last = statistics.median(times[-WARMUP_WINDOW:])
    before = statistics.median(times[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    return abs(last - before) <= WARMUP_STEADY * before


class TimedModel:
    """One worker's timed arm: its model, rotating input sets refreshed before every call, and
    the device helpers (flush buffer, events). Set up on the first timing request, after the
    correctness trials, with memory released so the other worker on the GPU has room.

    ``beside``: another arm of this worker whose input sets and flush buffer this one uses, in
    place (the control arm of the process check times beside the candidate's, `arms.Control`).
    Nothing is released then, and nothing large allocated before the calls: their outputs go
    where that arm's went, to the blocks it left cached."""

    def __init__(self, model, task, seed_base, device, precision, kept_path=None, beside=None, shared=False):
        if beside is None:
            models.release_memory(device)
        self.model, self.task, self.base = model, task, seed_base
        self.device, self.precision = device, precision
        self.cuda = device.startswith("cuda")
        self.kept_path = kept_path
        self.shared = shared  # the pool is read by the reference worker (`kept.Pool`)
        self.pool = None
        self.taken = 0
        # The block being taken: its seed (None in the warm-up) and draws so far.
        self.block_seed, self.drawn = None, 0
        first = beside.sets[0] if beside is not None else make_inputs(task, derive_seed(seed_base, 0), device, precision)
        sets = INPUT_SETS
        # Refill by copy (addresses fixed) unless a set is too large to hold twice.
        self.swap = False
        self.budget = None  # bytes the extra sets may take (None: no limit, on the CPU)
        if self.cuda:
            # At most a tenth of the GPU's memory for the extra sets: the other worker times on
            # the same GPU, and cuDNN picks slower algorithms when its workspace does not fit
            # (an identity run measured a 0.76 "speedup" on a transposed convolution that way).
            # The share holds the sets beyond the first and the new contents drawn for a sample
            # before they are written into its set.
            _, total = torch.cuda.mem_get_info()
            self.budget = int(EXTRA_SETS_SHARE * total)
            sets = max(1, min(INPUT_SETS, self.budget // max(models.nbytes(first), 1)))
            # A set over that share (a 16 GiB pooling input) gets new contents by releasing its
            # storage first: a copy would need two at once, in both workers.
            self.swap = models.nbytes(first) > self.budget
            l2 = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size
            if beside is None:
                self.flush_buffer = torch.ones(max(2 * l2, 1 << 20) // 4, device=device)
                self.flush_sink = torch.empty((), device=device)
            else:
                self.flush_buffer, self.flush_sink = beside.flush_buffer, beside.flush_sink
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)
            self.blocked = torch.cuda.Event(enable_timing=True)
        self.sets = beside.sets if beside is not None else [first] + [make_inputs(task, derive_seed(seed_base, k), device, precision) for k in range(1, sets)]

    def _draw(self):
        """The next draw's index in its block, input set, new contents and forward seed. The
        contents are made here but written into the set by `_stage`, behind the blocker; a set
        refilled by swapping storage gets its new storage at once (there is no room for a copy)."""
        k, j = self.taken, self.drawn
        self.taken += 1
        self.drawn += 1
        seed = derive_seed(self.base, k) if self.block_seed is None else derive_seed(self.block_seed, j)
        buffers = self.sets[k % len(self.sets)]
        tensors = [x for x in buffers if isinstance(x, torch.Tensor)]
        if self.swap:
            for old in tensors:
                old.data = torch.empty(0, dtype=old.dtype, device=old.device)
        fresh = [x for x in make_inputs(self.task, seed, self.device, self.precision) if isinstance(x, torch.Tensor)]
        pairs = list(zip(tensors, fresh))
        if self.swap:
            for old, new in pairs:
                old.data = new
            pairs = []
        return j, buffers, pairs, derive_seed(seed, 0)

    def _draws(self, burst=1):
        """The new contents of one sample's `burst` input sets: the burst's other calls first,
        the sample's own last."""
        return [self._draw() for _ in range(burst)]

    def _stage(self, drawn, blocker_cycles):
        """Stage one drawn sample: set its forward seed, then queue the blocker and, behind it,
        the writes of the new contents into the sets and the L2 flush. Nothing can compute on a
        sample's inputs before the blocker ends: work a call starts on another stream while the
        blocker holds this one reads the sets' previous contents, and the timed output check
        fails it (a set refilled by swapping storage, over a tenth of the GPU's memory, is the
        exception: its new contents exist before the blocker). Returns (j, inputs, the other
        calls as `_calls` takes them)."""
        *rest, (k, inputs, _, forward_seed) = drawn
        models.seed_generators(forward_seed)
        if self.cuda and blocker_cycles:
            torch.cuda._sleep(blocker_cycles)
        for _, _, pairs, _ in drawn:
            for old, new in pairs:
                # The same object and version counter: only the contents are new.
                old.data.copy_(new)
            # The new contents are in the sets now: their own memory goes back before the call
            # (a 6 GB input held twice beside its output and the pool ran a task out of memory).
            pairs.clear()
        if self.cuda:
            torch.sum(self.flush_buffer, dim=0, out=self.flush_sink)
        return k, inputs, [(j, sets, seed) for j, sets, _, seed in rest]

    def warmup(self, cycles_per_us):
        """Calls until the arm is warm (`warmed`: >= 10 calls, then steady or 100 ms of device
        time, at most 2 s);
        returns the median call time, the host's submission time (90th percentile), which
        sizes the blocker, and the pool the timed calls' outputs go to, shaped after the last
        warm-up call's output. After the first call each call is staged behind a blocker of three
        times the previous call's submission, so the median is device time without launch
        latency (the burst rule compares it with 10 µs), and only the second call waits out the
        first, cold one's."""
        times, submits = [], []
        began = time.perf_counter()
        with torch.no_grad():
            while not warmed(times):
                out = None  # the previous call's output goes before the next draw (`samples`)
                blocker_us = min(max(WARMUP_BLOCKER_MIN_US, 3e3 * submits[-1]), WARMUP_BLOCKER_MAX_US) if submits else 0.0
                self._sync()
                drawn = self._draws()
                t0 = time.perf_counter()
                _, inputs, _ = self._stage(drawn, int(blocker_us * cycles_per_us))
                t1 = time.perf_counter()
                if self.cuda:
                    self.start.record()
                out = self.model(*inputs)
                if self.cuda:
                    self.stop.record()
                t2 = time.perf_counter()
                submits.append((t2 - t0) * 1e3)
                if self.cuda:
                    self.stop.synchronize()
                    times.append(self.start.elapsed_time(self.stop))
                else:
                    times.append((t2 - t1) * 1e3)
                if time.perf_counter() - began > WARMUP_CAP_S and len(times) >= 2:
                    break
            self.pool = kept.Pool(out, self.kept_path, self.shared)
            del out
        steady = submits[2:] or submits
        return {
            "median_ms": statistics.median(times[1:] or times),
            "submit_ms": sorted(steady)[int(0.9 * (len(steady) - 1))],
            "calls": len(times),
            "sets": len(self.sets),
            "kept": self.pool.describe(),
        }

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def _grow(self, count):
        """At least `count` input sets, memory permitting (the extra sets and the burst's `count`
        new contents within the share): each call of a burst has its own."""
        size = models.nbytes(self.sets[0])
        while len(self.sets) < count and (self.budget is None or size * (len(self.sets) + count) <= self.budget):
            self.sets.append(make_inputs(self.task, derive_seed(self.base, len(self.sets)), self.device, self.precision))
        return min(count, len(self.sets))

    def _calls(self, model, first, rest):
        """The sample's calls: the first (its seed set by `_stage`), then the burst's others,
        each after its own forward seed; returns each call's (draw index, output)."""
        j, inputs = first
        outs = [(j, model(*inputs))]
        for j, inputs, seed in rest:
            models.seed_generators(seed)
            outs.append((j, model(*inputs)))
        return outs

    def samples(self, n, blocker_cycles, audits, burst=1, seed=None, keep=0):
        """`n` samples, then `audits` audit calls (timing.audit). With `burst` > 1 (short calls,
        docs/design/timing.md step 8) a sample is that many calls on distinct input sets, all
        refreshed before the one flush, under one pair of events, divided by their number. The
        block's draws come from ``seed``; the output of draw ``j`` goes to slot ``keep + j`` of
        the pool, after the sample's stop event."""
        samples, overflows = [], 0
        burst = self._grow(burst)
        self.block_seed, self.drawn = seed, 0
        with torch.no_grad():
            for _ in range(n):
                self._sync()
                drawn = self._draws(burst)
                if self.cuda:
                    j, inputs, rest = self._stage(drawn, blocker_cycles)
                    self.start.record()
                    outs = self._calls(self.model, (j, inputs), rest)
                    self.stop.record()
                    overflows += self.start.query()
                    self.stop.synchronize()
                    samples.append(self.start.elapsed_time(self.stop) / burst)
                else:
                    j, inputs, rest = self._stage(drawn, 0)
                    t0 = time.perf_counter()
                    outs = self._calls(self.model, (j, inputs), rest)
                    samples.append((time.perf_counter() - t0) * 1e3 / burst)
                outputs.distinct_calls(outs)
                for j, out in outs:
                    self.pool.keep(keep + j, out)
                # Every output goes before the next draw, the loop's name for the last one too:
                # the next call's outputs then land in the same cached blocks (where a kernel's
                # outputs lie can move its time: `arms.Control`).
                del outs, out
            reply = {"samples_ms": samples, "overflows": overflows, "audit_ms": [], "audit_excess_ms": [], "burst": burst}
            for _ in range(audits):
                wall, excess = self._audit(blocker_cycles)
                reply["audit_ms"].append(wall)
                reply["audit_excess_ms"].append(excess)
            # Every copy into the pool lands before the reply: the reference reads it next.
            self._sync()
        return reply

    def _audit(self, blocker_cycles):
        """One audit call: the host clock from an idle GPU to a device-wide synchronize after the
        call, against the device's own interval from the blocker's start to the stop event.
        Work left on another stream lies after the stop event, so it shows as excess; host time
        (launch gaps, host synchronizations inside the call) lies inside the interval, so an
        honest call's excess is only the synchronize's latency, however host-bound the call.
        The call is staged as a sample is, behind the samples' blocker, so it cannot tell an
        audit from a sample (behind a shorter one, a GPU measured the stream idle again by the
        time a call asked). Returns (the call's wall time without the blocker, the excess), in ms."""
        self._sync()
        drawn = self._draws()
        if not self.cuda:
            _, inputs, _ = self._stage(drawn, 0)
            t0 = time.perf_counter()
            self.model(*inputs)
            return (time.perf_counter() - t0) * 1e3, 0.0
        t0 = time.perf_counter()
        self.blocked.record()
        _, inputs, _ = self._stage(drawn, blocker_cycles)
        self.start.record()
        out = self.model(*inputs)
        self.stop.record()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        del out
        return wall - self.blocked.elapsed_time(self.start), wall - self.blocked.elapsed_time(self.stop)
