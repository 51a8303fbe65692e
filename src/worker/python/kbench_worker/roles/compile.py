"""Compile worker: import one submission with no GPU visible so its extensions build, then
construct ModelNew and call it once on fake tensors so the builds it makes later build too.

Runs in the compile pool (CUDA_VISIBLE_DEVICES empty, TORCH_EXTENSIONS_DIR set by kbench to a
content-addressed folder), so load_inline / Triton builds of many submissions run in parallel
on the CPU cores and the GPU workers later load the built libraries from the cache. A failure
that is not a build failure (e.g. code that needs a GPU at import) is reported as such: the
candidate worker imports the file again on the GPU and decides.

`warm` constructs ModelNew with the task's init inputs and calls it once on the task's inputs,
all as fake tensors on the run's device (torch's FakeTensorMode: shapes, dtypes and a device,
no memory and no GPU; a value read out of one with `.item()` is a symbol), so extensions built
in `__init__` or lazily in the first forward land in the same cache. Only a build failure that
escapes is a result; anything else (a kernel that cannot take fake tensors, a GPU query) just
ends the warm-up, and the GPU worker decides.
Nothing but builds is wanted from it, so it runs no extension function (a call raises
`StopWarmup`: the build is done by then) and stops after WARM_IDLE_S outside any build.

In a run on a GPU the submission's code sees `torch.cuda.is_available()` true here: published
kernels commonly build only `if torch.cuda.is_available()`, which would otherwise leave their
build (or its failure) to the GPU slot.
"""

import contextlib
import signal
import traceback

import torch
import torch.utils.cpp_extension as cpp_extension
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..checks import kernels
from ..task import models, taskfile
from ..task.inputs import load_task, make_inputs
from ..wire import cause, errors
from ..wire.messages import Built, Compile, Warm
from ..wire.protocol import error, serve

# Seconds the warm-up may run outside extension builds (a hang in forward must not hold a
# build slot until --timeout-compile).
WARM_IDLE_S = 30

_warming = False
_building = 0


class StopWarmup(Exception):
    """The warm-up has nothing more to build: an extension function was called, or it ran
    WARM_IDLE_S outside any build."""


class _Guarded:
    """An extension module whose functions raise StopWarmup during the warm-up."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            if _warming:
                raise StopWarmup(f"the warm-up reached {name} of a built extension")
            return value(*args, **kwargs)

        return call


def _guard_extensions():
    """Wrap cpp_extension's loaders (over kernels' watch): count builds in progress and guard
    the modules they return."""
    for name in ("load", "load_inline"):
        original = getattr(cpp_extension, name)

        def loader(*args, __original=original, **kwargs):
            global _building
            _building += 1
            try:
                module = __original(*args, **kwargs)
            finally:
                _building -= 1
            return _Guarded(module) if kwargs.get("is_python_module", True) else module

        setattr(cpp_extension, name, loader)


@contextlib.contextmanager
def _gpu_present(req):
    """In a run on a GPU, `torch.cuda.is_available()` is true while submission code runs (the
    pool hides the GPU). Fake tensors still know there is none, where torch asks the same
    question: no real tensor made first to set up a GPU context
    (`fake_tensor.init_gpu_context`), no constants computed on the device
    (`FakeTensorMode.avoid_device_init`). Either raises with no GPU: the first ended every
    warm-up on CUDA at its first tensor (on the H100, 27 of 82 CUDA-L1 kernels built or failed
    to build in the GPU slot instead, 35-75 s each), the second at a BatchNorm's counter."""
    mode = fake_tensor.FakeTensorMode
    originals = torch.cuda.is_available, fake_tensor.init_gpu_context, mode.avoid_device_init
    if req.device.startswith("cuda"):
        torch.cuda.is_available = lambda: True
        fake_tensor.init_gpu_context = lambda device: None
        mode.avoid_device_init = property(lambda self: True)
    try:
        yield
    finally:
        torch.cuda.is_available, fake_tensor.init_gpu_context, mode.avoid_device_init = originals


