"""The worker protocol, typed: one dataclass per command's request (what kbench sends), the enums
and the input variant those use, the reply fields kbench reads of each command, and the kinds a
worker's error may name. Each class has the name of its Rust struct.

kbench declares the same in Rust (`src/worker/request.rs`, each reply's struct beside the code
that reads it, `protocol::ErrorKind`); the schema it derives from its types is
`src/worker/protocol_schema.json`, and tests/python/test_protocol.py checks every class here
against it, field by field and type by type, so a field added, dropped, renamed or retyped on
either side fails a test. `protocol.serve` reads each request into its command's class (`decode`)
before a handler sees it. Replies stay dicts on the wire and in the handlers (a handler may write
more than kbench reads); their `TypedDict`s here say what kbench reads of them. Standard library
only: the static checker's worker never imports torch.

A request field that kbench may leave out has a default here; `Optional[...]` ones may also be
null. Every reply field may be left out (kbench reads a default).
"""

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Literal, Optional, TypedDict

ErrorKind = Literal[
    "build",
    "ceilings",
    "cheat",
    "check",
    "contract",
    "cuda",
    "forward",
    "import",
    "inspect",
    "load",
    "no_model_new",
    "oom",
    "output",
    "probe",
    "protocol",
    "reference",
    "syntax",
    "transfer",
]

# How a timing session samples (`--mode`), and which arm a worker's timing request is for where
# one worker times two (the reference under torch.compile, the candidate's control).
TimingMode = Literal["offline", "kernelbench", "server"]
TimingArm = Literal["compile", "control"]


class Variant(TypedDict, total=False):
    """Inputs that differ from a plain trial's (`inputs.make_inputs`), told apart by ``kind``:
    ``signed`` (2x - 1 where the inputs are non-negative), ``scaled`` by ``factor``, ``shifted``
    by ``spreads`` standard deviations, or the ``shape`` of the task with the constants ``set``.
    A dict on the wire and in the handlers."""

    kind: Literal["signed", "scaled", "shifted", "shape"]
    factor: float
    spreads: float
    set: dict[str, int]


@dataclass(frozen=True)
class Ping:
    cmd: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Exit:
    """End the worker (answered by no reply)."""

    cmd: ClassVar[str] = "exit"


@dataclass(frozen=True)
class Compile:
    """Import the staged submission in the compile pool, with the task as the run sizes it."""

    cmd: ClassVar[str] = "compile"
    task: str
    set: dict[str, Any]
    submission: str
    device: str
    scale: Optional[str] = None


@dataclass(frozen=True)
class Warm:
    """Construct the imported ModelNew and call it once on fake tensors in ``precision``."""

    cmd: ClassVar[str] = "warm"
    task: str
    set: dict[str, Any]
    submission: str
    device: str
    precision: str
    scale: Optional[str] = None


@dataclass(frozen=True)
class Load:
    """Load the task; the candidate also gets the staged submission and its build environment."""

    cmd: ClassVar[str] = "load"
    task: str
    set: dict[str, Any]
    device: str
    precision: str
    atol: float
    rtol: float
    scale: Optional[str] = None
    submission: Optional[str] = None
    env: Optional[dict[str, str]] = None
    kernelbench: bool = False
    memo: bool = False


@dataclass(frozen=True)
class Trial:
    """One correctness trial in the candidate: ``out`` is where its outputs go when
    ``transport`` is "file"."""

    cmd: ClassVar[str] = "trial"
    seed: int
    forward_seed: int
    deep: bool
    out: str
    transport: str
    variant: Optional[Variant] = None


@dataclass(frozen=True)
class KernelbenchTrial:
    """One of KernelBench's trials as its eval runs it (`kernelbench.environment`), in a
    candidate worker loaded with ``kernelbench``: its index from 0, judged at ``tolerance``."""

    cmd: ClassVar[str] = "kernelbench_trial"
    index: int
    tolerance: float


@dataclass(frozen=True)
class CheckKept:
    """Compare the output of one timed call, read from slot ``slot`` of the candidate's pool
    (``kept``, as its set-up described it), with the reference's on that call's inputs, in the
    reference worker."""

    cmd: ClassVar[str] = "check_kept"
    slot: int
    seed: int
    forward_seed: int
    kept: Any


