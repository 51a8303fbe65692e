"""The rules on the Python side of a submission: frame and gc access, patched modules, threads,
streams, reduced precision, fallbacks, task globals, tensor subclasses, the environment, dynamic
code and process control."""

from __future__ import annotations

import ast

from .context import _MAX_EXEC_NESTING, SELF_MODULE, Context, _module_level_nodes, under
from .registry import rule, run_rules

FRAME_REFS = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "inspect", "traceback.walk_stack", "threading.settrace")
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_getframe", "_current_frames", "currentframe", "getouterframes"}


@rule("python.frame_access", "warning", "frame and introspection access (sys._getframe, inspect, f_back, f_locals, f_globals, tb_frame): a way to read the harness's locals")
def rule_frame_access(ctx):
    for name, line in ctx.refs:
        if under(name, FRAME_REFS):
            yield line, f"uses {name}, which can reach the harness's frames and the expected output held there"
    for name, line in ctx.api_names:
        if name in FRAME_ATTRS:
            yield line, f"touches `{name}`, a frame or traceback internal that exposes other functions' locals"


GC_REFS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")


@rule("python.gc_scan", "warning", "gc.get_objects / get_referrers / get_referents: a way to find the reference output or the harness's tensors")
def rule_gc_scan(ctx):
    for name, line in ctx.refs:
        if under(name, GC_REFS):
            yield line, f"uses {name}, which can find the reference output or the harness's objects in memory"
    for name, line in ctx.api_names:
        if name in ("get_objects", "get_referrers", "get_referents"):
            yield line, f"calls `{name}`, a garbage-collector scan that can find other code's objects"


@rule("python.ctypes", "warning", "ctypes / cffi: raw memory and native calls from Python")
def rule_ctypes(ctx):
    for name, line in ctx.refs:
        if under(name, ("ctypes", "_ctypes", "cffi")):
            yield line, f"uses {name.split('.')[0]}, which can call native code and write raw memory outside the checks"


TIMING_ROOTS = ("torch", "time", "timeit", "numpy", "triton", "kbench_worker", "builtins")
ERROR_ATTRS = {
    "elapsed_time",
    "record",
    "synchronize",
    "Event",
    "perf_counter",
    "perf_counter_ns",
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
    "process_time_ns",
    "default_timer",
    "do_bench",
    "allclose",
    "isclose",
    "equal",
    "assert_close",
    "assert_allclose",
}
SUSPICIOUS_UNRESOLVED_ATTRS = {"elapsed_time", "perf_counter", "perf_counter_ns", "allclose", "isclose", "assert_close", "synchronize"}
PRECISION_FLAGS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}