def _idle(signum, frame):
    if _warming and not _building:
        raise StopWarmup(f"the warm-up ran {WARM_IDLE_S} s outside any build")
    signal.setitimer(signal.ITIMER_REAL, WARM_IDLE_S)


def compile_file(req):
    """Import the submission: (module or None, reply)."""
    kernels.remember = True
    kernels.watch_extensions()
    _guard_extensions()
    try:
        with _gpu_present(req):
            module = taskfile.load(req.submission, taskfile.overrides(req.task, req.scale, req.set), strict=False)
    except SyntaxError as exc:
        return None, {"ok": False, "error": error("syntax", f"syntax error: {exc.msg} (line {exc.lineno})", exc)}
    except BaseException as exc:  # noqa: BLE001 - any failure of submission code is a result
        traceback.print_exc()
        if cause.is_build_failure(exc):
            return None, {"ok": False, "error": errors.build_error(exc)}
        return None, {"ok": False, "error": error("import", cause.line(exc), exc)}
    kernels.build_report("compiled")
    return module, {"ok": True, "has_model_new": hasattr(module, "ModelNew"), **_built(module)}


def warm(module, req):
    """Construct ModelNew and call it once on fake tensors; `reached` says how far it got:
    "import" (the constructor raised), "construct" (the call raised before any kernel) or
    "forward" (the call ended, reached an extension function, or ran WARM_IDLE_S)."""
    task = load_task(req.task, taskfile.overrides(req.task, req.scale, req.set))
    device, precision = req.device, req.precision
    reached, note = "import", ""
    global _warming
    _warming = True
    signal.signal(signal.SIGALRM, _idle)
    signal.setitimer(signal.ITIMER_REAL, WARM_IDLE_S)
    try:
        # A shape environment makes a value read out of a fake tensor (`.item()`) a symbol
        # rather than an error, so a constructor that folds constants gets on to its build.
        fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
        with fake, torch.device(device), _gpu_present(req):
            kernels.phase = "__init__"
            init = models.init_inputs(task)
            models.seed_generators(42)
            model = module.ModelNew(*init)
            if precision != "fp32":
                model = model.to(dtype=models.DTYPES[precision])
            reached = "construct"
            kernels.phase = "forward"
            models.forward(model, make_inputs(task, 0, device, precision), 0)
            reached = "forward"
    except BaseException as exc:  # noqa: BLE001 - any failure of submission code is a result
        traceback.print_exc()
        if cause.is_build_failure(exc):
            return {"ok": False, "error": errors.build_error(exc)}
        note = cause.line(exc)
        if isinstance(exc, StopWarmup) and reached == "construct":
            reached = "forward"  # it got as far as a kernel, or ran long enough
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _warming = False
    kernels.build_report("warmed")
    return {"ok": True, "reached": reached, "note": note, **_built(module)}


def _built(module):
    """What the import or the warm-up built: the kernels, the loads that compiled, and the
    builds that raised inside the submission (which caught them and fell back), so that kbench
    can build one that met toolchain drift again with the drift rewritten."""
    return {"kernels": kernels.found(module), "compiled": kernels.compiled(), "build_failures": kernels.failures()}


class Session:
    """The compile worker's requests: ``compile`` imports the submission, ``warm`` then
    constructs and calls it."""

    def __init__(self):
        self.module = None

    def compile(self, req: Compile) -> Built:
        if self.module is not None:
            return {"ok": False, "error": error("protocol", "compile: this worker compiled a submission already")}
        self.module, reply = compile_file(req)
        return reply

    def warm(self, req: Warm) -> Built:
        if self.module is None:
            return {"ok": False, "error": error("protocol", "warm: no submission compiled")}
        return warm(self.module, req)


def commands(channel):
    """The compile worker's table: command -> handler (each reply says itself whether it is ok)."""
    session = Session()
    return {"compile": session.compile, "warm": session.warm}


def failure(cmd, exc):
    return error("protocol", f"{cmd}: {type(exc).__name__}: {exc}", exc)


def run(channel):
    serve(channel, commands(channel), failure)
