"""Task inspection: facts about a task file derived by running it, for `kbench list --meta`.

Trusted role: it imports task files only, never a submission. For each task it reports

* at full size on PyTorch's meta device (shapes only, no memory, seeded as the workers seed):
  ``input_bytes`` (tensor inputs), ``output_bytes``, ``param_bytes`` (parameters and buffers),
  ``min_bytes`` (their sum: every byte read or written once, the speed-of-light traffic),
  ``flops`` (torch.utils.flop_counter.FlopCounterMode around one forward; it counts matmul,
  convolution and attention style ops only, so elementwise tasks count 0; null if it failed)
  and ``random_ops`` (the ATen ops of that forward tagged ``nondeterministic_seeded``);
* ``input_only_constants``: the integer module constants whose change alters the shapes of
  ``get_inputs()`` and nothing else (neither ``get_init_inputs()`` nor a parameter or buffer
  shape), with the forward still running on meta at the new value (+1, else x2). These are
  the sizes a shape-perturbation check may change. An integer tuple is tried element by
  element: it is listed by name when every element (and all of them at once) may change,
  otherwise each element that may change is listed as ``name[i]``. Where the full-size meta
  forward is slow (RNNs, which meta unrolls step by step) the forward at the new value is
  tried at the small size with the same change;
* at the task's ``small`` size on the CPU (``small_size``: from the ``scale.toml`` beside the task,
  or, in a tree without one, ``derived``: the input-only constants shrunk, batch sizes first,
  until the forward's bytes and FLOPs fit a CPU; where no such size is found the value facts
  are left null with an error saying so): ``nondeterministic`` (forward draws from the torch
  or Python RNG, or two forwards without reseeding differ; also set when ``random_ops`` is not
  empty) and ``degenerate``, the reasons a trivial candidate would pass the fp32 check
  (atol = rtol = 1e-4, compared as the reference worker compares):
  ``constant_output`` (one value fits every element for two input seeds),
  ``input_independent`` (the same output for two input seeds),
  ``identity`` (the output equals one of the inputs) and
  ``below_tolerance`` (max |output| < atol, so zeros pass).
  Value-based facts come from the small size only: meta tensors hold no values, and some
  full-size tasks do not fit a CPU. A flag can differ at full size (L1/23 Softmax: at full
  size every output is about 1/393216, below atol; at small size the rows are short).
  ``value_facts(path, "full", "cuda")`` gives them at full size on a GPU.
* ``errors``: one string per step that failed; a failed step leaves its facts null.

Request ``{"cmd": "inspect", "task": PATH}`` (optional ``atol``, ``rtol``), reply
``{"ok": true, "facts": {...}}``; ``{"cmd": "exit"}`` ends the worker.
"""

import random
import time
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from ..task import models, taskfile
from ..task.inputs import make_inputs
from ..wire.protocol import error, serve

ATOL = 1e-4
RTOL = 1e-4
INPUT_SEEDS = (1, 2)
FORWARD_SEED = 3


# ---------------------------------------------------------------------------------------------
# Helpers


def _tensors(value):
    """The tensors of an output or an input list, in order (a tuple or list is flattened)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _say(step, exc):
    return f"{step}: {type(exc).__name__}: {str(exc).strip()[:300]}"


def _signature(value):
    """A comparable description of init values: tensors by shape and dtype, the rest by value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_signature(v) for v in value))
    if isinstance(value, float) and value != value:
        return ("nan",)
    return ("value", repr(value))


def _on_meta(module):
    """Build the model and its inputs at the module's sizes on meta, seeded as the workers do."""
    with torch.device("meta"):
        init = models.init_inputs(module)
        torch.manual_seed(42)
        model = module.Model(*init)
        inputs = make_inputs(module, INPUT_SEEDS[0], "meta", "fp32")
    return init, model, inputs


def _model_shapes(model):
    params = [(n, tuple(p.shape), str(p.dtype)) for n, p in model.named_parameters()]
    buffers = [(n, tuple(b.shape), str(b.dtype)) for n, b in model.named_buffers()]
    return params, buffers


