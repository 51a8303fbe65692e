"""Compile worker: import one submission with no GPU visible so its extensions build.

Runs in the compile pool (CUDA_VISIBLE_DEVICES empty, TORCH_EXTENSIONS_DIR set by kbench to a
content-addressed folder), so load_inline / Triton builds of many submissions run in parallel
on the CPU cores and the GPU workers later load the built libraries from the cache. A failure
that is not a build failure (e.g. code that needs a GPU at import) is reported as such: the
candidate worker imports the file again on the GPU and decides.
"""

import traceback

from . import kernels, taskfile
from .protocol import error


def build_message(exc):
    """The compiler's first error lines: the full output goes to the log, not into reports."""
    text = str(exc)
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower() and "Error building extension" not in line]
    head = text.splitlines()[0] if text else type(exc).__name__
    return "; ".join([head.split(":")[0]] + errors[:3])[:1000]


def is_build_failure(exc):
    text = f"{type(exc).__name__}: {exc}"
    return "Error building extension" in text or "CalledProcessError" in text or "CompilationError" in text


def run(channel):
    for req in channel.requests():
        if req["cmd"] != "compile":
            channel.reply({"ok": False, "error": error("protocol", f"unknown command {req['cmd']}")})
            continue
        kernels.watch_extensions()
        try:
            module = taskfile.load(req["submission"], taskfile.overrides(req["task"], req.get("scale"), req.get("set")), strict=False)
        except SyntaxError as exc:
            channel.reply({"ok": False, "error": error("syntax", f"syntax error: {exc.msg} (line {exc.lineno})", exc)})
        except BaseException as exc:  # noqa: BLE001 - any failure of submission code is a result
            traceback.print_exc()
            if is_build_failure(exc):
                channel.reply({"ok": False, "error": error("build", build_message(exc), exc)})
            else:
                channel.reply({"ok": False, "error": error("import", f"{type(exc).__name__}: {str(exc)[:1000]}", exc)})
        else:
            kernels.build_report("compiled")
            channel.reply({"ok": True, "has_model_new": hasattr(module, "ModelNew"), "kernels": kernels.found(module)})
        return