@dataclass(frozen=True)
class CheckOutputs:
    """Compare the candidate's outputs (in ``candidate_out``, or behind ``ipc``) with the
    reference's on the same inputs, in the reference worker."""

    cmd: ClassVar[str] = "check"
    seed: int
    forward_seed: int
    candidate_out: str
    variant: Optional[Variant] = None
    deep: bool = False
    ipc: Any = None
    kernelbench_tolerance: Optional[float] = None


class BuiltParam(TypedDict):
    """One of the task's parameters as the reference worker built it (`params.built`)."""

    name: str
    shape: list[int]
    dtype: str
    digest: str


@dataclass(frozen=True)
class Perturb:
    """New parameter values from a seed. ``built``: to the candidate worker, the task's
    parameters as the reference worker built them (`params.built`), where it said.
    ``restore``: put back the values the perturbation with this seed replaced."""

    cmd: ClassVar[str] = "perturb"
    seed: int
    built: Optional[list[BuiltParam]] = None
    restore: bool = False


@dataclass(frozen=True)
class TimeSetup:
    """A timing arm's set-up and warm-up: its inputs' seed, and the CPU its submitting thread
    moves to."""

    cmd: ClassVar[str] = "time_setup"
    seed: int
    mode: TimingMode
    cpu: Optional[int] = None
    cycles_per_us: Optional[int] = None
    arm: Optional[TimingArm] = None
    kept: Optional[str] = None


@dataclass(frozen=True)
class Time:
    """One block of timed calls: ``n`` samples (offline, kernelbench) or requests after the idle
    gaps ``gaps_ms`` (server)."""

    cmd: ClassVar[str] = "time"
    n: Optional[int] = None
    blocker_cycles: Optional[int] = None
    audits: Optional[int] = None
    burst: Optional[int] = None
    gaps_ms: Optional[list[float]] = None
    arm: Optional[TimingArm] = None
    seed: Optional[int] = None
    keep: Optional[int] = None


@dataclass(frozen=True)
class State:
    """The candidate's checks once timing is done."""

    cmd: ClassVar[str] = "state"
    seed: int
    forward_seed: int


@dataclass(frozen=True)
class Profile:
    """One profiled call."""

    cmd: ClassVar[str] = "profile"
    seed: int
    forward_seed: int


@dataclass(frozen=True)
class ProfilerCall:
    """One call for a kernel profiler outside the worker (`--profile ncu`), between
    cudaProfilerStart and cudaProfilerStop."""

    cmd: ClassVar[str] = "profiler_call"
    seed: int
    forward_seed: int


@dataclass(frozen=True)
class Inspect:
    """The task inspector's facts of a task."""

    cmd: ClassVar[str] = "inspect"
    task: str


@dataclass(frozen=True)
class CheckFiles:
    """The static checker's findings in files."""

    cmd: ClassVar[str] = "check_files"
    files: list[str]


@dataclass(frozen=True)
class Probe:
    """The machine's facts."""

    cmd: ClassVar[str] = "probe"


@dataclass(frozen=True)
class MeasureCeilings:
    """The GPU's measured ceilings."""

    cmd: ClassVar[str] = "ceilings"


# What kbench reads of the replies: the types their fields use, then one per command (shared where
# two commands share their reply's struct).

Outcome = Literal["skip", "pass", "warn", "fail"]


