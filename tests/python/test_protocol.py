"""kbench and its workers know the same commands: every command the Rust side sends is in some
role's table (`commands(channel)` in each worker module), and every table entry is sent."""

import re

from conftest import ROOT
from kbench_worker import candidate, ceilings, inspect, probe, reference, static_check
from kbench_worker import compile as pool

ROLES = [candidate, reference, pool, inspect, static_check, probe, ceilings]
# How src/ spells a request's command: a `"cmd": "x"` field, the base of a task request, a
# command set on a request made for another.
SENT = [r'"cmd":\s*"(\w+)"', r'request_base\(\w+,\s*"(\w+)"\)', r'\["cmd"\]\s*=\s*json!\("(\w+)"\)']


def sent_by_kbench():
    source = "\n".join(p.read_text() for p in (ROOT / "src").rglob("*.rs"))
    return {cmd for pattern in SENT for cmd in re.findall(pattern, source)}


def test_kbench_and_the_workers_know_the_same_commands():
    sent = sent_by_kbench()
    assert {"load", "trial", "check", "compile", "warm", "time"} <= sent, sent
    handled = set().union(*(role.commands(None) for role in ROLES))
    assert sent - {"exit"} == handled, f"sent, no handler: {sent - {'exit'} - handled}; handled, never sent: {handled - sent}"


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
