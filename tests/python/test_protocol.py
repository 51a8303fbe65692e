"""kbench and its workers know the same protocol. `src/worker/protocol_schema.json` is what the
Rust side sends and reads (a Rust test keeps it current with `request::schema()`): every command
it sends is in some role's table (`commands(channel)` in each worker module) and every table
entry is sent; the handlers read only request fields kbench sends to their role, and read every
one; every reply field kbench reads for a command is written by the code of a role that handles
that command (its modules and what they import)."""

import json
import re

from conftest import ROOT
from kbench_worker import candidate, ceilings, inspect, probe, reference, static_check, timing
from kbench_worker import compile as pool

WORKER = ROOT / "src" / "worker" / "python" / "kbench_worker"
# Each role, and the modules whose handlers read its requests (timing.py serves `time_setup` and
# `time` for both the candidate and the reference).
ROLES = {
    candidate: [candidate, timing],
    reference: [reference, timing],
    pool: [pool],
    inspect: [inspect],
    static_check: [static_check],
    probe: [probe],
    ceilings: [ceilings],
}
# Optional request fields a handler reads with a default that kbench never sends: the inspector's
# tolerances and the static checker's task (its value comparisons), used by direct callers only.
UNSENT = {inspect: {"atol", "rtol"}, static_check: {"task"}}
# Fields kbench sends that a role does not read, because two roles share a command's name on the
# wire: the candidate's `load` (its submission and build environment) reaches the reference as the
# same request without them, and the static checker's `check` (files) shares its name with the
# reference's output check (seeds, variant, outputs).
SHARED = {
    reference: {"env", "submission", "files"},
    static_check: {"seed", "forward_seed", "variant", "deep", "candidate_out", "ipc"},
}
# A handler's read of its request: `req["x"]` or `req.get("x"...)`.
READS = re.compile(r"""\breq(?:\[|\.get\()\s*["'](\w+)["']""")
# A reply field a worker writes: a dict key `"x": ...`, or `reply["x"] = ...`.
WRITES = re.compile(r"""["'](\w+)["']\s*(?::|\]\s*=[^=])""")
# A worker module's imports of its package: `from . import a, b` or `from .a import x`.
IMPORTS = re.compile(r"^\s*from \.(\w*) import ([\w, ]+)", re.M)


def schema():
    return json.loads((ROOT / "src" / "worker" / "protocol_schema.json").read_text())


def sent_fields(entries):
    """Command -> the request fields kbench may send with it (both `check`s together)."""
    fields = {}
    for entry in entries:
        fields.setdefault(entry["cmd"], {"cmd"}).update(entry["request"])
    return fields


def source(module):
    return (WORKER / f"{module.__name__.rsplit('.', 1)[1]}.py").read_text()


def unsent_reads(sources, sent):
    """The fields `sources` read from a request that no command in `sent` carries."""
    return {field for text in sources for field in READS.findall(text)} - sent


def unread_fields(sources, sent):
    """The fields of `sent` no source reads: sent for nothing."""
    return sent - {"cmd"} - {field for text in sources for field in READS.findall(text)}


def closure(modules):
    """The source of `modules` and of every worker module they import, transitively."""
    seen, todo = set(), [m.__name__.rsplit(".", 1)[1] for m in modules]
    while todo:
        name = todo.pop()
        path = WORKER / f"{name}.py"
        if name in seen or not path.exists():
            continue
        seen.add(name)
        for module, names in IMPORTS.findall(path.read_text()):
            todo += [module] if module else [n.strip() for n in names.split(",")]
    return [(WORKER / f"{name}.py").read_text() for name in sorted(seen)]


def unwritten_replies(entries, roles):
    """Reply fields kbench reads, per command, that the roles handling the command do not write
    (kbench reads one reply struct per command name, whichever role answers)."""
    missing = set()
    for entry in entries:
        handlers = [modules for role, modules in roles.items() if entry["cmd"] in role.commands(None)]
        written = {key for modules in handlers for text in closure(modules) for key in WRITES.findall(text)}
        missing |= {(entry["cmd"], field) for field in entry["reply"] if field not in written}
    return missing


def test_kbench_and_the_workers_know_the_same_commands():
    sent = {entry["cmd"] for entry in schema()}
    assert {"load", "trial", "check", "compile", "warm", "time", "exit"} <= sent, sent
    handled = set().union(*(role.commands(None) for role in ROLES))
    assert sent - {"exit"} == handled, f"sent, no handler: {sent - {'exit'} - handled}; handled, never sent: {handled - sent}"


def test_handlers_read_only_fields_kbench_sends():
    fields = sent_fields(schema())
    for role, modules in ROLES.items():
        sent = set().union(*(fields[cmd] for cmd in role.commands(None))) | UNSENT.get(role, set())
        assert not unsent_reads([source(m) for m in modules], sent), role.__name__
    readers = {path.stem for path in WORKER.glob("*.py") if READS.search(path.read_text())}
    covered = {m.__name__.rsplit(".", 1)[1] for modules in ROLES.values() for m in modules}
    assert readers - {"protocol"} <= covered, f"requests read outside the roles' modules: {readers - covered}"