def attribute_writes(ctx):
    """(base node, attribute name or None when computed, line, how) for every attribute write."""

    def targets(t):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                yield from targets(e)
        elif isinstance(t, ast.Starred):
            yield from targets(t.value)
        else:
            yield t

    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Assign):
            written = [x for t in node.targets for x in targets(t)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            written = list(targets(node.target))
        elif isinstance(node, ast.Delete):
            written = [x for t in node.targets for x in targets(t)]
        else:
            written = []
        for t in written:
            if isinstance(t, ast.Attribute):
                yield t.value, t.attr, t.lineno, "assignment"
            elif isinstance(t, ast.Subscript):
                base = _namespace_of(ctx, t.value)
                if base is not None:
                    yield base, ctx.const_str(t.slice), t.lineno, "__dict__ write"
        if isinstance(node, ast.Call):
            func = ctx.qualname(node.func)
            if func in ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__", "builtins.type.__setattr__") and len(node.args) >= 2:
                yield node.args[0], ctx.const_str(node.args[1]), node.lineno, func.rsplit(".", 1)[1]
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("__setattr__", "__delattr__") and node.args:
                yield node.func.value, ctx.const_str(node.args[0]), node.lineno, node.func.attr
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault", "__setitem__"):
                base = _namespace_of(ctx, node.func.value)
                if base is not None:
                    key = ctx.const_str(node.args[0]) if node.func.attr != "update" and node.args else None
                    yield base, key, node.lineno, "__dict__ write"


def _namespace_of(ctx, node):
    """For `X.__dict__` or `vars(X)`, the node X; else None."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.vars" and len(node.args) == 1:
        return node.args[0]
    return None


@rule("python.patch_attribute", "warning", "assignment to attributes of torch, timers or other imported modules, also via setattr / __dict__ (error for timing and comparison functions)")
def rule_patch_attribute(ctx):
    for base_node, attr, line, how in attribute_writes(ctx):
        base = ctx.qualname(base_node)
        if base is None:
            if attr in SUSPICIOUS_UNRESOLVED_ATTRS and not (isinstance(base_node, ast.Name) and base_node.id in ("self", "cls")):
                yield line, f"rebinds an attribute named {attr} ({how}), the name of a timing or comparison function"
            continue
        if base == SELF_MODULE:
            continue  # writes to this module's own globals: python.task_globals
        root = base.split(".")[0]
        target = f"{base}.{attr}" if attr else f"{base}.<computed>"
        if attr is None:
            yield line, f"sets a computed attribute name on {base} ({how}), which may rebind a timer or checker", "warning"
        elif attr in ERROR_ATTRS and root in TIMING_ROOTS:
            yield line, f"rebinds {target} ({how}), a timing or comparison function the harness relies on", "error"
        elif under(base, ("torch.backends", "torch._dynamo.config", "torch._inductor.config")):
            if attr not in PRECISION_FLAGS:  # reduced precision: python.reduced_precision
                yield line, f"sets {target}, a global torch configuration flag", "info"
        else:
            yield line, f"rebinds {target} ({how}), changing an imported module for every caller", "warning"


THREAD_REFS = (
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent.futures",
    "torch.multiprocessing",
    "os.fork",
    "os.forkpty",
    "os.register_at_fork",
    "os.posix_spawn",
    "os.posix_spawnp",
    "os.system",
    "os.popen",
    "os.spawnl",
    "os.spawnle",
    "os.spawnlp",
    "os.spawnlpe",
    "os.spawnv",
    "os.spawnve",
    "os.spawnvp",
    "os.spawnvpe",
    "subprocess",
)


@rule("python.threads", "warning", "threads and processes (threading, _thread, multiprocessing, concurrent.futures, os.fork, subprocess): work that escapes the timed call")
def rule_threads(ctx):
    for name, line in ctx.refs:
        if under(name, THREAD_REFS):
            yield line, f"uses {name}, which can run work in another thread or process outside the timed call"


STREAM_REFS = (
    "torch.cuda.Stream",
    "torch.cuda.ExternalStream",
    "torch.cuda.stream",
    "torch.cuda.set_stream",
    "torch.cuda._set_stream",
    "torch.cuda.streams.Stream",
    "torch.cuda.streams.ExternalStream",
    "torch.cuda.StreamContext",
    "torch.Stream",
    "torch._C._cuda_setStream",
    "torch.accelerator.set_stream",
    "cupy.cuda.Stream",
    "cupy.cuda.ExternalStream",
    "cupy.cuda.stream",
    "numba.cuda.stream",
    "pycuda.driver.Stream",
)


@rule("python.streams", "warning", "CUDA streams from Python (torch.cuda.Stream, torch.cuda.stream(...), set_stream): work the caller's stream does not wait for")
def rule_streams(ctx):
    for name, line in ctx.refs:
        if under(name, STREAM_REFS) or (name.startswith("torch.") and name.rsplit(".", 1)[-1] == "set_stream"):
            yield line, f"uses {name}: work on a stream other than the current one is not covered by the caller's timing events unless joined"


@rule("python.cuda_graph", "info", "CUDA graph capture/replay from Python (legitimate, but the static-output and stale-address tricks live here)")
def rule_cuda_graph(ctx):
    for name, line in ctx.refs:
        if under(name, ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables")):
            yield line, f"uses {name}; graph replay must still produce a fresh, correct output for every call"


@rule("python.reduced_precision", "warning", "turning on TF32 / reduced-precision reductions or lowering float32 matmul precision")
def rule_reduced_precision(ctx):
    for node in ast.walk(ctx.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if isinstance(node.value, ast.Constant) and node.value.value is False:
                continue  # turning reduced precision off
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                base = ctx.qualname(t.value) if isinstance(t, ast.Attribute) else None
                if base and t.attr in PRECISION_FLAGS and under(base, ("torch.backends",)):
                    yield t.lineno, f"sets {base}.{t.attr}, letting float32 work run in reduced precision (TF32/fp16/bf16)"
        if isinstance(node, ast.Call) and ctx.qualname(node.func) == "torch.set_float32_matmul_precision":
            value = ctx.const_str(node.args[0]) if node.args else None
            if value != "highest":
                yield node.lineno, f"sets float32 matmul precision to {value or 'a computed value'}, allowing TF32/bf16 for float32 matmuls"


TORCH_NON_COMPUTE = (
    "torch.cuda",
    "torch.utils",
    "torch.backends",
    "torch.version",
    "torch.device",
    "torch.dtype",
    "torch.is_tensor",
    "torch.is_floating_point",
    "torch.get_default_dtype",
    "torch.no_grad",
    "torch.inference_mode",
    "torch.enable_grad",
    "torch.manual_seed",
    "torch.Size",
    "torch.finfo",
    "torch.iinfo",
    "torch.compiler",
    "torch.jit",
    "torch.library",
    "torch.autograd.profiler",
    "torch.profiler",
    "torch.testing",
    "torch.nn.init",
    "torch.nn.Parameter",
    "torch.nn.parameter",
    "torch._C",
    "torch.Generator",
    "torch.set_default_dtype",
    "torch.distributed",
)
TENSOR_METHOD_OPS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "addmm_",
    "baddbmm",
    "addmv",
    "mv",
    "relu",
    "relu_",
    "sigmoid",
    "sigmoid_",
    "tanh",
    "tanh_",
    "softmax",
    "log_softmax",
    "logsumexp",
    "exp",
    "exp_",
    "mean",
    "amax",
    "amin",
    "clamp",
    "clamp_",
    "clamp_min",
    "clamp_min_",
    "clamp_max",
    "clamp_max_",
    "cumsum",
    "cumprod",
    "norm",
    "sqrt",
    "rsqrt",
    "matrix_power",
    "conv2d",
}


def _is_nn_module_class(ctx, node):
    """A class defined in the file that derives (maybe indirectly) from torch.nn.Module, or named Model."""
    if node.name == "Model":
        return True
    for b in node.bases:
        if under(ctx.qualname(b) or "", ("torch.nn.Module",)):
            return True
    return False


def _layer_attributes(ctx, cls):
    """Attributes of ``cls`` assigned an nn layer or a model instance (`self.fc = nn.Linear(...)`)."""
    local_models = {n.name for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef) and _is_nn_module_class(ctx, n)}
    attrs = {}
    if cls is None:
        return attrs
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            q = ctx.qualname(func) or ""
            layer = None
            if under(q, ("torch.nn",)) and not under(q, ("torch.nn.Parameter", "torch.nn.parameter", "torch.nn.functional", "torch.nn.init", "torch.nn.ParameterList", "torch.nn.ParameterDict")):
                layer = q
            elif isinstance(func, ast.Name) and func.id in local_models:
                layer = func.id
            if layer:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        attrs[t.attr] = layer
    return attrs


def _functions(ctx):
    """Module-level functions by name, and methods by (class node, name)."""
    funcs, methods = {}, {}
    for node in ctx.tree.body if isinstance(ctx.tree, ast.Module) else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[(node, item.name)] = item
    return funcs, methods


def _compute_in(ctx, body, cls, layers, funcs, methods, seen):
    """What a block computes with torch/nn/the reference, following local calls; None if nothing."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return "the @ operator"
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            q = ctx.qualname(func)
            if q and q.startswith("torch.") and not under(q, TORCH_NON_COMPUTE):
                return q
            if isinstance(func, ast.Name) and func.id == "Model":
                return "the reference Model"
            if isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id == "self":
                    if func.attr in layers:
                        return f"self.{func.attr} ({layers[func.attr]})"
                    target = methods.get((cls, func.attr))
                    if target is not None and id(target) not in seen:
                        seen.add(id(target))
                        found = _compute_in(ctx, target.body, cls, layers, funcs, methods, seen)
                        if found:
                            return f"{found} via self.{func.attr}"
                if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
                    if owner.attr in layers and func.attr == "forward":
                        return f"self.{owner.attr}.forward ({layers[owner.attr]})"
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super" and func.attr == "forward":
                    return "super().forward (the parent model)"
                if func.attr in TENSOR_METHOD_OPS and q is None and not _is_extension(ctx, owner):
                    return f".{func.attr}()"
            if isinstance(func, ast.Name) and func.id in funcs and id(funcs[func.id]) not in seen:
                seen.add(id(funcs[func.id]))
                found = _compute_in(ctx, funcs[func.id].body, cls, layers, funcs, methods, seen)
                if found:
                    return f"{found} via {func.id}()"
    return None


def _is_extension(ctx, node):
    if isinstance(node, ast.Name):
        return node.id in ctx.ext_handles
    if isinstance(node, ast.Attribute):
        return node.attr in ctx.ext_handles
    return False


@rule("python.try_fallback", "warning", "try/except whose handler computes with torch ops, torch.nn.functional, nn layers or the reference model (a fallback path)")
def rule_try_fallback(ctx):
    funcs, methods = _functions(ctx)
    for node in ast.walk(ctx.tree):
        if not isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            continue
        cls = ctx.enclosing_class(node)
        layers = _layer_attributes(ctx, cls)
        for handler in node.handlers:
            found = _compute_in(ctx, handler.body, cls, layers, funcs, methods, set())
            if found:
                yield handler.lineno, f"the except handler computes with {found}, so the benchmark may run a PyTorch fallback instead of the custom kernel"


@rule(
    "python.task_globals", "info", "redefinition of task globals (batch_size, dim, N, in_channels, ...): module level is info, `global` writes inside functions or globals()[...] writes are warnings"
)
def rule_task_globals(ctx):
    names = ctx.task_names
    for node in _module_level_nodes(ctx.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            if isinstance(ctx.parent.get(node), ast.AugAssign):
                yield node.lineno, f"modifies the task global {node.id} in place at module level", "warning"
                continue
            value = _assigned_value(ctx, node)
            if ctx.task_values is not None and node.id in ctx.task_values and value is not None:
                if ast.dump(value) != ctx.task_values[node.id]:
                    yield node.lineno, f"redefines the task global {node.id} with a value that differs from the task's", "warning"
                    continue
                yield node.lineno, f"redefines the task global {node.id} with the task's own value"
                continue
            yield node.lineno, f"redefines the task global {node.id} at module level (harmless if identical to the task's value)"
    for func in ast.walk(ctx.tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        declared = {n for stmt in ast.walk(func) if isinstance(stmt, ast.Global) for n in stmt.names}
        declared &= set(names)
        if not declared:
            continue
        for node in _own_nodes(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in declared:
                yield node.lineno, f"writes the task global {node.id} from inside {func.name}() via `global`, changing the problem the harness builds", "warning"
    for node in ast.walk(ctx.tree):
        yield from _globals_dict_write(ctx, node, names)


def _assigned_value(ctx, name_node):
    parent = ctx.parent.get(name_node)
    if isinstance(parent, ast.Assign) and name_node in parent.targets:
        return parent.value
    if isinstance(parent, ast.AnnAssign):
        return parent.value
    return None


def _own_nodes(func):
    """Nodes of a function body, not descending into nested functions or classes."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _globals_dict_write(ctx, node, names):
    """globals()[name] = ..., globals().update(...), setattr(sys.modules[__name__], name, ...)."""
    in_function = ctx.enclosing_function(node) is not None
    key_nodes = []
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and _is_globals_call(ctx, t.value):
                key_nodes.append(t.slice)
            if isinstance(t, ast.Attribute) and ctx.qualname(t.value) == SELF_MODULE:
                key_nodes.append(ast.Constant(t.attr))
    elif isinstance(node, ast.Call):
        func = ctx.qualname(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault", "__setitem__") and _is_globals_call(ctx, node.func.value):
            if node.func.attr == "update":
                if node.args and isinstance(node.args[0], ast.Dict) and all(k is not None for k in node.args[0].keys):
                    key_nodes.extend(node.args[0].keys)
                elif node.args:
                    key_nodes.append(None)
                key_nodes.extend(ast.Constant(k.arg) if k.arg else None for k in node.keywords)
            elif node.args:
                key_nodes.append(node.args[0])
        elif func in ("builtins.setattr", "builtins.delattr") and len(node.args) >= 2 and ctx.qualname(node.args[0]) == SELF_MODULE:
            key_nodes.append(node.args[1])
    for key in key_nodes:
        name = ctx.const_str(key) if key is not None else None
        if name is None:
            yield node.lineno, "writes a computed name into the module's globals, which may redefine a task global", "warning"
        elif name in names:
            if in_function:
                yield node.lineno, f"writes the task global {name} through the globals dict from inside a function", "warning"
            else:
                yield node.lineno, f"redefines the task global {name} through the globals dict"


def _is_globals_call(ctx, node):
    return isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.globals"


TENSOR_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter", "torch.nn.parameter.Parameter")
DISPATCH_REFS = ("torch.utils._python_dispatch", "torch.overrides.TorchFunctionMode", "torch._C._disabled_torch_function_impl")
SUBCLASS_NAMES = {"_make_subclass", "_make_wrapper_subclass", "__torch_function__", "__torch_dispatch__"}


@rule("python.tensor_subclass", "warning", "Tensor subclasses, __torch_function__/__torch_dispatch__, _make_subclass, dispatch modes, __class__ swaps: lazy or deferred outputs")
def rule_tensor_subclass(ctx):
    tensor_classes = set()
    classes = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef)]
    for _ in range(len(classes) + 1):  # local classes deriving from local tensor classes
        before = len(tensor_classes)
        for cls in classes:
            for b in cls.bases:
                q = ctx.qualname(b)
                if (q and under(q, TENSOR_BASES)) or (isinstance(b, ast.Name) and b.id in tensor_classes):
                    if cls.name not in tensor_classes:
                        tensor_classes.add(cls.name)
                        yield cls.lineno, f"class {cls.name} subclasses torch.Tensor ({q or b.id}); an output of such a type can defer its work until it is inspected"
        if len(tensor_classes) == before:
            break
    for node in ast.walk(ctx.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__torch_function__", "__torch_dispatch__"):
            yield node.lineno, f"defines {node.name}, which intercepts torch operations on its objects"
        elif isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.type" and len(node.args) == 3:
            bases = node.args[1].elts if isinstance(node.args[1], (ast.Tuple, ast.List)) else [node.args[1]]
            if any(under(ctx.qualname(b) or "", TENSOR_BASES) or (isinstance(b, ast.Name) and b.id in tensor_classes) for b in bases):
                yield node.lineno, "creates a torch.Tensor subclass with type(...), an output type that can defer its work"
    for name, line in ctx.api_names:
        if name in SUBCLASS_NAMES:
            yield line, f"uses {name}, a hook for tensor subclasses whose values can be produced lazily"
    for name, line in ctx.refs:
        if under(name, DISPATCH_REFS):
            yield line, f"uses {name}, which intercepts torch operations globally"
    for base_node, attr, line, _how in attribute_writes(ctx):
        if attr == "__class__":
            yield line, "assigns an object's __class__, which can turn an output into a lazy tensor type"


ENV_WARN_PREFIXES = ("CUDA", "CUBLAS", "CUDNN", "NCCL", "NVIDIA", "PYTORCH", "TORCH", "TRITON", "KBENCH", "LD_", "CUPY")
ENV_BUILD_ONLY = {"TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "MAX_JOBS", "CXX", "CC", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "TORCH_NVCC_FLAGS"}


@rule("python.cuda_environ", "warning", "writes to os.environ (or putenv) of CUDA/torch/harness variables (build-only variables such as TORCH_CUDA_ARCH_LIST are info)")
def rule_cuda_environ(ctx):
    for node in ast.walk(ctx.tree):
        keys = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            keys = [t.slice for t in targets if isinstance(t, ast.Subscript) and ctx.qualname(t.value) == "os.environ"]
        elif isinstance(node, ast.Call):
            func = ctx.qualname(node.func) or ""
            if func in ("os.putenv", "os.unsetenv", "os.environ.setdefault", "os.environ.__setitem__", "os.environ.pop", "os.environ.__delitem__") and node.args:
                keys = [node.args[0]]
            elif func == "os.environ.update":
                if node.args and isinstance(node.args[0], ast.Dict) and all(k is not None for k in node.args[0].keys):
                    keys = list(node.args[0].keys)
                elif node.args:
                    keys = [None]
                keys += [ast.Constant(k.arg) if k.arg else None for k in node.keywords]
            elif func == "os.environ.clear":
                yield node.lineno, "clears os.environ, which changes the CUDA/torch configuration of the process"
        for key in keys:
            name = ctx.const_str(key) if key is not None else None
            if name is None:
                yield node.lineno, "writes an environment variable whose name is computed, possibly a CUDA/torch setting"
            elif name in ENV_BUILD_ONLY:
                yield node.lineno, f"sets {name}, a build-time variable for the extension compiler", "info"
            elif name.upper().startswith(ENV_WARN_PREFIXES):
                yield node.lineno, f"writes the environment variable {name}, which changes how CUDA, torch or the harness behave"


@rule(
    "python.dynamic_code",
    "warning",
    "exec/eval/compile, types.FunctionType/CodeType, marshal/pickle loads, imports of computed names: code the static checks cannot see (a constant string passed to exec is scanned too)",
)
def rule_dynamic_code(ctx):
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Call):
            continue
        func = ctx.qualname(node.func) or ""
        if func in ("builtins.exec", "builtins.eval", "builtins.compile"):
            code = ctx.const_str(node.args[0]) if node.args else None
            if code is None:
                yield node.lineno, f"runs code built at run time with {func.split('.')[1]}(), which static checks cannot read"
                continue
            yield node.lineno, f"runs a constant string with {func.split('.')[1]}(); its findings are reported at this line", "info"
            if ctx.exec_nesting < _MAX_EXEC_NESTING:
                for kind in ("exec", "eval"):
                    try:
                        inner = ast.parse(code, mode=kind)
                        break
                    except (SyntaxError, ValueError):
                        inner = None
                if inner is not None:
                    inner_ctx = Context(code, inner, outer=ctx)
                    for f in run_rules(inner_ctx):
                        yield node.lineno, f"in code run by {func.split('.')[1]}(): {f['why']}", f["severity"], f["rule"]
        elif under(func, ("types.FunctionType", "types.CodeType", "marshal.loads", "pickle.loads", "runpy", "importlib.util.spec_from_loader")):
            yield node.lineno, f"uses {func}, which builds or loads code the static checks cannot read"
        elif func in ("builtins.__import__", "importlib.import_module", "importlib.__import__") and node.args and ctx.const_str(node.args[0]) is None:
            yield node.lineno, "imports a module whose name is computed at run time"


PROCESS_REFS = (
    "os._exit",
    "os.kill",
    "os.killpg",
    "os.abort",
    "os.dup",
    "os.dup2",
    "os.write",
    "os.fdopen",
    "os.close",
    "os.closerange",
    "os.pipe",
    "signal.signal",
    "signal.setitimer",
    "signal.alarm",
    "atexit.register",
    "sys.addaudithook",
    "faulthandler",
)


@rule("python.process_control", "warning", "os._exit, raw fd writes/dups, signals, atexit: ways to forge or cut off the result channel")
def rule_process_control(ctx):
    for name, line in ctx.refs:
        if under(name, PROCESS_REFS):
            yield line, f"uses {name}, which can end the process early or write to descriptors the harness owns"