class CheckName(StrEnum):
    """The runtime checks' names, the schema's `CheckName` (kbench's `worker::CheckName`): every
    check entry and every reason that names a check takes its name from here. A member is its
    string (`str()`, f-strings and JSON write the name itself)."""

    CORRECTNESS_SCALED_TOLERANCE = "correctness.scaled_tolerance"
    DETERMINISM_RERUN = "determinism.rerun"
    HARNESS_ALONE = "harness.alone"
    HARNESS_RESULT_CHANNEL_AUTH = "harness.result_channel_auth"
    HARNESS_TRANSFER = "harness.transfer"
    INPUTS_DISTRIBUTION_PERTURBATION = "inputs.distribution_perturbation"
    INPUTS_INTEGRITY = "inputs.integrity"
    INPUTS_MEAN_SHIFT = "inputs.mean_shift"
    INPUTS_SHAPE_PERTURBATION = "inputs.shape_perturbation"
    INTEGRITY_MONKEYPATCH_SNAPSHOT = "integrity.monkeypatch_snapshot"
    KERNELBENCH_ENVIRONMENT = "kernelbench.environment"
    KERNELS_MAPPED = "kernels.mapped"
    MEMORY_POISONED_ALLOCATOR = "memory.poisoned_allocator"
    OUTPUTS_ALIAS = "outputs.alias"
    OUTPUTS_EXACT_TYPE = "outputs.exact_type"
    OUTPUTS_INDEPENDENCE = "outputs.independence"
    OUTPUTS_SETTLED = "outputs.settled"
    OUTPUTS_STRUCTURE = "outputs.structure"
    PARAMS_PERTURBATION = "params.perturbation"
    PRECISION_FP32_ACCUMULATION = "precision.fp32_accumulation"
    PRECISION_FP64_ERROR_RATIO = "precision.fp64_error_ratio"
    PRECISION_FP64_JUDGED = "precision.fp64_judged"
    PRECISION_TF32_FLAGS = "precision.tf32_flags"
    PROFILE_LIBRARY_OUTPUT = "profile.library_output"
    PROFILE_LIBRARY_SHARE = "profile.library_share"
    PROFILE_NCU = "profile.ncu"
    PROFILE_REFERENCE_OPS = "profile.reference_ops"
    RUNTIME_L2_PERSIST_LIMIT = "runtime.l2_persist_limit"
    RUNTIME_PROCESSES = "runtime.processes"
    RUNTIME_THREAD_COUNT = "runtime.thread_count"
    SANITIZER_INITCHECK = "sanitizer.initcheck"
    SANITIZER_MEMCHECK = "sanitizer.memcheck"
    SANITIZER_RACECHECK = "sanitizer.racecheck"
    SANITIZER_SYNCCHECK = "sanitizer.synccheck"
    TASK_FACTS = "task.facts"
    TIMING_AUDIT = "timing.audit"
    TIMING_STREAM_JOIN = "timing.stream_join"
    TIMING_TIMED_OUTPUT_CHECK = "timing.timed_output_check"
    TIMING_WALL_ENVELOPE = "timing.wall_envelope"


Severity = Literal["info", "warning", "error"]


class WorkerError(TypedDict, total=False):
    """A worker's error record (`protocol.error`): ``drift`` and ``check`` are what kbench's
    verdict reads of a build on known toolchain drift and of wrong outputs a check proved."""

    check: Optional[CheckName]
    drift: Optional[str]
    fatal: bool
    kind: ErrorKind
    message: str
    traceback: Optional[str]


class Check(TypedDict, total=False):
    evidence: str
    name: CheckName
    outcome: Outcome
    runs: int
    seconds: float


class BuildFailure(TypedDict, total=False):
    cause: str
    drift: Optional[str]
    extension: str
    phase: str


class Launches(TypedDict, total=False):
    launches: int
    ms: float
    name: str
    own: bool


class ProfileFigures(TypedDict, total=False):
    busy_ms: Optional[float]
    custom_ms: Optional[float]
    launches: list[Launches]
    library_share: Optional[float]
    total_ms: Optional[float]


class TaskFacts(TypedDict, total=False):
    degenerate: Optional[list[str]]
    errors: Optional[list[str]]
    flops: Optional[int]
    input_bytes: Optional[int]
    input_only_constants: Optional[list[str]]
    min_bytes: Optional[int]
    nondeterministic: Optional[bool]
    output_bytes: Optional[int]
    param_bytes: Optional[int]
    small_overrides: Optional[dict[str, Any]]
    small_size: Optional[str]


class Finding(TypedDict, total=False):
    line: int
    rule: str
    severity: Severity
    why: str


class FileFindings(TypedDict, total=False):
    error: Optional[str]
    file: str
    findings: list[Finding]


