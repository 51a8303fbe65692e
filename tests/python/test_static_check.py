"""The static checker (kbench_worker.static_check): every rule trips on a source made for it and
stays quiet on a near miss; honest task files and fixtures never get an error-level finding; the
module runs on a plain Python without torch; the `check` role answers over the protocol."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kbench_worker import static_check
from kbench_worker.static_check import RULES, scan

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "src" / "worker" / "python"

HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"


def cuda(body, python=""):
    """A submission whose CUDA source is ``body`` (the source starts on line 5)."""
    return HEADER + 'cuda_src = r"""\n' + textwrap.dedent(body) + '"""\n' + textwrap.dedent(python)


def py(body):
    return HEADER + textwrap.dedent(body)


def hits(source, rule):
    return [f for f in scan(source, "sub.py") if f["rule"] == rule]


# (id, source, rule, expected severity of the finding, expected line or None)
TRIPS = [
    # python.frame_access
    ("getframe", py("import sys\nf = sys._getframe(2)\n"), "python.frame_access", "warning", 5),
    ("getframe_getattr_split", py("import sys\nf = getattr(sys, '_get' + 'frame')(1)\n"), "python.frame_access", "warning", 5),
    ("inspect_currentframe", py("import inspect\n"), "python.frame_access", "warning", 4),
    ("f_back", py("def f(fr):\n    return fr.f_back.f_locals['output']\n"), "python.frame_access", "warning", 5),
    ("tb_frame", py("import sys\nx = sys.exc_info()[2].tb_frame\n"), "python.frame_access", "warning", 5),
    ("import_dunder_sys", py("s = __import__('s' + 'ys')\nf = s._getframe\n"), "python.frame_access", "warning", 5),
    # python.gc_scan
    ("gc_get_objects", py("import gc\nobjs = gc.get_objects()\n"), "python.gc_scan", "warning", 5),
    ("gc_referrers_alias", py("from gc import get_referrers as g\nr = g(1)\n"), "python.gc_scan", "warning", 4),
    # python.ctypes
    ("ctypes", py("import ctypes\n"), "python.ctypes", "warning", 4),
    ("ctypes_from", py("from ctypes import CDLL\n"), "python.ctypes", "warning", 4),
    # python.patch_attribute
    ("patch_elapsed_time", py("torch.cuda.Event.elapsed_time = lambda self, other: 0.01\n"), "python.patch_attribute", "error", 4),
    ("patch_allclose", py("torch.allclose = lambda *a, **k: True\n"), "python.patch_attribute", "error", 4),
    ("patch_perf_counter", py("import time\ntime.perf_counter = lambda: 0.0\n"), "python.patch_attribute", "error", 5),
    ("patch_alias_event", py("Ev = torch.cuda.Event\nEv.record = lambda *a: None\n"), "python.patch_attribute", "error", 5),
    ("patch_from_import", py("from torch.cuda import Event\nEvent.elapsed_time = None\n"), "python.patch_attribute", "error", 5),
    ("setattr_split_name", py('f = None\nsetattr(torch.cuda.Event, "elapsed" + "_time", f)\n'), "python.patch_attribute", "error", 5),
    ("setattr_fstring_name", py('A = "elapsed"\nsetattr(torch.cuda.Event, f"{A}_time", None)\n'), "python.patch_attribute", "error", 5),
    ("setattr_join_name", py('setattr(torch.testing, "".join(["assert_", "close"]), None)\n'), "python.patch_attribute", "error", 4),
    ("setattr_computed_name", py("def p(name, f):\n    setattr(torch.cuda.Event, name, f)\n"), "python.patch_attribute", "warning", 5),
    ("setattr_time_computed", py("import time\nsetattr(time, input(), None)\n"), "python.patch_attribute", "warning", 5),
    ("dict_write", py('torch.__dict__["isclose"] = None\n'), "python.patch_attribute", "error", 4),
    ("sys_modules_patch", py('import sys\nsys.modules["torch"].equal = None\n'), "python.patch_attribute", "error", 5),
    ("tensor_method_patch", py("torch.Tensor.allclose = lambda *a, **k: True\n"), "python.patch_attribute", "error", 4),
    ("other_torch_attr", py("torch.manual_seed = lambda s: None\n"), "python.patch_attribute", "warning", 4),
    ("patch_type_of_instance", py("Ev = type(torch.cuda.Event(enable_timing=True))\nEv.elapsed_time = None\n"), "python.patch_attribute", "error", 5),
    ("synchronize_patch", py("torch.cuda.synchronize = lambda *a: None\n"), "python.patch_attribute", "error", 4),
    # python.threads
    ("threading", py("import threading\n"), "python.threads", "warning", 4),
    ("_thread", py("import _thread\n_thread.start_new_thread(print, ())\n"), "python.threads", "warning", 4),
    ("multiprocessing", py("from multiprocessing import Process\n"), "python.threads", "warning", 4),
    ("concurrent_futures", py("import concurrent.futures as cf\npool = cf.ThreadPoolExecutor(1)\n"), "python.threads", "warning", 5),
    ("os_fork", py("import os\npid = os.fork()\n"), "python.threads", "warning", 5),
    # python.streams
    ("torch_stream", py("s = torch.cuda.Stream()\n"), "python.streams", "warning", 4),
    ("torch_stream_ctx", py("def f(s, x):\n    with torch.cuda.stream(s):\n        return x * 2\n"), "python.streams", "warning", 5),
    ("set_stream", py("def f(s):\n    torch.cuda.set_stream(s)\n"), "python.streams", "warning", 5),
    ("stream_from_import", py("from torch.cuda import Stream as S\ns = S()\n"), "python.streams", "warning", 4),
    # python.try_fallback
    (
        "try_fallback_functional",
        py("""\
        import torch.nn.functional as F
        class ModelNew(nn.Module):
            def forward(self, x):
                try:
                    return ext.relu(x)
                except RuntimeError:
                    return F.relu(x)
        """),
        "python.try_fallback",
        "warning",
        9,
    ),
    (
        "try_fallback_torch_op",
        py("""\
        class ModelNew(nn.Module):
            def forward(self, a, b):
                try:
                    return ext.mm(a, b)
                except Exception:
                    return torch.matmul(a, b)
        """),
        "python.try_fallback",
        "warning",
        8,
    ),
    (
        "try_fallback_layer",
        py("""\
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                try:
                    return ext.gemm(x, self.fc.weight)
                except Exception:
                    return self.fc(x)
        """),
        "python.try_fallback",
        "warning",
        11,
    ),
    (
        "try_fallback_reference_model",
        py("""\
        class ModelNew(nn.Module):
            def forward(self, x):
                try:
                    return ext.f(x)
                except Exception:
                    return Model()(x)
        """),
        "python.try_fallback",
        "warning",
        8,
    ),
    (
        "try_fallback_via_method",
        py("""\
        class ModelNew(nn.Module):
            def slow(self, x):
                return torch.softmax(x, dim=1)
            def forward(self, x):
                try:
                    return ext.f(x)
                except Exception:
                    return self.slow(x)
        """),
        "python.try_fallback",
        "warning",
        10,
    ),
    (
        "try_fallback_matmul_operator",
        py("""\
        def f(a, b):
            try:
                return ext.mm(a, b)
            except Exception:
                return a @ b
        """),
        "python.try_fallback",
        "warning",
        7,
    ),
    # python.task_globals
    ("task_global_module_level", py("batch_size = 16\n"), "python.task_globals", "info", 4),
    ("task_global_via_global", py("def shrink():\n    global batch_size\n    batch_size = 1\n"), "python.task_globals", "warning", 6),
    ("task_global_globals_dict", py("def shrink():\n    globals()['dim'] = 1\n"), "python.task_globals", "warning", 5),
    ("task_global_sys_modules", py("import sys\ndef shrink():\n    setattr(sys.modules[__name__], 'N', 8)\n"), "python.task_globals", "warning", 6),
    # python.tensor_subclass
    ("tensor_subclass", py("class Lazy(torch.Tensor):\n    pass\n"), "python.tensor_subclass", "warning", 4),
    ("tensor_subclass_alias", py("T = torch.Tensor\nclass Lazy(T):\n    pass\n"), "python.tensor_subclass", "warning", 5),
    ("torch_function", py("class Lazy:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        pass\n"), "python.tensor_subclass", "warning", 6),
    ("make_subclass_getattr", py('mk = getattr(torch.Tensor, "_make_" "subclass")\n'), "python.tensor_subclass", "warning", 4),
    ("make_subclass_getattr_concat", py('mk = getattr(torch.Tensor, "_make_" + "subclass")\n'), "python.tensor_subclass", "warning", 4),
    ("type_call_subclass", py('Lazy = type("Lazy", (torch.Tensor,), {})\n'), "python.tensor_subclass", "warning", 4),
    # python.cuda_environ
    ("environ_cuda", py('import os\nos.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n'), "python.cuda_environ", "warning", 5),
    ("environ_torch_update", py('import os\nos.environ.update({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})\n'), "python.cuda_environ", "warning", 5),
    ("environ_setdefault", py('from os import environ\nenviron.setdefault("NVIDIA_TF32_OVERRIDE", "1")\n'), "python.cuda_environ", "warning", 5),
    ("environ_arch_list_info", py('import os\nos.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"\n'), "python.cuda_environ", "info", 5),
    # python.dynamic_code
    ("exec_computed", py("def f(s):\n    exec(s)\n"), "python.dynamic_code", "warning", 5),
    ("exec_constant_info", py('exec("x = 1")\n'), "python.dynamic_code", "info", 4),
    # python.process_control
    ("os_exit", py("import os\nos._exit(0)\n"), "python.process_control", "warning", 5),
    # python.reduced_precision
    ("allow_tf32", py("torch.backends.cuda.matmul.allow_tf32 = True\n"), "python.reduced_precision", "warning", 4),
    ("matmul_precision", py('torch.set_float32_matmul_precision("high")\n'), "python.reduced_precision", "warning", 4),
    # python.cuda_graph
    ("cuda_graph_python", py("g = torch.cuda.CUDAGraph()\n"), "python.cuda_graph", "info", 4),
    # cuda.stream_create
    (
        "cudaStreamCreate",
        cuda("""\
        void f() {
            cudaStream_t s;
            cudaStreamCreate(&s);
        }
        """),
        "cuda.stream_create",
        "warning",
        7,
    ),
    (
        "cudaStreamCreateWithFlags",
        cuda("""\
        cudaStream_t s;
        void f() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
        """),
        "cuda.stream_create",
        "warning",
        6,
    ),
    ("cudaStreamCreateWithPriority", cuda("void f() { cudaStream_t s; cudaStreamCreateWithPriority(&s, 0, -1); }\n"), "cuda.stream_create", "warning", 5),
    ("getStreamFromPool", cuda("auto s = at::cuda::getStreamFromPool(true);\n"), "cuda.stream_create", "warning", 5),
    ("stream_per_thread", cuda("void f() { k<<<1, 1, 0, cudaStreamPerThread>>>(); }\n"), "cuda.stream_create", "warning", 5),
    ("cuda_python_stream", py("from cuda import cudart\nerr, s = cudart.cudaStreamCreate()\n"), "cuda.stream_create", "warning", 5),
    ("stream_create_split_literal", py('src = "void f() { cudaStream" "Create(&s); }"\n'), "cuda.stream_create", "warning", 4),
    ("stream_create_concat", py('src = "void f() { cudaStream" + "Create(&s); }"\n'), "cuda.stream_create", "warning", 4),
    # cuda.graph
    (
        "cudaGraphLaunch",
        cuda("""\
        void f(cudaGraphExec_t g, cudaStream_t s) {
            cudaGraphLaunch(g, s);
        }
        """),
        "cuda.graph",
        "warning",
        6,
    ),
    ("cudaStreamBeginCapture", cuda("void f(cudaStream_t s) { cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal); }\n"), "cuda.graph", "warning", 5),
    # cuda.l2_persistence
    (
        "accessPolicyWindow",
        cuda("""\
        void f(cudaStream_t s, void* p, size_t n) {
            cudaStreamAttrValue attr;
            attr.accessPolicyWindow.base_ptr = p;
            cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
        }
        """),
        "cuda.l2_persistence",
        "warning",
        7,
    ),
    ("persisting_limit", cuda("void f() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 25); }\n"), "cuda.l2_persistence", "warning", 5),
    # cuda.launch_attributes
    (
        "launch_ex_pdl",
        cuda("""\
        void f() {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attrs[1];
            attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            cfg.attrs = attrs;
            cfg.numAttrs = 1;
            cudaLaunchKernelEx(&cfg, kernel, 1);
        }
        """),
        "cuda.launch_attributes",
        "warning",
        11,
    ),
    (
        "launch_ex_cluster_info",
        cuda("""\
        void f() {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attrs[1];
            attrs[0].id = cudaLaunchAttributeClusterDimension;
            cfg.numAttrs = 1;
            cudaLaunchKernelEx(&cfg, kernel, 1);
        }
        """),
        "cuda.launch_attributes",
        "info",
        10,
    ),
    # cuda.host_thread
    (
        "std_thread",
        cuda("""\
        #include <thread>
        void f() {
            std::thread t([] { launch(); });
            t.detach();
        }
        """),
        "cuda.host_thread",
        "warning",
        7,
    ),
    ("pthread_create", cuda("void f() { pthread_t t; pthread_create(&t, nullptr, work, nullptr); }\n"), "cuda.host_thread", "warning", 5),
    ("std_async", cuda("auto fut = std::async(std::launch::async, work);\n"), "cuda.host_thread", "warning", 5),
    # cuda.native_hook
    ("dlsym", cuda('void* p = dlsym(RTLD_NEXT, "cudaEventElapsedTime");\n'), "cuda.native_hook", "warning", 5),
]

# (id, source, rule): the rule must not trip
QUIET = [
    ("pass_everywhere", py("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        pass\n    def forward(self, x):\n        pass\n"), None),
    ("frame_word_in_name", py("frame_count = 3\ninspected = True\n"), "python.frame_access"),
    ("gc_collect", py("import gc\ngc.collect()\n"), "python.gc_scan"),
    ("ctypes_in_string", py('msg = "ctypes is not used"\n'), "python.ctypes"),
    (
        "self_attribute",
        py("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.time = 0\n        self.record = []\n        self.allclose = True\n"),
        "python.patch_attribute",
    ),
    ("local_name_rebinding", py("from time import perf_counter\nperf_counter = None\n"), "python.patch_attribute"),
    ("setattr_on_self", py("class A:\n    def f(self, name, v):\n        setattr(self, name, v)\n"), "python.patch_attribute"),
    ("tf32_off", py("torch.backends.cuda.matmul.allow_tf32 = False\n"), "python.reduced_precision"),
    ("threading_in_comment", py("# we do not use threading here\nx = 'threading'\n"), "python.threads"),
    ("current_stream_python", py("def f():\n    s = torch.cuda.current_stream()\n    s.synchronize()\n    stream_count = 1\n"), "python.streams"),
    ("stream_word_in_names", py("stream = None\ndef my_stream_helper(stream_id):\n    return stream_id\n"), "python.streams"),
    (
        "try_reraise",
        py("""\
        class ModelNew(nn.Module):
            def forward(self, x):
                try:
                    return ext.relu(x)
                except RuntimeError as e:
                    raise RuntimeError(f"kernel failed: {e}") from e
        """),
        "python.try_fallback",
    ),
    ("try_import_fallback", py("try:\n    import triton\nexcept ImportError:\n    triton = None\n"), "python.try_fallback"),
    (
        "try_extension_handle_in_handler",
        py("""\
        ext = load_inline(name="x", cpp_sources="", cuda_sources="")
        def f(x):
            try:
                return ext.relu_vec4(x)
            except RuntimeError:
                return ext.relu(x)
        """),
        "python.try_fallback",
    ),
    ("try_cuda_sync_in_handler", py("try:\n    pass\nexcept Exception:\n    torch.cuda.synchronize()\n    print('failed')\n"), "python.try_fallback"),
    (
        "nn_linear_parameter_container",
        py("""\
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.gemm = nn.Linear(in_features, out_features)
            def forward(self, x):
                return ext.gemm(x, self.gemm.weight, self.gemm.bias)
        """),
        None,
    ),
    ("global_non_task_name", py("_ext = None\ndef get_ext():\n    global _ext\n    _ext = 1\n    return _ext\n"), "python.task_globals"),
    ("local_task_name", py("def f(x):\n    batch_size = x.shape[0]\n    return batch_size\n"), "python.task_globals"),
    ("tensor_annotation", py("def f(x: torch.Tensor) -> torch.Tensor:\n    return x\n"), "python.tensor_subclass"),
    ("environ_read", py('import os\nv = os.environ.get("CUDA_HOME")\nw = os.environ["PATH"]\n'), "python.cuda_environ"),
    (
        "current_stream_cpp",
        cuda("""\
        void f(float* y, const float* x, int n) {
            cudaStream_t stream = at::cuda::getCurrentCUDAStream();
            auto s2 = c10::cuda::getCurrentCUDAStream();
            relu<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
        }
        """),
        "cuda.stream_create",
    ),
    (
        "legacy_launch",
        cuda("""\
        void f(float* y, const float* x, int n) {
            dim3 grid((n + 255) / 256), block(256);
            relu<<<grid, block>>>(x, y, n);
        }
        """),
        "cuda.stream_create",
    ),
    (
        "stream_create_in_comment",
        cuda("""\
        // no cudaStreamCreate(&s) here: we launch on the current stream
        /* cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); */
        void f() {}
        """),
        "cuda.stream_create",
    ),
    (
        "stream_create_in_cpp_string",
        cuda("""\
        void f() { TORCH_CHECK(false, "cudaStreamCreate(&s) is not allowed"); }
        """),
        "cuda.stream_create",
    ),
    ("stream_create_in_docstring", py('"""We never call cudaStreamCreate(&s) or std::thread t(f);"""\n'), None),
    (
        "stream_create_raw_cpp_string",
        cuda("""\
        const char* doc = R"x(cudaStreamCreate(&s); std::thread t;)x";
        """),
        "cuda.stream_create",
    ),
    ("hardware_concurrency", cuda("unsigned n = std::thread::hardware_concurrency();\n#include <thread>\n"), "cuda.host_thread"),
    ("graph_word", cuda("// a CUDA graph would help\nint graph_nodes = 3;\n"), "cuda.graph"),
    ("digit_separator", cuda("const int n = 1'000'000; // cudaStreamCreate(\nint m = 2;\n"), "cuda.stream_create"),
    ("ctx_reset_persisting", cuda("void f() { cudaCtxResetPersistingL2Cache(); }\n"), "cuda.l2_persistence"),
    ("launch_ex_without_attributes", cuda("void f() { cudaLaunchConfig_t cfg = {}; cfg.numAttrs = 0; cudaLaunchKernelEx(&cfg, k, 1); }\n"), "cuda.launch_attributes"),
]


@pytest.mark.parametrize("case", TRIPS, ids=[c[0] for c in TRIPS])
def test_rule_trips(case):
    _, source, rule, severity, line = case
    found = hits(source, rule)
    assert found, f"{rule} did not trip; all findings: {scan(source, 'sub.py')}"
    assert any(f["severity"] == severity for f in found), found
    if line is not None:
        assert any(f["line"] == line and f["severity"] == severity for f in found), found


@pytest.mark.parametrize("case", QUIET, ids=[c[0] for c in QUIET])
def test_rule_quiet(case):
    _, source, rule = case
    findings = scan(source, "sub.py")
    if rule is None:
        assert findings == [], findings
    else:
        assert [f for f in findings if f["rule"] == rule] == [], findings


def test_every_rule_has_a_tripping_case():
    tripped = {c[2] for c in TRIPS}
    assert {r.name for r in RULES} <= tripped


def test_finding_shape_and_order():
    source = py("""\
        import threading, ctypes
        torch.allclose = lambda *a, **k: True
        s = torch.cuda.Stream()
        """)
    findings = scan(source, "sub.py")
    assert [f["line"] for f in findings] == sorted(f["line"] for f in findings)
    for f in findings:
        assert set(f) == {"rule", "severity", "line", "why"}
        assert f["severity"] in ("info", "warning", "error")
        assert isinstance(f["line"], int) and f["line"] >= 1
        assert f["why"] and "\n" not in f["why"]
    assert {f["rule"] for f in findings} >= {"python.threads", "python.ctypes", "python.patch_attribute", "python.streams"}


def test_cuda_line_maps_to_python_line_in_implicit_concatenation():
    source = py('src = ("void f() {}\\n"\n       "void g() { cudaStreamCreate(&s); }\\n")\n')
    assert [f["line"] for f in hits(source, "cuda.stream_create")] == [5]


def test_cuda_line_in_fstring():
    source = py('B = 128\nsrc = f"""\n#define BLOCK {B}\nvoid f() {{\n    cudaGraphLaunch(g, s);\n}}\n"""\n')
    assert [f["line"] for f in hits(source, "cuda.graph")] == [8]