def _input_shapes(inputs):
    return [(tuple(x.shape), str(x.dtype)) if isinstance(x, torch.Tensor) else _signature(x) for x in inputs]


# ---------------------------------------------------------------------------------------------
# Full size on meta


class _RandomOps(TorchDispatchMode):
    """Records the ops that draw from an RNG (ATen tags them ``nondeterministic_seeded``); works on meta."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.seen.add(str(func))
        return func(*args, **(kwargs or {}))


def _full_size(path, facts, errors):
    """Bytes, FLOPs and random ops at full size on meta; returns what the constant scan reuses."""
    try:
        module = taskfile.load(path)
        init, model, inputs = _on_meta(module)
    except Exception as exc:  # noqa: BLE001
        errors.append(_say("full-size build on meta", exc))
        return None
    facts["input_bytes"] = models.nbytes(_tensors(inputs))
    facts["param_bytes"] = models.nbytes(list(model.parameters()) + list(model.buffers()))
    counter, random_ops = FlopCounterMode(display=False), _RandomOps()
    start = time.perf_counter()
    try:
        with counter, random_ops:
            out = models.forward(model, inputs, FORWARD_SEED)
        facts["flops"] = int(counter.get_total_flops())
        facts["random_ops"] = sorted(random_ops.seen)
    except Exception as exc:  # noqa: BLE001
        errors.append(_say("flop count on meta", exc))
        start = time.perf_counter()
        try:
            out = models.forward(model, inputs, FORWARD_SEED)
        except Exception as exc:  # noqa: BLE001
            errors.append(_say("full-size forward on meta", exc))
            return None
    seconds = time.perf_counter() - start
    facts["output_bytes"] = models.nbytes(_tensors(out))
    facts["min_bytes"] = facts["input_bytes"] + facts["param_bytes"] + facts["output_bytes"]
    return module, init, model, inputs, seconds


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _bumps(value):
    """Changes to try on an integer: +1 first (odd sizes), then x2 (keeps divisibility)."""
    return [bump for bump in (lambda v: v + 1, lambda v: v * 2) if bump(value) != value]


def _at(i, bump):
    """A change of element ``i`` of a tuple or list only."""
    return lambda seq: type(seq)(bump(v) if j == i else v for j, v in enumerate(seq))


def _each(bump):
    return lambda seq: type(seq)(bump(v) for v in seq)


def _shapes_only(path, overrides, baseline):
    """Whether these overrides change input shapes and nothing else (init values, parameter and
    buffer shapes), building on meta without a forward."""
    try:
        module = taskfile.load(path, overrides)
        init, model, inputs = _on_meta(module)
    except Exception:  # noqa: BLE001 - not loadable at this value: not input-only
        return False
    return _signature(list(init)) == baseline["init"] and _model_shapes(model) == baseline["model"] and _input_shapes(inputs) != baseline["inputs"]


def _forward_runs(path, overrides):
    try:
        module = taskfile.load(path, overrides)
        _, model, inputs = _on_meta(module)
        models.forward(model, inputs, FORWARD_SEED)
    except Exception:  # noqa: BLE001
        return False
    return True


SLOW_FORWARD_S = 1.0


def _may_change(path, name, change, ctx):
    """Whether one change of constant ``name`` alters input shapes only and the forward still runs.

    The forward runs at full size on meta, or, where the full-size meta forward is slow (RNNs,
    which meta unrolls step by step), at the small size with the same change.
    """
    if not _shapes_only(path, {name: change(ctx["full"][name])}, ctx["baseline"]):
        return False
    if ctx["small"] is None:
        return _forward_runs(path, {name: change(ctx["full"][name])})
    return _forward_runs(path, {**ctx["small_overrides"], name: change(ctx["small"][name])})


def _input_only_constants(path, module, init, model, inputs, forward_seconds):
    ctx = {
        "baseline": {"init": _signature(list(init)), "model": _model_shapes(model), "inputs": _input_shapes(inputs)},
        "full": vars(module),
        "small": None,
    }
    if forward_seconds > SLOW_FORWARD_S:
        try:
            ctx["small_overrides"] = taskfile.overrides(path, "small")
            ctx["small"] = vars(taskfile.load(path, ctx["small_overrides"]))
        except Exception:  # noqa: BLE001 - no small size: run the slow forwards at full size
            ctx["small"] = None
    found = []
    for name in taskfile.assigned(path):
        value = ctx["full"].get(name)
        if _is_int(value):
            if any(_may_change(path, name, bump, ctx) for bump in _bumps(value)):
                found.append(name)
        elif isinstance(value, (tuple, list)) and value and all(_is_int(v) for v in value):
            elements = [i for i, v in enumerate(value) if any(_may_change(path, name, _at(i, bump), ctx) for bump in _bumps(v))]
            whole = [_each(lambda v: v + 1), _each(lambda v: v * 2)]
            if len(elements) == len(value) and any(_may_change(path, name, change, ctx) for change in whole):
                found.append(name)
            else:
                found.extend(f"{name}[{i}]" for i in elements)
    return found


def input_only_constants(path):
    """The constants (or ``name[i]`` tuple elements) a shape-perturbation check may change."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = taskfile.load(path)
        init, model, inputs = _on_meta(module)
        start = time.perf_counter()
        models.forward(model, inputs, FORWARD_SEED)
        return _input_only_constants(path, module, init, model, inputs, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# Small size on the CPU


def _clone(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _same(a, b, atol, rtol):
    """Whether ``a`` would pass the check against reference ``b`` (as reference.compare decides)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if b.is_floating_point() or b.is_complex():
        return bool(torch.allclose(a, b, atol=atol, rtol=rtol))
    return bool(torch.equal(a, b))


def _all_same(xs, ys, atol, rtol):
    return len(xs) == len(ys) and bool(xs) and all(_same(x, y, atol, rtol) for x, y in zip(xs, ys))


def _constant(outs_a, outs_b, atol, rtol):
    """One value per output tensor fits every element for both input seeds."""
    for a, b in zip(outs_a, outs_b):
        if a.numel() == 0 or a.is_complex():
            return False
        both = torch.cat([a.flatten(), b.flatten()])
        if both.is_floating_point():
            if torch.isnan(both).any():
                return False
            lo, hi = both.double().min(), both.double().max()
            fill = torch.full_like(both, ((lo + hi) / 2).item())
            if not torch.allclose(fill, both, atol=atol, rtol=rtol):
                return False
        elif not bool((both == both[0]).all()):
            return False
    return bool(outs_a)


def _identical(x, y):
    """Bit-for-bit the same, NaN matching NaN."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.is_floating_point() or x.is_complex():
        return bool(torch.allclose(x, y, rtol=0, atol=0, equal_nan=True))
    return bool(torch.equal(x, y))


def _run(model, inputs):
    with torch.no_grad():
        return _tensors(model(*_clone(inputs)))


def _rng_states(device):
    states = [torch.get_rng_state(), torch.tensor(hash(random.getstate()))]
    if device.startswith("cuda"):
        states.append(torch.cuda.get_rng_state(device))
    return states


def value_facts(path, scale="small", device="cpu", atol=ATOL, rtol=RTOL, sets=None):
    """``nondeterministic`` and ``degenerate`` from real values at a scale (small on the CPU),
    with further constants ``sets`` overridden on top.

    The forward is seeded identically for both input seeds, so references that draw random
    numbers still compare. Returns {"nondeterministic", "degenerate", "errors"}.
    """
    try:
        overrides = taskfile.overrides(path, scale, sets)
    except Exception as exc:  # noqa: BLE001
        return {"nondeterministic": None, "degenerate": None, "errors": [_say(f"{scale} size", exc)]}
    return _value_facts(path, overrides, scale, device, atol, rtol)


def _value_facts(path, overrides, scale, device, atol, rtol):
    facts = {"nondeterministic": None, "degenerate": None, "errors": []}
    errors = facts["errors"]
    try:
        module = taskfile.load(path, overrides)
        model = models.build(module.Model, models.init_inputs(module), device, "fp32")
        inputs_a = make_inputs(module, INPUT_SEEDS[0], device, "fp32")
        inputs_b = make_inputs(module, INPUT_SEEDS[1], device, "fp32")
    except Exception as exc:  # noqa: BLE001
        errors.append(_say(f"{scale}-size build on {device}", exc))
        return facts
    try:
        torch.manual_seed(FORWARD_SEED)
        before = _rng_states(device)
        outs_a = _run(model, inputs_a)
        drew = not all(torch.equal(x, y) for x, y in zip(before, _rng_states(device)))
        again = _run(model, inputs_a)  # no reseeding: random or stateful references differ
        torch.manual_seed(FORWARD_SEED)
        outs_b = _run(model, inputs_b)
    except Exception as exc:  # noqa: BLE001
        errors.append(_say(f"{scale}-size forward on {device}", exc))
        return facts
    repeat = len(again) == len(outs_a) and all(_identical(x, y) for x, y in zip(outs_a, again))
    facts["nondeterministic"] = bool(drew or not repeat)
    if any(t.is_floating_point() and torch.isnan(t).any() for t in outs_a + outs_b):
        errors.append(f"{scale}-size forward on {device}: the output holds NaN")
    reasons = []
    if _constant(outs_a, outs_b, atol, rtol):
        reasons.append("constant_output")
    if _all_same(outs_a, outs_b, atol, rtol):
        reasons.append("input_independent")
    ins_a, ins_b = _tensors(inputs_a), _tensors(inputs_b)
    if outs_a and all(any(_same(out, x, atol, rtol) for x in ins) for outs, ins in ((outs_a, ins_a), (outs_b, ins_b)) for out in outs):
        reasons.append("identity")
    floats = [t for t in outs_a + outs_b if t.is_floating_point() and t.numel()]
    if floats and len(floats) == len(outs_a + outs_b) and max(t.abs().max().item() for t in floats) < atol:
        reasons.append("below_tolerance")
    facts["degenerate"] = reasons
    return facts


# ---------------------------------------------------------------------------------------------
# A small size for a tree without scale.toml

# A derived small size aims, as scale.toml's do, at a forward that is cheap on the CPU (the value
# facts run three, on one thread per inspect worker): inputs and outputs, and counted FLOPs.
DERIVED_TARGET_BYTES = 16 << 20
DERIVED_TARGET_FLOPS = 1e9
# What one may cost at most where the input-only constants cannot shrink further: inputs,
# parameters and outputs, and FLOPs. Above it the value facts are skipped.
DERIVED_MAX_BYTES = 256 << 20
DERIVED_MAX_FLOPS = 60e9
DERIVED_MAX_TRIES = 32


class _Cost:
    """What one forward moves (inputs and outputs) and computes, beside its parameters."""

    def __init__(self, moved, params, flops, empty=False):
        self.moved, self.params, self.flops = moved, params, flops
        # An empty output would pass the identity check against an empty input.
        self.empty = empty

    def cheap(self):
        return self.moved <= DERIVED_TARGET_BYTES and self.flops <= DERIVED_TARGET_FLOPS

    def affordable(self):
        return self.moved + self.params <= DERIVED_MAX_BYTES and self.flops <= DERIVED_MAX_FLOPS


def _cost(path, overrides):
    """The forward's `_Cost` on meta at these sizes, or None when the task does not build or run
    there."""
    try:
        module = taskfile.load(path, overrides)
        _, model, inputs = _on_meta(module)
        counter = FlopCounterMode(display=False)
        with counter:
            outs = _tensors(models.forward(model, inputs, FORWARD_SEED))
    except Exception:  # noqa: BLE001
        return None
    moved = models.nbytes(_tensors(inputs)) + models.nbytes(outs)
    params = models.nbytes(list(model.parameters()) + list(model.buffers()))
    return _Cost(moved, params, counter.get_total_flops(), empty=any(t.numel() == 0 for t in outs))


def _full_cost(facts):
    """The full size's `_Cost` from its facts (a meta forward of an RNN takes tens of seconds),
    or None where they are missing."""
    if facts["flops"] is None or facts["output_bytes"] is None:
        return None
    return _Cost(facts["input_bytes"] + facts["output_bytes"], facts["param_bytes"], facts["flops"])


def derive_small(path, input_only, full, at_full=None):
    """Overrides that make the task cheap on the CPU, changing only constants that size the
    inputs: batch sizes straight to 2, then the largest of the others halved, each change kept
    only where the forward still runs and leaves no output empty, until the forward is cheap or
    nothing more can shrink. None when the smallest size reached still costs more than the CPU
    can afford. ``at_full``: the full size's cost, if known."""
    names = [n for n in input_only if "[" not in n and _is_int(full.get(n))]
    names.sort(key=lambda n: ("batch" not in n.lower(), -full[n]))
    over, frozen = {}, set()
    cost = at_full or _cost(path, over)
    for _ in range(DERIVED_MAX_TRIES):
        if cost is not None and cost.cheap():
            break
        movable = [n for n in names if n not in frozen and over.get(n, full[n]) > 2]
        if not movable:
            break
        name = movable[0] if "batch" in movable[0].lower() else max(movable, key=lambda n: over.get(n, full[n]))
        value = over.get(name, full[name])
        trial = {**over, name: 2 if "batch" in name.lower() else max(2, value // 2)}
        shrunk = _cost(path, trial)
        if shrunk is None or shrunk.empty:
            frozen.add(name)
            continue
        over, cost = trial, shrunk
    return over if cost is not None and cost.affordable() else None


def small_size(path, input_only, full, at_full=None):
    """The small size's overrides and their source: ``scale.toml``, or ``derived`` (see
    ``derive_small``); raises ``taskfile.OverrideError`` when there is neither."""
    try:
        return taskfile.scale_overrides(path, "small"), "scale.toml"
    except taskfile.OverrideError as missing:
        if input_only is None:
            raise taskfile.OverrideError(f"{missing}, and no size can be derived (the full-size build failed)") from None
        derived = derive_small(path, input_only, full, at_full)
        if derived is None:
            raise taskfile.OverrideError(
                f"{missing}, and shrinking the input-only constants ({', '.join(input_only) or 'none'}) "
                f"does not bring the task under {DERIVED_MAX_BYTES >> 20} MiB and {DERIVED_MAX_FLOPS / 1e9:.0f} GFLOP"
            ) from None
        return derived, "derived"


# ---------------------------------------------------------------------------------------------


def inspect_task(path, atol=ATOL, rtol=RTOL):
    """Facts about one task file; never raises for a failure of the task's own code."""
    facts = {
        "input_bytes": None,
        "output_bytes": None,
        "param_bytes": None,
        "min_bytes": None,
        "flops": None,
        "random_ops": None,
        "input_only_constants": None,
        "nondeterministic": None,
        "degenerate": None,
        "small_size": None,
        "small_overrides": None,
        "errors": [],
    }
    errors = facts["errors"]
    rng = torch.get_rng_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = _full_size(path, facts, errors)
            if built is not None:
                try:
                    facts["input_only_constants"] = _input_only_constants(path, *built)
                except Exception as exc:  # noqa: BLE001
                    errors.append(_say("input-only constants", exc))
            full = vars(built[0]) if built is not None else {}
            try:
                at_full = _full_cost(facts)
                overrides, facts["small_size"] = small_size(path, facts["input_only_constants"], full, at_full)
                facts["small_overrides"] = overrides
                small = _value_facts(path, overrides, "small", "cpu", atol, rtol)
            except taskfile.OverrideError as exc:
                small = {"nondeterministic": None, "degenerate": None, "errors": [f"value facts skipped: {exc}"]}
        errors.extend(small["errors"])
        facts["degenerate"] = small["degenerate"]
        if small["nondeterministic"] is not None or facts["random_ops"] is not None:
            facts["nondeterministic"] = bool(small["nondeterministic"] or facts["random_ops"])
    except Exception as exc:  # noqa: BLE001 - e.g. the file does not parse
        errors.append(_say("inspect", exc))
    finally:
        torch.set_rng_state(rng)
    return facts


def commands(channel):
    """The task inspector's table: command -> handler."""
    return {"inspect": lambda req: {"facts": inspect_task(req.task)}}


def failure(cmd, exc):
    return error("inspect", f"{type(exc).__name__}: {exc}", exc)


def run(channel):
    serve(channel, commands(channel), failure)
