"""kbench and its workers know the same protocol. `src/worker/protocol_schema.json` is what the
Rust side sends and reads, typed (a Rust test derives it from kbench's types and keeps it
current): every command it sends is in some role's table (`commands(channel)` in each worker
module) and every table entry is sent; each command's request class and reply TypedDict in
`kbench_worker.wire.messages` has exactly the schema's fields with the schema's types, and so do the
enums, structs and the input variant they use; the error kinds, the error record's fields
(`WorkerError`) and the version agree; the handlers read only fields of their
requests, and read every one; every reply field kbench reads for a command is written by the code
of a role that handles that command (its modules and what they import)."""

import ast
import dataclasses
import enum
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

from conftest import ROOT
from kbench_worker import static_check
from kbench_worker.checks import float64
from kbench_worker.roles import candidate, ceilings, inspect, probe, reference
from kbench_worker.roles import compile as pool
from kbench_worker.static_check import entry as static_entry
from kbench_worker.timing import modes
from kbench_worker.wire import messages
from kbench_worker.wire.protocol import PROTOCOL_VERSION, Channel, error

WORKER = ROOT / "src" / "worker" / "python" / "kbench_worker"
# Each role, and the modules whose handlers read its requests (timing/modes.py serves
# `time_setup` and `time` for both the candidate and the reference; checks/float64.py runs the
# reference's trial again in float64).
ROLES = {
    candidate: [candidate, modes],
    reference: [reference, float64, modes],
    pool: [pool],
    inspect: [inspect],
    static_check: [static_entry],
    probe: [probe],
    ceilings: [ceilings],
}
# Fields kbench sends that a role does not read: the candidate's `load` (its submission, build
# environment, and whether it runs KernelBench's eval) reaches the reference as the same request
# without them, as does the candidate's `perturb` (the task's parameters as built); and the
# reference's `load` (whether it keeps its outputs for the task's other candidates) the
# candidate.
SHARED = {reference: {"env", "submission", "kernelbench", "built"}, candidate: {"memo"}}
# A handler's read of its request: `req.x` (`req.cmd` is the class's, not a field).
READS = re.compile(r"\breq\.(\w+)")
# A reply field a worker writes: a dict key `"x": ...`, or `reply["x"] = ...`.
WRITES = re.compile(r"""["'](\w+)["']\s*(?::|\]\s*=[^=])""")
# The schema's scalar types, as Python annotates them.
SCALARS = {"string": str, "integer": int, "number": float, "boolean": bool, "any": typing.Any}


def schema():
    return json.loads((ROOT / "src" / "worker" / "protocol_schema.json").read_text())


def sent_fields(protocol):
    """Command -> the request fields kbench may send with it."""
    return {entry["cmd"]: {field["name"] for field in entry["request"]} for entry in protocol["commands"]}


def source(module):
    return Path(module.__file__).read_text()


def reads(sources):
    return {field for text in sources for field in READS.findall(text)} - {"cmd"}


def unsent_reads(sources, sent):
    """The fields `sources` read from a request that no command in `sent` carries."""
    return reads(sources) - sent


def unread_fields(sources, sent):
    """The fields of `sent` no source reads: sent for nothing."""
    return sent - reads(sources)