def test_exec_of_constant_code_is_scanned():
    source = py('exec("import threading\\nthreading.Thread(target=print).start()")\n')
    found = hits(source, "python.threads")
    assert found and all(f["line"] == 4 for f in found)


def test_task_source_compares_values():
    task = "batch_size = 16\ndim = 4096\n"
    same = scan(py("batch_size = 16\n"), "sub.py", task_source=task)
    other = scan(py("dim = 8\n"), "sub.py", task_source=task)
    assert [f["severity"] for f in same if f["rule"] == "python.task_globals"] == ["info"]
    assert [f["severity"] for f in other if f["rule"] == "python.task_globals"] == ["warning"]


def test_syntax_error_raises_and_check_file_reports(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    with pytest.raises(SyntaxError):
        scan(bad.read_text(), str(bad))
    result = static_check.check_file(str(bad))
    assert result["findings"] == []
    assert result["error"].startswith("syntax error: ") and result["error"].endswith("(line 1)")
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\x00\n")
    assert static_check.check_file(str(nul))["error"].startswith("syntax error")


# Every task file, every example and every fixture that is not a cheat on purpose (cheat_*.py;
# some cheats are only visible at run time).
HONEST = sorted(p for base in ("tests/fixtures", "benchmarks/example", "level1", "level2", "level3") for p in (ROOT / base).rglob("*.py") if not p.name.startswith("cheat_"))


@pytest.mark.parametrize("path", HONEST, ids=[str(p.relative_to(ROOT)) for p in HONEST])
def test_honest_files_have_no_error(path):
    source = path.read_text()
    try:
        findings = scan(source, str(path))
    except SyntaxError:
        assert path.name == "syntax_error.py"
        return
    assert [f for f in findings if f["severity"] == "error"] == []


def test_imports_without_torch():
    """System python3 (no torch): the module and the role must import with the standard library."""
    probe = "import sys; sys.path.insert(0, 'src/worker/python'); import kbench_worker.static_check as s; assert 'torch' not in sys.modules; print(len(s.RULES))"
    for exe in ("python3", sys.executable):
        out = subprocess.run([exe, "-S", "-c", probe], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert int(out.stdout) == len(RULES)


def test_check_role_over_protocol(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(py("import threading\n"))
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(WORKER)
    env["KBENCH_PROTOCOL_FDS"] = f"{req_r},{resp_w}"
    proc = subprocess.Popen(
        ["python3", "-m", "kbench_worker", "check"],
        env=env,
        pass_fds=(req_r, resp_w),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(req_r)
    os.close(resp_w)
    with os.fdopen(req_w, "w") as w, os.fdopen(resp_r) as r:
        w.write(json.dumps({"v": 1, "key": "k"}) + "\n")
        w.write(json.dumps({"v": 1, "cmd": "check_files", "files": [str(good), str(bad)]}) + "\n")
        w.flush()
        reply = json.loads(r.readline().split(" ", 1)[1])
        w.write(json.dumps({"v": 1, "cmd": "exit"}) + "\n")
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    assert reply["ok"] is True
    first, second = reply["results"]
    assert first["file"] == str(good) and first["error"] is None
    assert [f["rule"] for f in first["findings"]] == ["python.threads"]
    assert second["file"] == str(bad) and second["findings"] == []
    assert second["error"].startswith("syntax error: ") and second["error"].endswith("(line 1)")
