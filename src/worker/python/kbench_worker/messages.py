"""What kbench sends the workers, typed: one dataclass per command's request, the enums and the
input variant those use, and the kinds a worker's error may name.

kbench declares the same in Rust (`src/worker/request.rs`, `protocol::ErrorKind`); the schema it
derives from its types is `src/worker/protocol_schema.json`, and tests/python/test_protocol.py
checks every class here against it, field by field and type by type, so a field added, dropped,
renamed or retyped on either side fails a test. `protocol.serve` reads each request into its
command's class (`decode`) before a handler sees it. Standard library only: the static checker's
worker never imports torch.

A field that kbench may leave out has a default here; `Optional[...]` ones may also be null.
"""

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, Optional, TypedDict

ErrorKind = Literal[
    "build",
    "ceilings",
    "cheat",
    "check",
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
    """Inputs that differ from a plain trial's (`harness.make_inputs`), told apart by ``kind``:
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
class TimedCheck:
    """Hand over the output the candidate kept of its last timed block."""

    cmd: ClassVar[str] = "timed_check"
    out: str
    transport: str


@dataclass(frozen=True)
class Check:
    """Compare the candidate's outputs (in ``candidate_out``, or behind ``ipc``) with the
    reference's on the same inputs, in the reference worker."""

    cmd: ClassVar[str] = "check"
    seed: int
    forward_seed: int
    candidate_out: str
    variant: Optional[Variant] = None
    deep: bool = False
    ipc: Any = None


@dataclass(frozen=True)
class Perturb:
    """New parameter values from a seed."""

    cmd: ClassVar[str] = "perturb"
    seed: int


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
class Ceilings:
    """The GPU's measured ceilings."""

    cmd: ClassVar[str] = "ceilings"


REQUESTS = {
    cls.cmd: cls
    for cls in (Ping, Exit, Compile, Warm, Load, Trial, TimedCheck, Check, Perturb, TimeSetup, Time, State, Profile, Inspect, CheckFiles, Probe, Ceilings)
}


def decode(msg):
    """A request line's JSON object as its command's class. What is not a field of the command
    (the command's name, the protocol version, the nonce) is left out; a field the class needs
    and the line lacks raises TypeError."""
    cls = REQUESTS[msg["cmd"]]
    names = {f.name for f in fields(cls)}
    return cls(**{key: value for key, value in msg.items() if key in names})