class Gpu(TypedDict, total=False):
    capability: Optional[str]
    index: Optional[int]
    l2_bytes: Optional[int]
    memory_bytes: Optional[int]
    name: Optional[str]
    sm_count: Optional[int]
    uuid: Optional[str]


class Facts(TypedDict, total=False):
    cpu: Optional[str]
    cuda_available: bool
    cutlass: Optional[str]
    cxx: Optional[str]
    gpus: list[Gpu]
    ninja: bool
    nvcc: Optional[str]
    python: Optional[str]
    torch: Optional[str]
    torch_cuda: Optional[str]
    triton: Optional[str]


class Ceilings(TypedDict, total=False):
    copy_gbps: float
    gemm_tflops: dict[str, float]
    gpu: str
    measured_s: float


class Empty(TypedDict, total=False):
    """A reply kbench reads nothing of."""


class Built(TypedDict, total=False):
    build_failures: list[BuildFailure]
    compiled: list[str]
    has_model_new: bool
    kernels: list[str]
    note: str
    reached: Optional[str]


class Loaded(TypedDict, total=False):
    checks: list[Check]
    compiled: Optional[list[str]]
    constants: dict[str, Any]
    kernels: list[str]
    startup_s: Optional[float]


class Shipped(TypedDict, total=False):
    checks: list[Check]
    compiled: Optional[list[str]]
    contract: Optional[str]
    ipc: Any


class Checked(TypedDict, total=False):
    checks: list[Check]
    contract: Optional[str]
    correct: bool
    kernelbench_correct: Optional[bool]
    kernelbench_needed: Optional[float]
    max_abs_diff: Optional[float]
    max_rel_diff: Optional[float]
    reason: Optional[str]
    uncheckable: bool


class Judged(TypedDict):
    correct: bool
    needed: float
    reason: str


class Perturbed(TypedDict, total=False):
    built: Optional[list[BuiltParam]]
    extra: list[str]
    missing: list[str]
    paired: list[str]
    shapes: Optional[list[Any]]


class Warmed(TypedDict, total=False):
    compile_s: Optional[float]
    kept: Any
    median_ms: Optional[float]
    submit_ms: Optional[float]


class Timed(TypedDict, total=False):
    audit_excess_ms: Optional[list[float]]
    audit_ms: Optional[list[float]]
    burst: Optional[int]
    latency_ms: Optional[list[float]]
    overflows: int
    samples_ms: Optional[list[float]]
    sm_mhz: list[Optional[float]]


class Stated(TypedDict, total=False):
    checks: list[Check]
    contract: Optional[str]


class Profiled(TypedDict, total=False):
    build_failures: list[BuildFailure]
    checks: list[Check]
    defined: list[str]
    kernels: Optional[list[str]]
    profile: ProfileFigures


class Inspected(TypedDict, total=False):
    facts: TaskFacts


class Findings(TypedDict, total=False):
    results: list[FileFindings]


class Probed(TypedDict, total=False):
    facts: Facts


class Measured(TypedDict, total=False):
    ceilings: Ceilings


REQUESTS = {
    cls.cmd: cls
    for cls in (Ping, Exit, Compile, Warm, Load, Trial, KernelbenchTrial, CheckKept, CheckOutputs, Perturb, TimeSetup, Time, State, Profile, ProfilerCall, Inspect, CheckFiles, Probe, MeasureCeilings)
}


def decode(msg):
    """A request line's JSON object as its command's class. What is not a field of the command
    (the command's name, the protocol version, the nonce) is left out; a field the class needs
    and the line lacks raises TypeError."""
    cls = REQUESTS[msg["cmd"]]
    names = {f.name for f in fields(cls)}
    return cls(**{key: value for key, value in msg.items() if key in names})


REPLIES = {
    "ping": Empty,
    "exit": Empty,
    "compile": Built,
    "warm": Built,
    "load": Loaded,
    "trial": Shipped,
    "kernelbench_trial": Judged,
    "check": Checked,
    "check_kept": Checked,
    "perturb": Perturbed,
    "time_setup": Warmed,
    "time": Timed,
    "state": Stated,
    "profile": Profiled,
    "profiler_call": Empty,
    "inspect": Inspected,
    "check_files": Findings,
    "probe": Probed,
    "ceilings": Measured,
}
