"""Newline-delimited JSON between kbench and a worker, on private pipe fds (never stdout).

kbench passes the request and response fds in KBENCH_PROTOCOL_FDS ("in,out"). Whatever the
worker or a submission prints goes to stdout/stderr, which kbench captures into a capped log.
The first line in is the worker's reply key; each reply line is the HMAC-SHA256 of its JSON under
that key (hex), a space, and the JSON (src/worker/protocol.rs).
"""

import hashlib
import hmac
import json
import os
import traceback

from .messages import ErrorKind, Exit, decode

PROTOCOL_VERSION = 1


class Channel:
    def __init__(self):
        fd_in, fd_out = (int(x) for x in os.environ.pop("KBENCH_PROTOCOL_FDS").split(","))
        # Inherited from kbench; a program this worker runs (a compiler, a submission's
        # subprocess) gets neither end.
        os.set_inheritable(fd_in, False)
        os.set_inheritable(fd_out, False)
        self._in = os.fdopen(fd_in, "r", encoding="utf-8")
        self._out = os.fdopen(fd_out, "w", encoding="utf-8")
        self._key = json.loads(self._in.readline())["key"].encode()
        self.startup_s = None
        self._nonce = None

    def requests(self):
        for line in self._in:
            if not line.strip():
                continue
            msg = json.loads(line)
            if msg.get("v") != PROTOCOL_VERSION:
                self.reply({"ok": False, "error": error("protocol", f"protocol version {msg.get('v')} is not {PROTOCOL_VERSION}")})
                return
            self._nonce = msg.get("nonce")
            yield msg

    def reply(self, body):
        # Echo the request's nonce: kbench takes no reply line without it.
        body = {"v": PROTOCOL_VERSION, "nonce": self._nonce, **body}
        line = json.dumps(body, allow_nan=False)
        self._out.write(sign(self._key, line) + " " + line + "\n")
        self._out.flush()


def serve(channel, commands, failure):
    """Answer kbench's requests from one role's table (``commands``: command -> handler taking
    the request, read into its command's class in `messages`, and returning the reply's body)
    until ``exit``. A handler that raises (or a request that does not fit its class) is answered
    with ``failure(cmd, exc)``, an error record; a fatal one ends the worker."""
    profiled = _profiler()
    if profiled is not None:
        commands = {cmd: profiled(handler) for cmd, handler in commands.items()}
    for msg in channel.requests():
        cmd = msg.get("cmd")
        if cmd == Exit.cmd:
            return
        handler = commands.get(cmd)
        if handler is None:
            channel.reply({"ok": False, "error": error("protocol", f"unknown command {cmd}")})
            continue
        try:
            channel.reply({"ok": True, **handler(decode(msg))})
        except BaseException as exc:  # noqa: BLE001 - the role's failure() decides what it is
            traceback.print_exc()
            record = failure(cmd, exc)
            channel.reply({"ok": False, "error": record})
            if record["fatal"]:
                return


def _profiler():
    """``KBENCH_WORKER_PROFILE=DIR`` (a diagnosis of where an evaluation's time goes, in a run
    with ``--sandbox off``, which lets the worker write there): each request's handler runs under
    cProfile, and the worker's profile so far is written to ``DIR/<role>-<pid>.prof`` after every
    request (kbench ends a worker without waiting). None when unset."""
    directory = os.environ.get("KBENCH_WORKER_PROFILE")
    if not directory:
        return None
    import cProfile
    import sys

    profile = cProfile.Profile()
    role = os.path.basename(sys.argv[1]) if len(sys.argv) > 1 else "worker"
    path = os.path.join(directory, f"{role}-{os.getpid()}.prof")

    def wrap(handler):
        def profiled(req):
            try:
                return profile.runcall(handler, req)
            finally:
                profile.dump_stats(path)

        return profiled

    return wrap


def sign(key, line):
    """The MAC kbench checks a reply line's JSON against."""
    return hmac.new(key, line.encode(), hashlib.sha256).hexdigest()


def error(kind: ErrorKind, message, exc=None, fatal=False, drift=None, check=None):
    """An error record; ``fatal`` tells kbench never to reuse this worker (a CUDA error poisons it);
    ``drift``, what of the toolchain moved where a build failed on known toolchain drift
    (`cause.drifted`), makes the failure the environment's, not the kernel's; ``check`` is the
    runtime check whose finding it is (a `CheckName`). kbench reads those fields, not the message."""
    record = {"kind": kind, "message": message, "fatal": fatal}
    if exc is not None:
        record["traceback"] = "".join(traceback.format_exception(exc))[-20000:]
    if drift is not None:
        record["drift"] = drift
    if check is not None:
        record["check"] = check
    return record