def test_every_field_kbench_sends_is_read():
    fields = sent_fields(schema())
    for role, modules in ROLES.items():
        for cmd in role.commands(None):
            unread = unread_fields([source(m) for m in modules], fields[cmd]) - SHARED.get(role, set())
            assert not unread, f"{role.__name__} {cmd}: sent, never read: {unread}"
    # A field no handler reads is reported.
    assert unread_fields([source(candidate), source(timing)], fields["time"] | {"jitter"}) == {"jitter"}


def test_a_field_kbench_does_not_send_is_reported():
    fields = sent_fields(schema())
    sent = fields["time_setup"] | fields["time"]
    assert unsent_reads([source(timing)], sent) == set()
    assert unsent_reads([source(timing) + '\nx = req.get("warmup_ms", 1)\n'], sent) == {"warmup_ms"}
    assert unsent_reads(['arm = req["arm"]'], fields["load"]) == {"arm"}


def test_the_workers_write_every_reply_field_kbench_reads():
    assert not unwritten_replies(schema(), ROLES)
    # A field no worker writes, and one only another role's code writes (the reference's check
    # reply fields asked of the candidate's `trial`), are both reported.
    made_up = [{"cmd": "time", "request": [], "reply": ["samples_ms", "jitter_ms"]}]
    assert unwritten_replies(made_up, ROLES) == {("time", "jitter_ms")}
    check = next(e for e in schema() if e["cmd"] == "check" and "ipc" in e["request"])
    borrowed = [{"cmd": "trial", "request": [], "reply": check["reply"]}]
    assert unwritten_replies(borrowed, {candidate: ROLES[candidate]}) == {
        ("trial", field) for field in check["reply"] if field != "checks"
    }


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
    from kbench_worker.protocol import error, serve

    def boom(req):
        raise ValueError("no")

    table = {"ok": lambda req: {"x": 1}, "boom": boom, "fatal": boom}
    failure = lambda cmd, exc: error(cmd, str(exc), fatal=cmd == "fatal")  # noqa: E731
    channel = FakeChannel("ok", "nope", "boom", "exit", "ok")
    serve(channel, table, failure)
    assert [r["ok"] for r in channel.replies] == [True, False, False]
    assert channel.replies[0]["x"] == 1
    assert channel.replies[1]["error"]["kind"] == "protocol"
    assert channel.replies[2]["error"]["message"] == "no"
    assert channel.pending == [{"cmd": "ok"}], "exit ends the worker"
    channel = FakeChannel("fatal", "ok")
    serve(channel, table, failure)
    assert len(channel.replies) == 1 and channel.pending == [{"cmd": "ok"}], "a fatal error ends it"


def test_worker_profile_is_written_after_each_request(tmp_path, monkeypatch):
    """`KBENCH_WORKER_PROFILE=DIR`: each request runs under cProfile and the worker's profile so
    far is on disk before its reply is sent (kbench ends a worker without waiting for it)."""
    import pstats

    from kbench_worker import protocol

    monkeypatch.setenv("KBENCH_WORKER_PROFILE", str(tmp_path))
    seen = []

    def busy(req):
        return {"n": sum(range(10_000))}

    class Channel:
        def requests(self):
            yield {"cmd": "busy"}
            yield {"cmd": "exit"}

        def reply(self, body):
            seen.append((body, sorted(p.name for p in tmp_path.glob("*.prof"))))

    protocol.serve(Channel(), {"busy": busy}, failure=None)
    (body, files), = seen
    assert body == {"ok": True, "n": 49_995_000} and len(files) == 1, seen
    functions = {name for _, _, name in pstats.Stats(str(tmp_path / files[0])).stats}
    assert "busy" in functions, functions


def test_worker_profile_tables_each_request_handler_once(tmp_path, monkeypatch):
    """benchmarks/worker_profile.py: a worker's entry points are the handlers the profiler ran,
    not the functions they call."""
    import importlib.util
    import sys
    from pathlib import Path

    from kbench_worker import protocol

    module = tmp_path / "kbench_worker_handlers.py"
    module.write_text("def inner():\n    return sum(range(1000))\n\ndef busy(req):\n    return {'n': inner() + inner()}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    handlers = importlib.import_module("kbench_worker_handlers")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    monkeypatch.setenv("KBENCH_WORKER_PROFILE", str(profiles))

    class Channel:
        def requests(self):
            yield {"cmd": "busy"}
            yield {"cmd": "busy"}
            yield {"cmd": "exit"}

        def reply(self, body):
            pass

    protocol.serve(Channel(), {"busy": handlers.busy}, failure=None)
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
