"""The rules on C++/CUDA in a submission's strings (the same API names used from Python count
too): streams, graphs, L2 persistence, launch attributes, host threads, native hooks."""

from __future__ import annotations

from .cpp import _call_args, _next, _prev, cpp_calls, cpp_idents
from .registry import rule

STREAM_CREATE = {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cuStreamCreate", "cuStreamCreateWithPriority", "getStreamFromPool", "getStreamFromExternal"}


@rule("cuda.stream_create", "warning", "C++ stream creation (cudaStreamCreate*, getStreamFromPool/External) or cudaStreamPerThread: launches the caller's stream does not wait for")
def rule_cuda_stream_create(ctx):
    for line, name in cpp_calls(ctx, STREAM_CREATE):
        yield line, f"calls {name}: work on a private stream escapes the caller's timing events unless joined back"
    for line, name in cpp_idents(ctx, {"cudaStreamPerThread", "CU_STREAM_PER_THREAD"}):
        yield line, f"uses {name}, a stream other than the caller's current stream"


GRAPH_CALLS = {"cudaGraphLaunch", "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cuGraphLaunch", "cuStreamBeginCapture"}


@rule("cuda.graph", "warning", "CUDA graph capture or launch in C++ (cudaStreamBeginCapture, cudaGraphLaunch, at::cuda::CUDAGraph)")
def rule_cpp_cuda_graph(ctx):
    for line, name in cpp_calls(ctx, GRAPH_CALLS):
        yield line, f"calls {name}: a replayed graph can return a static buffer or run on inputs it captured earlier"
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and t.value == "CUDAGraph":
                yield text.line_of(t.offset), "uses at::cuda::CUDAGraph: a replayed graph can return a static buffer or run on stale inputs"


L2_IDENTS = {
    "accessPolicyWindow",
    "cudaLimitPersistingL2CacheSize",
    "cudaAccessPropertyPersisting",
    "cudaStreamAttributeAccessPolicyWindow",
    "cudaLaunchAttributeAccessPolicyWindow",
    "cudaKernelNodeAttributeAccessPolicyWindow",
    "cudaAccessPolicyWindow",
    "CU_LIMIT_PERSISTING_L2_CACHE_SIZE",
    "CU_ACCESS_PROPERTY_PERSISTING",
    "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW",
    "CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW",
    "CUaccessPolicyWindow",
}


@rule("cuda.l2_persistence", "warning", "L2 persistence (accessPolicyWindow, cudaLimitPersistingL2CacheSize, cudaStreamSetAttribute with an access policy): inputs kept in L2 across the cache flush")
def rule_cuda_l2(ctx):
    for line, name in cpp_idents(ctx, L2_IDENTS):
        yield line, f"uses {name}: persisting L2 lines survive the harness's cache flush between timed calls"
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and t.value in ("cudaStreamSetAttribute", "cuStreamSetAttribute") and _next(toks, k, "("):
                if any(a.kind == "id" and ("AccessPolicy" in a.value or "ACCESS_POLICY" in a.value) for a in _call_args(toks, k)):
                    yield text.line_of(t.offset), f"{t.value} sets an access-policy window: inputs can persist in L2 across the cache flush"


LAUNCH_EX = {"cudaLaunchKernelEx", "cudaLaunchKernelExC", "cuLaunchKernelEx"}
BENIGN_LAUNCH_ATTRS = {
    "cudaLaunchAttributeClusterDimension",
    "cudaLaunchAttributeClusterSchedulingPolicyPreference",
    "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION",
    "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE",
    "cudaLaunchAttributeID",
    "cudaLaunchAttribute",
    "CUlaunchAttribute",
    "cudaLaunchAttributeValue",
    "CUlaunchAttributeValue",
}


@rule("cuda.launch_attributes", "warning", "cudaLaunchKernelEx with launch attributes (programmatic serialization, access policy, priority; cluster dimensions alone are info)")
def rule_cuda_launch_attributes(ctx):
    for text, toks in ctx.cpp():
        attrs = sorted({t.value for t in toks if t.kind == "id" and (t.value.startswith("cudaLaunchAttribute") or t.value.startswith("CU_LAUNCH_ATTRIBUTE"))})
        num_attrs = any(t.value == "numAttrs" and _next(toks, k, "=") and k + 2 < len(toks) and toks[k + 2].value != "0" for k, t in enumerate(toks))
        risky = [a for a in attrs if a not in BENIGN_LAUNCH_ATTRS]
        for k, t in enumerate(toks):
            if t.kind != "id" or t.value not in LAUNCH_EX or not _next(toks, k, "("):
                continue
            line = text.line_of(t.offset)
            if risky:
                yield line, f"{t.value} launches with attributes ({', '.join(risky)}) that change stream ordering, priority or caching"
            elif attrs or num_attrs:
                yield line, f"{t.value} launches with attributes ({', '.join(attrs) or 'numAttrs set'})", "info"


@rule("cuda.host_thread", "warning", "host threads in C++ (std::thread, std::jthread, pthread_create, std::async, at::launch): work after forward returns")
def rule_cuda_host_thread(ctx):
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind != "id":
                continue
            qualified = k >= 2 and toks[k - 1].value == "::"
            owner = toks[k - 2].value if qualified else None
            if t.value in ("thread", "jthread") and owner == "std" and not _next(toks, k, "::"):
                yield text.line_of(t.offset), f"uses std::{t.value}, a host thread that can launch work outside the timed call"
            elif t.value == "async" and owner == "std" and _next(toks, k, "("):
                yield text.line_of(t.offset), "calls std::async, which can run work on another host thread"
            elif t.value == "launch" and owner == "at" and _next(toks, k, "("):
                yield text.line_of(t.offset), "calls at::launch, which runs work on torch's inter-op thread pool"
            elif t.value in ("pthread_create", "thrd_create") and _next(toks, k, "(") and not _prev(toks, k, "."):
                yield text.line_of(t.offset), f"calls {t.value}, a host thread that can launch work outside the timed call"


NATIVE_HOOKS = {"dlsym", "dlopen", "mprotect", "ptrace", "dl_iterate_phdr"}


@rule("cuda.native_hook", "warning", "dlsym/dlopen/mprotect/ptrace/RTLD_NEXT in C++: patching timers or the runtime from native code")
def rule_cuda_native_hook(ctx):
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and ((t.value in NATIVE_HOOKS and _next(toks, k, "(") and not _prev(toks, k, ".")) or t.value == "RTLD_NEXT"):
                yield text.line_of(t.offset), f"uses {t.value}, which can hook or patch functions (timers, the CUDA runtime) in native code"
