"""The checker's entry points: ``scan`` (one source), ``check_file`` (one file, as the reply
records it) and the worker role (``commands``, ``failure``, ``run``)."""

from __future__ import annotations

import ast
import io
import tokenize

from .context import Context
from .registry import run_rules


def scan(source: str, filename: str = "<submission>", task_source: str | None = None) -> list[dict]:
    """Findings for one submission, sorted by line. Raises SyntaxError when it does not parse.

    ``task_source`` (optional) is the task file: a redefined task global is then compared with
    the task's value (identical: info; different: warning).
    """
    try:
        tree = ast.parse(source, filename=filename)
    except ValueError as exc:  # null bytes
        raise SyntaxError(str(exc)) from None
    return run_rules(Context(source, tree, task_source))


def check_file(path):
    """One result record of the `check_files` reply."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return {"file": path, "findings": [], "error": f"unreadable: {exc}"}
    try:
        findings = scan(source, path)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return {"file": path, "findings": [], "error": f"syntax error: {exc.msg}{where}"}
    except (RecursionError, MemoryError) as exc:
        return {"file": path, "findings": [], "error": f"too complex to check: {type(exc).__name__}"}
    return {"file": path, "findings": findings, "error": None}


def check_request(req):
    return {"results": [check_file(path) for path in req.files]}


def commands(channel):
    """The static checker's table: command -> handler."""
    return {"check_files": check_request}


def failure(cmd, exc):
    from ..wire.protocol import error

    return error("check", f"{type(exc).__name__}: {exc}", exc)


def run(channel):
    from ..wire.protocol import serve

    serve(channel, commands(channel), failure)