def imported(path):
    """The files of its package that the module at `path` imports (relative imports:
    `from . import a`, `from ..b import c`, `from .d.e import x`), at any depth of its code."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parents[node.level - 1].joinpath(*(node.module or "").split(".") if node.module else [])
            found += [base.with_suffix(".py"), base / "__init__.py"]
            found += [base / f"{alias.name}.py" for alias in node.names] + [base / alias.name / "__init__.py" for alias in node.names]
    return found


def closure(modules):
    """The source of `modules` and of every module of their package they import, transitively."""
    seen, todo = set(), [Path(m.__file__) for m in modules]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        todo += imported(path)
    return [path.read_text() for path in sorted(seen)]


def unwritten_replies(entries, roles):
    """Reply fields kbench reads, per command, that the roles handling the command do not write
    (kbench reads one reply struct per command name, whichever role answers)."""
    missing = set()
    for entry in entries:
        handlers = [modules for role, modules in roles.items() if entry["cmd"] in role.commands(None)]
        written = {key for modules in handlers for text in closure(modules) for key in WRITES.findall(text)}
        missing |= {(entry["cmd"], field["name"]) for field in entry["reply"] if field["name"] not in written}
    return missing


def mismatches(annotation, ty, types):
    """How the Python annotation `annotation` differs from the schema's type `ty` (empty when it
    does not): the scalars as `SCALARS`, `list<T>` as list[T], `map<T>` as dict[str, T],
    `optional<T>` as Optional[T], an enum as a Literal of its values (or an Enum of its name whose
    members' values they are, in order), a union as the TypedDict of
    its tag and every shape's fields."""
    inner = re.fullmatch(r"(list|map|optional)<(.+)>", ty)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if inner and inner[1] == "optional":
        if origin is not typing.Union or type(None) not in args or len(args) != 2:
            return [f"{annotation} is not Optional ({ty})"]
        return mismatches(next(a for a in args if a is not type(None)), inner[2], types)
    if inner and inner[1] == "list":
        return mismatches(args[0], inner[2], types) if origin is list else [f"{annotation} is not a list ({ty})"]
    if inner and inner[1] == "map":
        if origin is not dict or args[0] is not str:
            return [f"{annotation} is not a dict with str keys ({ty})"]
        return mismatches(args[1], inner[2], types)
    if ty in SCALARS:
        return [] if annotation is SCALARS[ty] else [f"{annotation} is not {ty}"]
    definition = types[ty]
    if definition["kind"] == "enum":
        literal = origin is typing.Literal and list(args) == definition["values"]
        named = isinstance(annotation, type) and issubclass(annotation, enum.Enum) and annotation.__name__ == ty
        if named and [member.value for member in annotation] == definition["values"]:
            return []
        return [] if literal else [f"{annotation} is not Literal{definition['values']} ({ty})"]
    if definition["kind"] == "union":
        return union_mismatches(annotation, ty, definition, types)
    if not typing.is_typeddict(annotation) or annotation.__name__ != ty:
        return [f"{annotation} is not the TypedDict {ty}"]
    return reply_mismatches(annotation, definition["fields"], types)


def union_mismatches(cls, name, definition, types):
    """A union as one TypedDict: its tag a Literal of the shapes' tags, every shape's field a key
    of the same type."""
    if not typing.is_typeddict(cls):
        return [f"{cls} is not a TypedDict ({name})"]
    hints = typing.get_type_hints(cls)
    tags = [variant["tag"] for variant in definition["variants"]]
    found = mismatches(hints.pop(definition["tag"], None), "tag", {"tag": {"kind": "enum", "values": tags}})
    shape_fields = {field["name"]: field["type"] for variant in definition["variants"] for field in variant["fields"]}
    if set(hints) != set(shape_fields):
        found.append(f"{name}: keys {sorted(hints)}, the schema's {sorted(shape_fields)}")
    for key in set(hints) & set(shape_fields):
        found += mismatches(hints[key], shape_fields[key], types)
    return found


def reply_mismatches(cls, fields, types):
    """How the TypedDict `cls` differs from a reply's (or a struct's) `fields`: a key missing,
    extra or retyped (kbench reads every one with a default)."""
    hints = typing.get_type_hints(cls)
    theirs = {field["name"]: field["type"] for field in fields}
    found = [f"{cls.__name__}: {name} is not in the schema" for name in hints.keys() - theirs.keys()]
    found += [f"{cls.__name__}: no key {name}" for name in theirs.keys() - hints.keys()]
    for name in hints.keys() & theirs.keys():
        found += [f"{cls.__name__}.{name}: {why}" for why in mismatches(hints[name], theirs[name], types)]
    return found


def request_mismatches(cls, fields, types):
    """How the request class `cls` differs from the schema's `fields`: a field missing, extra or
    retyped, or one with a default where kbench always sends it (or none where it may not)."""
    ours = {f.name: f for f in dataclasses.fields(cls)}
    theirs = {field["name"]: field for field in fields}
    found = [f"{cls.__name__}: {name} is not in the schema" for name in ours.keys() - theirs.keys()]
    found += [f"{cls.__name__}: no field {name}" for name in theirs.keys() - ours.keys()]
    hints = typing.get_type_hints(cls)
    for name in ours.keys() & theirs.keys():
        found += [f"{cls.__name__}.{name}: {why}" for why in mismatches(hints[name], theirs[name]["type"], types)]
        has_default = ours[name].default is not dataclasses.MISSING
        if has_default == theirs[name]["required"]:
            found.append(f"{cls.__name__}.{name}: required is {theirs[name]['required']}, has a default: {has_default}")
    return found


def test_kbench_and_the_workers_know_the_same_commands():
    sent = {entry["cmd"] for entry in schema()["commands"]}
    assert {"load", "trial", "check", "check_files", "compile", "warm", "time", "exit"} <= sent, sent
    handled = set().union(*(role.commands(None) for role in ROLES))
    assert sent - {"exit"} == handled, f"sent, no handler: {sent - {'exit'} - handled}; handled, never sent: {handled - sent}"
    assert set(messages.REQUESTS) == sent


def test_every_request_class_has_the_schema_s_fields_and_types():
    protocol = schema()
    for entry in protocol["commands"]:
        cls = messages.REQUESTS[entry["cmd"]]
        assert request_mismatches(cls, entry["request"], protocol["types"]) == [], entry["cmd"]


def test_every_reply_type_has_the_schema_s_fields_and_types():
    protocol = schema()
    assert set(messages.REPLIES) == {entry["cmd"] for entry in protocol["commands"]}
    for entry in protocol["commands"]:
        cls = messages.REPLIES[entry["cmd"]]
        assert reply_mismatches(cls, entry["reply"], protocol["types"]) == [], entry["cmd"]


def test_a_field_added_dropped_renamed_or_retyped_is_reported():
    protocol = schema()
    types = protocol["types"]
    fields = next(e for e in protocol["commands"] if e["cmd"] == "time_setup")["request"]

    @dataclasses.dataclass
    class Drifted:
        seed: str  # retyped
        mode: messages.TimingMode
        cpu: typing.Optional[int] = None
        cycles_per_microsecond: typing.Optional[int] = None  # renamed
        warmup: int = 0  # added; `arm` dropped
        kept: typing.Optional[str] = None

    assert sorted(request_mismatches(Drifted, fields, types)) == [
        "Drifted.seed: <class 'str'> is not integer",
        "Drifted: cycles_per_microsecond is not in the schema",
        "Drifted: no field arm",
        "Drifted: no field cycles_per_us",
        "Drifted: warmup is not in the schema",
    ]
    assert mismatches(typing.Optional[typing.Literal["compile"]], "optional<TimingArm>", types) != []
    assert mismatches(list[float], "list<optional<number>>", types) != []

    class Check(typing.TypedDict, total=False):  # a reply's nested struct, one key retyped
        name: messages.CheckName
        outcome: messages.Outcome
        evidence: str
        seconds: float
        runs: float

    assert mismatches(list[Check], "list<Check>", types) == ["Check.runs: <class 'float'> is not integer"]


def test_the_check_names_are_the_schema_s():
    """The workers name checks only by `messages.CheckName`, whose members are the schema's
    `CheckName`, in its order; an enum of another name or with other values does not pass."""
    types = schema()["types"]
    assert [member.value for member in messages.CheckName] == types["CheckName"]["values"]
    assert mismatches(messages.CheckName, "CheckName", types) == []
    fewer = enum.StrEnum("CheckName", {"OUTPUTS_ALIAS": "outputs.alias"})
    assert mismatches(fewer, "CheckName", types) != []


def test_the_error_record_has_the_schema_s_fields_and_error_writes_them():
    protocol = schema()
    assert reply_mismatches(messages.WorkerError, protocol["error"], protocol["types"]) == []
    record = error("build", "m", RuntimeError("x"), fatal=True, drift="d", check=messages.CheckName.OUTPUTS_ALIAS)
    assert set(record) == {field["name"] for field in protocol["error"]}
    assert json.loads(json.dumps(record))["check"] == "outputs.alias"
    assert set(error("forward", "m")) == {"kind", "message", "fatal"}


def test_the_error_kinds_and_the_version_agree():
    protocol = schema()
    assert sorted(typing.get_args(messages.ErrorKind)) == protocol["error_kinds"]
    assert PROTOCOL_VERSION == protocol["version"]


def test_decode_reads_a_request_into_its_class():
    req = messages.decode({"v": 1, "nonce": "ab", "cmd": "time", "n": 4, "arm": "control"})
    assert req == messages.Time(n=4, arm="control") and req.cmd == "time"
    try:
        messages.decode({"cmd": "perturb"})
    except TypeError as exc:
        assert "seed" in str(exc)
    else:
        raise AssertionError("a request without its required field decoded")


def test_handlers_read_only_fields_kbench_sends():
    fields = sent_fields(schema())
    for role, modules in ROLES.items():
        sent = set().union(*(fields[cmd] for cmd in role.commands(None)))
        assert not unsent_reads([source(m) for m in modules], sent), role.__name__
    readers = {path for path in WORKER.rglob("*.py") if READS.search(path.read_text())}
    covered = {Path(m.__file__) for modules in ROLES.values() for m in modules}
    assert readers <= covered, f"requests read outside the roles' modules: {readers - covered}"


def test_every_field_kbench_sends_is_read():
    fields = sent_fields(schema())
    for role, modules in ROLES.items():
        for cmd in role.commands(None):
            unread = unread_fields([source(m) for m in modules], fields[cmd]) - SHARED.get(role, set())
            assert not unread, f"{role.__name__} {cmd}: sent, never read: {unread}"
    # A field no handler reads is reported.
    assert unread_fields([source(candidate), source(modes)], fields["time"] | {"jitter"}) == {"jitter"}


def test_a_field_kbench_does_not_send_is_reported():
    fields = sent_fields(schema())
    sent = fields["time_setup"] | fields["time"]
    assert unsent_reads([source(modes)], sent) == set()
    assert unsent_reads([source(modes) + "\nx = req.warmup_ms\n"], sent) == {"warmup_ms"}
    assert unsent_reads(["arm = req.arm"], fields["load"]) == {"arm"}


def test_the_workers_write_every_reply_field_kbench_reads():
    commands = schema()["commands"]
    assert not unwritten_replies(commands, ROLES)
    # A field no worker writes, and one only another role's code writes (the reference's check
    # reply fields asked of the candidate's `trial`, but for those both write), are both reported.
    made_up = [{"cmd": "time", "request": [], "reply": [{"name": "samples_ms"}, {"name": "jitter_ms"}]}]
    assert unwritten_replies(made_up, ROLES) == {("time", "jitter_ms")}
    check = next(e for e in commands if e["cmd"] == "check")
    borrowed = [{"cmd": "trial", "request": [], "reply": check["reply"]}]
    assert unwritten_replies(borrowed, {candidate: ROLES[candidate]}) == {("trial", field["name"]) for field in check["reply"] if field["name"] not in ("checks", "contract", "correct", "reason")}


class FakeChannel:
    def __init__(self, *cmds):
        self.pending = [{"cmd": c} for c in cmds]
        self.replies = []

    def requests(self):
        while self.pending:
            yield self.pending.pop(0)

    def reply(self, body):
        self.replies.append(body)


def test_serve_answers_from_the_table_until_exit_or_a_fatal_error():
    from kbench_worker.wire.protocol import error, serve

    def boom(req):
        raise ValueError("no")

    table = {"ping": lambda req: {"x": 1}, "probe": boom, "ceilings": boom, "perturb": lambda req: {"seed": req.seed}}
    failure = lambda cmd, exc: error(cmd, str(exc), fatal=cmd == "ceilings")  # noqa: E731
    channel = FakeChannel("ping", "nope", "probe", "perturb", "exit", "ping")
    serve(channel, table, failure)
    assert [r["ok"] for r in channel.replies] == [True, False, False, False]
    assert channel.replies[0]["x"] == 1
    assert channel.replies[1]["error"]["kind"] == "protocol"
    assert channel.replies[2]["error"]["message"] == "no"
    assert "seed" in channel.replies[3]["error"]["message"], "a request that does not fit its class fails"
    assert channel.pending == [{"cmd": "ping"}], "exit ends the worker"
    channel = FakeChannel("ceilings", "ping")
    serve(channel, table, failure)
    assert len(channel.replies) == 1 and channel.pending == [{"cmd": "ping"}], "a fatal error ends it"


def test_worker_profile_is_written_after_each_request(tmp_path, monkeypatch):
    """`KBENCH_WORKER_PROFILE=DIR`: each request runs under cProfile and the worker's profile so
    far is on disk before its reply is sent (kbench ends a worker without waiting for it)."""
    import pstats

    from kbench_worker.wire import protocol

    monkeypatch.setenv("KBENCH_WORKER_PROFILE", str(tmp_path))
    seen = []

    def busy(req):
        return {"n": sum(range(10_000))}

    class Channel:
        def requests(self):
            yield {"cmd": "ping"}
            yield {"cmd": "exit"}

        def reply(self, body):
            seen.append((body, sorted(p.name for p in tmp_path.glob("*.prof"))))

    protocol.serve(Channel(), {"ping": busy}, failure=None)
    ((body, files),) = seen
    assert body == {"ok": True, "n": 49_995_000} and len(files) == 1, seen
    functions = {name for _, _, name in pstats.Stats(str(tmp_path / files[0])).stats}
    assert "busy" in functions, functions


def test_worker_profile_tables_each_request_handler_once(tmp_path, monkeypatch):
    """benchmarks/worker_profile.py: a worker's entry points are the handlers the profiler ran,
    not the functions they call."""
    import importlib.util
    import sys
    from pathlib import Path

    from kbench_worker.wire import protocol

    module = tmp_path / "kbench_worker_handlers.py"
    module.write_text("def inner():\n    return sum(range(1000))\n\ndef busy(req):\n    return {'n': inner() + inner()}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    handlers = importlib.import_module("kbench_worker_handlers")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    monkeypatch.setenv("KBENCH_WORKER_PROFILE", str(profiles))

    class Channel:
        def requests(self):
            yield {"cmd": "ping"}
            yield {"cmd": "ping"}
            yield {"cmd": "exit"}

        def reply(self, body):
            pass

    protocol.serve(Channel(), {"ping": handlers.busy}, failure=None)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "worker_profile.py"
    spec = importlib.util.spec_from_file_location("worker_profile", script)
    worker_profile = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "worker_profile", worker_profile)
    spec.loader.exec_module(worker_profile)
    (path,) = profiles.glob("*.prof")
    entries = worker_profile.handlers(path)
    assert list(entries) == ["kbench_worker_handlers.py:busy"], entries
    assert entries["kbench_worker_handlers.py:busy"][0] == 2
    assert "| kbench_worker_handlers.py:busy | 1 | 2 |" in worker_profile.handler_table([path])


def test_the_protocol_pipes_are_not_passed_to_programs_the_worker_runs(monkeypatch):
    requests_in, requests_out = os.pipe()
    replies_in, replies_out = os.pipe()
    for fd in (requests_in, replies_out):
        os.set_inheritable(fd, True)
    os.write(requests_out, b'{"key": "k"}\n')
    monkeypatch.setenv("KBENCH_PROTOCOL_FDS", f"{requests_in},{replies_out}")
    channel = Channel()
    try:
        probe = f"import os; [os.fstat(fd) for fd in ({requests_in}, {replies_out})]"
        child = subprocess.run([sys.executable, "-c", probe], close_fds=False, capture_output=True)
        assert child.returncode != 0 and b"Bad file descriptor" in child.stderr
    finally:
        channel._in.close()
        channel._out.close()
        os.close(requests_out)
        os.close(replies_in)
