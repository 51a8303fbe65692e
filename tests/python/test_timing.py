"""The timing worker's CPU path: seeds shared with kbench, fresh inputs per call, kept outputs."""

import sys
import time
import types
import weakref

import pytest
import torch

from kbench_worker.task import models
from kbench_worker.task.inputs import make_inputs
from kbench_worker.timing import arms, kept, modes, offline
from kbench_worker.timing.seeds import derive_seed
from kbench_worker.wire import errors, transfer
from kbench_worker.wire.messages import decode


def test_seeds_match_kbench():
    # pipeline/tests.rs asserts the same value for derive_seed(42, 3).
    assert derive_seed(42, 3) == 542_934_981_142_619
    assert derive_seed(42, 3) != derive_seed(42, 4)
    assert all(derive_seed(7, k) < 1 << 53 for k in range(100))


class Task:
    """A task module's surface: get_inputs draws from the seeded global generator."""

    @staticmethod
    def get_inputs():
        return [torch.randn(8, 16), torch.randint(0, 5, (3,))]


class Recorder(torch.nn.Module):
    """Remembers what each call saw: identity, version and contents of its first input."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x, labels):
        self.seen.append((id(x), x._version, x.clone(), labels.clone()))
        return x * 2


def timed(model=None):
    """A timed arm with its pool shaped as the warm-up would shape it, without the warm-up."""
    model = model or Recorder()
    t = offline.TimedModel(model, Task, seed_base=11, device="cpu", precision="fp32")
    t.pool = kept.Pool(torch.zeros(8, 16))
    return model, t


def kept_slot(t, slot):
    return kept.read(t.pool.describe(), slot) if t.pool.path else t.pool.buffers[0][slot]


def test_every_timed_call_gets_fresh_contents_in_place():
    model, t = timed()
    t.samples(8, blocker_cycles=0, audits=0)
    contents = [x for _, _, x, _ in model.seen]
    assert all(not torch.equal(a, b) for i, a in enumerate(contents) for b in contents[i + 1 :])
    # Same objects in rotation, and the in-place refresh leaves version counters alone.
    ids = [i for i, _, _, _ in model.seen]
    assert len(set(ids)) == offline.INPUT_SETS
    assert {v for _, v, _, _ in model.seen} == {0}
    # Sample k's contents are what kbench derives for k: the task's inputs under derive_seed(base, k).
    for k, (_, _, x, labels) in enumerate(model.seen):
        expected = make_inputs(Task, derive_seed(11, k), "cpu", "fp32")
        assert torch.equal(x, expected[0]) and torch.equal(labels, expected[1])


class Outputs(torch.nn.Module):
    """Counts, at each call, the outputs of its earlier calls that are still alive."""

    def __init__(self):
        super().__init__()
        self.made, self.alive = [], []

    def forward(self, x, labels):
        self.alive.append(sum(ref() is not None for ref in self.made))
        out = x * 2
        self.made.append(weakref.ref(out))
        return out


def test_no_earlier_output_is_alive_at_a_call():
    # On a GPU the caching allocator then gives every call's output the same block: where the
    # outputs lie can move a kernel's time (level1/33's BatchNorm on an H100).
    model = Outputs()
    t = offline.TimedModel(model, Task, seed_base=11, device="cpu", precision="fp32")
    warm = t.warmup(cycles_per_us=1980)["calls"]
    t.samples(5, blocker_cycles=0, audits=2)
    t.samples(3, blocker_cycles=0, audits=0, burst=2)
    assert len(model.alive) == warm + 5 + 2 + 3 * 2
    # A burst's calls are timed together, so the earlier calls of its sample are alive.
    assert model.alive == [0] * (warm + 7) + [0, 1] * 3


def test_a_set_too_large_to_copy_gets_new_storage_in_the_same_objects():
    # On a GPU a set over the extra-sets share is refilled by swapping storage (a copy would hold
    # two sets at once); the contents must still be sample k's and the objects the same.
    model, t = timed()
    t.swap = True
    t.samples(6, blocker_cycles=0, audits=0)
    assert len({i for i, _, _, _ in model.seen}) == offline.INPUT_SETS
    assert {v for _, v, _, _ in model.seen} == {0}
    for k, (_, _, x, labels) in enumerate(model.seen):
        expected = make_inputs(Task, derive_seed(11, k), "cpu", "fp32")
        assert torch.equal(x, expected[0]) and torch.equal(labels, expected[1])


def test_a_blocks_draws_come_from_its_own_seed():
    # kbench sends each block a seed no worker knew before: draw j of the block is the task's
    # inputs under derive_seed(seed, j), whatever the warm-up and earlier blocks drew.
    model, t = timed()
    t.samples(2, blocker_cycles=0, audits=0)
    t.samples(3, blocker_cycles=0, audits=0, seed=99)
    for j, (_, _, x, labels) in enumerate(model.seen[2:]):
        expected = make_inputs(Task, derive_seed(99, j), "cpu", "fp32")
        assert torch.equal(x, expected[0]) and torch.equal(labels, expected[1])


def test_audit_calls_follow_the_samples_on_their_own_inputs():
    model, t = timed()
    reply = t.samples(2, blocker_cycles=0, audits=3)
    assert len(reply["samples_ms"]) == 2 and len(reply["audit_ms"]) == 3
    # On the CPU there is no other stream to leave work on: no excess.
    assert reply["audit_excess_ms"] == [0.0, 0.0, 0.0]
    assert len(model.seen) == 5 and len({x.sum().item() for _, _, x, _ in model.seen}) == 5


class Small:
    @staticmethod
    def get_inputs():
        return [torch.randn(4, 8)]


def test_the_compiled_baseline_times_torch_compile_of_the_same_module():

    torch.manual_seed(0)
    eager = types.SimpleNamespace(model=torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), task=Small, device="cpu", precision="fp32")
    compiled = arms.Compiled(eager, seed=3)
    assert compiled.compile_s > 0
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert torch.allclose(compiled.model(x), eager.model(x))
    modes.handle(compiled, decode({"cmd": "time_setup", "mode": "offline", "seed": 5, "cycles_per_us": 1980}))
    reply = modes.handle(compiled, decode({"cmd": "time", "n": 3}))
    assert len(reply["samples_ms"]) == 3


def test_a_burst_times_calls_on_distinct_fresh_sets_under_one_sample():
    model, t = timed()
    reply = t.samples(3, blocker_cycles=0, audits=0, burst=6)
    assert reply["burst"] == 6 and len(reply["samples_ms"]) == 3
    assert len(t.sets) >= 6
    # 18 calls, every one on its own fresh contents: those kbench derives for its index.
    assert len(model.seen) == 18
    for i, (_, _, x, labels) in enumerate(model.seen):
        sample, position = divmod(i, 6)
        # The sample's first call (seeded by the flush step) runs first; its other calls were
        # refreshed before it and take the indices below its own.
        k = 6 * sample + (5 if position == 0 else position - 1)
        expected = make_inputs(Task, derive_seed(11, k), "cpu", "fp32")
        assert torch.equal(x, expected[0]) and torch.equal(labels, expected[1])
    # Every call's output is kept, in the slot of its draw.
    for j in range(18):
        assert torch.equal(kept_slot(t, j), make_inputs(Task, derive_seed(11, j), "cpu", "fp32")[0] * 2)


def test_every_timed_output_is_kept_from_the_slot_kbench_names():
    model, t = timed()
    t.pool.buffers[0].fill_(-1.0)
    reply = t.samples(5, blocker_cycles=0, audits=2, seed=7, keep=3)
    assert len(reply["samples_ms"]) == 5 and reply["overflows"] == 0
    for j in range(5):
        assert torch.equal(kept_slot(t, 3 + j), model.seen[j][2] * 2)
    # The audit calls' outputs are not kept.
    assert torch.all(kept_slot(t, 8) == -1.0)
    # A round with more calls than slots wraps: the last ones stay.
    t.pool = kept.Pool(torch.zeros(8, 16))
    t.pool.slots = 4
    t.samples(6, blocker_cycles=0, audits=0, seed=8)
    for j in (2, 3, 4, 5):
        expected = make_inputs(Task, derive_seed(8, j), "cpu", "fp32")[0] * 2
        assert torch.equal(t.pool.buffers[0][j % 4], expected)


def test_the_reference_reads_a_file_pool_and_refuses_what_it_does_not_describe(tmp_path):
    model, t = timed()
    t.pool = kept.Pool((torch.zeros(8, 16), torch.zeros(3)), path=str(tmp_path / "kept-candidate"))
    t.model = lambda x, labels: (x * 2, labels.float())
    t.samples(2, blocker_cycles=0, audits=0, seed=5)
    described = t.pool.describe()
    for j in range(2):
        x, labels = make_inputs(Task, derive_seed(5, j), "cpu", "fp32")
        out = kept.read(described, j)
        assert type(out) is tuple and torch.equal(out[0], x * 2) and torch.equal(out[1], labels.float())
    for bad in [{**described, "slots": 1}, {**described, "files": [{"path": "/nonexistent", "shape": [], "dtype": "float32"}]}]:
        try:
            kept.read(bad, 1)
        except errors.OutputTypeError:
            continue
        raise AssertionError(f"read {bad}")
    # A timed call whose output changes structure is refused at once.
    t.model = lambda x, labels: [x * 2, labels.float()]
    try:
        t.samples(1, blocker_cycles=0, audits=0)
    except errors.OutputTypeError as exc:
        assert "outputs.structure" in str(exc) and "list[tensor, tensor]" in str(exc)
    else:
        raise AssertionError("kept another structure")


class Finisher(torch.nn.Module):
    """Returns zeros, and fills its previous output in place when the worker still holds it (its
    reference count says so): what a kept output that is not a copy would let it fix."""

    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x, labels):
        if self.last is not None and sys.getrefcount(self.last[0]) >= 3:
            self.last[0].copy_(self.last[1] * 2)
        out = torch.zeros_like(x)
        self.last = (out, x.clone())
        return out


def test_the_kept_output_is_a_copy_taken_at_once():
    _, t = timed(Finisher())
    t.pool.buffers[0].fill_(1.0)
    for _ in range(5):
        t.samples(6, blocker_cycles=0, audits=0)
        # The pool holds what each call returned: zeros, never fixed afterwards.
        assert torch.count_nonzero(t.pool.buffers[0][:6]) == 0


def test_warmup_reports_calibration():
    _, t = timed()
    warm = t.warmup(cycles_per_us=1980)
    assert warm["calls"] >= offline.WARMUP_CALLS
    assert warm["median_ms"] >= 0 and warm["submit_ms"] >= 0
    assert warm["sets"] == offline.INPUT_SETS
    # The pool is shaped after the warm-up's output, and as many as fit are kept.
    assert warm["kept"]["slots"] == kept.MAX_SLOTS and list(t.pool.buffers[0].shape) == [kept.MAX_SLOTS, 8, 16]


def test_the_warm_up_blocker_follows_the_previous_call_not_the_cold_first(monkeypatch):
    # A clock the model moves: the first (cold) call takes 200 ms of host time, the rest 1 ms.
    clock = [0.0]
    monkeypatch.setattr(offline.time, "perf_counter", lambda: clock[0])

    class Cold(Recorder):
        def forward(self, x, labels):
            clock[0] += 0.2 if not self.seen else 0.001
            return super().forward(x, labels)

    t = offline.TimedModel(Cold(), Task, seed_base=11, device="cpu", precision="fp32")
    blockers, stage = [], t._stage
    monkeypatch.setattr(t, "_stage", lambda drawn, cycles: blockers.append(cycles) or stage(drawn, cycles))
    t.warmup(cycles_per_us=1000)
    assert len(blockers) == offline.WARMUP_CALLS
    # None before the first call; the cold call's three times, capped at 100 ms, before the
    # second only; then three times the previous call's 1 ms.
    assert blockers[0] == 0
    assert blockers[1] == offline.WARMUP_BLOCKER_MAX_US * 1000
    assert all(abs(b - 3_000 * 1000) <= 1 for b in blockers[2:])


@pytest.mark.parametrize(
    "times, done",
    [
        ([1.0] * 9, False),  # too few calls
        ([50.0] + [1.0] * 9, True),  # steady after the cold first call, far under 100 ms
        ([9.0, 8.0, 7.0, 6.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0], False),  # still getting faster
        ([9.0, 8.0, 7.0, 6.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0], True),  # then settled
        ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.1, 1.1, 1.1], False),  # slower by 10 %
        ([30.0, 5.0, 20.0, 5.0, 20.0, 5.0, 20.0, 5.0, 20.0, 9.0], True),  # unsteady, 100 ms spent
    ],
)
def test_the_warm_up_stops_once_the_calls_are_steady_or_100_ms_are_spent(times, done):
    assert offline.warmed(times) is done


def test_the_warm_up_goes_on_while_the_forward_gets_faster(monkeypatch):
    # Call k takes max(5, 12 - k) ms of host time (a CPU arm's clock): faster until call 7.
    clock = [0.0]
    monkeypatch.setattr(offline.time, "perf_counter", lambda: clock[0])

    class Settling(Recorder):
        def forward(self, x, labels):
            clock[0] += max(5, 12 - len(self.seen)) / 1e3
            return super().forward(x, labels)

    model = Settling()
    warm = offline.TimedModel(model, Task, seed_base=11, device="cpu", precision="fp32").warmup(cycles_per_us=1000)
    # Steady once the four calls before the last four are mostly 5 ms too: at call 14 (calls
    # 6-9 against 10-13), with 98 ms spent, before the 100 ms would have stopped it.
    assert warm["calls"] == 14 and len(model.seen) == 14


def test_handle_dispatches_both_modes():
    worker = types.SimpleNamespace(model=Recorder(), task=Task, device="cpu", precision="fp32", timed=None)
    assert "median_ms" in modes.handle(worker, decode({"cmd": "time_setup", "seed": 3, "mode": "offline", "cycles_per_us": 1980}))
    assert len(modes.handle(worker, decode({"cmd": "time", "n": 2}))["samples_ms"]) == 2
    assert modes.handle(worker, decode({"cmd": "time_setup", "seed": 3, "mode": "kernelbench"})) == {}
    assert len(modes.handle(worker, decode({"cmd": "time", "n": 4}))["samples_ms"]) == 4


def test_only_the_candidates_own_arm_exports_its_pool(monkeypatch):
    """torch keeps a block exported by CUDA IPC allocated until a reader has released it, so the
    pool of an arm nobody reads (the reference's) is never exported: a kept reference worker
    held one for every candidate it served (level1/63, 8 GiB each, ran out of memory at the
    seventh). The candidate's own arm's pool is, for the reference to read."""
    from kbench_worker.roles import candidate, reference

    exported = []
    monkeypatch.setattr(transfer, "export_cuda", lambda t: exported.append(len(t)) or {"container": None, "tensors": []})
    setup = decode({"cmd": "time_setup", "seed": 3, "mode": "offline", "cycles_per_us": 1980})
    ref = reference.Session(channel=None)
    ref.reference = types.SimpleNamespace(model=Recorder(), task=Task, device="cpu", precision="fp32", timed=None, compiled=None)
    ref.time(setup)
    cand = candidate.Candidate.__new__(candidate.Candidate)
    vars(cand).update(model=Recorder(), task=Task, device="cpu", precision="fp32", timed=None, shared=None, control=None)
    cand.time(setup)
    described = {}
    for name, arm in (("reference", ref.reference.timed), ("candidate", cand.timed)):
        arm.pool.on_gpu = True  # as on a GPU, where the pool lies beside the outputs
        described[name] = arm.pool.describe()
    assert "ipc" in described["candidate"] and "ipc" not in described["reference"], described
    assert exported == [1]


def test_seeding_the_generators_draws_as_torch_manual_seed_does():
    # Timed calls seed through models.seed_generators; the reference checks a kept timed output
    # after torch.manual_seed's effect, so the two must draw the same numbers.
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        models.seed_generators(1234)
        ours = torch.randn(16, device=device)
        torch.manual_seed(1234)
        assert torch.equal(ours, torch.randn(16, device=device))


def test_set_up_moves_only_the_submitting_thread_to_the_timing_cpu():
    import os
    import threading

    before = os.sched_getaffinity(0)
    cpu = max(before)
    seen = {}

    def set_up():
        worker = types.SimpleNamespace(model=Recorder(), task=Task, device="cpu", precision="fp32", timed=None)
        modes.handle(worker, decode({"cmd": "time_setup", "seed": 3, "mode": "kernelbench", "cpu": cpu}))
        seen["cpus"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=set_up)
    thread.start()
    thread.join()
    assert seen["cpus"] == {cpu}
    assert os.sched_getaffinity(0) == before


def test_the_server_clock_is_read_from_nvml_by_the_gpus_uuid(monkeypatch):
    import sys

    from kbench_worker.checks import runtime

    asked = []
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=0,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: asked.append(uuid) or "handle",
        nvmlDeviceGetClockInfo=lambda handle, clock: 1755 if handle == "handle" else 0,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(uuid="1234-abcd"))
    read = runtime.sm_clock("cuda:0")
    assert read() == 1755 and asked == ["GPU-1234-abcd"]
    assert runtime.sm_clock("cpu") is None
    # No NVML: no reader, and no invented clock.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert runtime.sm_clock("cuda:0") is None


def test_server_requests_wait_their_gaps_and_report_latency():
    worker = types.SimpleNamespace(model=Recorder(), task=Task, device="cpu", precision="fp32", timed=None)
    warm = modes.handle(worker, decode({"cmd": "time_setup", "seed": 3, "mode": "server"}))
    assert warm["calls"] == 3 and warm["median_ms"] >= 0
    began = time.perf_counter()
    reply = modes.handle(worker, decode({"cmd": "time", "gaps_ms": [20.0, 0.0, 30.0]}))
    assert time.perf_counter() - began >= 0.05
    assert len(reply["samples_ms"]) == len(reply["latency_ms"]) == 3
    # No NVML on the CPU: each request's clock reading is absent, not invented.
    assert reply["sm_mhz"] == [None, None, None]
    # Requests rotate over the input sets, without fresh contents (no write before a request).
    ids = [i for i, _, _, _ in worker.model.seen]
    assert len(set(ids)) == offline.INPUT_SETS


def test_new_contents_are_written_only_behind_the_blocker(monkeypatch):
    # On a GPU the writes are queued behind the blocker; here (CPU tensors, a stand-in blocker)
    # "behind" means after it: while the blocker runs, the set must still hold its old contents,
    # so work another stream starts beside the blocker cannot compute on the sample's inputs.
    model, t = timed()
    t.cuda, t.flush_buffer, t.flush_sink = True, torch.ones(16), torch.empty(())
    at_blocker = []
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: at_blocker.append([x.clone() for x in t.sets[0]]))
    for _ in range(offline.INPUT_SETS):
        t._stage(t._draws(), blocker_cycles=0)
    assert at_blocker == []
    k, inputs, rest = t._stage(t._draws(), blocker_cycles=100)
    assert k == offline.INPUT_SETS and inputs is t.sets[0] and rest == []
    old = make_inputs(Task, derive_seed(11, 0), "cpu", "fp32")
    new = make_inputs(Task, derive_seed(11, k), "cpu", "fp32")
    assert len(at_blocker) == 1
    assert all(torch.equal(a, b) for a, b in zip(at_blocker[0], old))
    assert all(torch.equal(a, b) for a, b in zip(inputs, new))
