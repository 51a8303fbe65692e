"""One-line causes of failures: the first compiler error, the TorchScript error itself."""

import pytest

from kbench_worker.wire import cause, errors

NVCC = """Error building extension 'fused_ext': [1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -arch=sm_70 -c cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc -arch=sm_70 -c cuda.cu -o cuda.cuda.o
/usr/local/cuda/bin/nvcc fatal   : Unsupported gpu architecture 'compute_70'
ninja: build stopped: subcommand failed.
"""

GCC = """Error building extension 'relu': [1/2] c++ -MMD -MF main.o.d -c main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -Wno-error=deprecated -c main.cpp -o main.o
main.cpp: In function 'at::Tensor relu_forward(at::Tensor)':
/tmp/build/ab12/torch_extensions/relu/main.cpp:7:32: error: cannot convert 'float*' to 'int*' in initialization
    7 |     int* in = xc.data_ptr<float>();
main.cpp:9:5: error: 'n' was not declared in this scope
ninja: build stopped: subcommand failed.
"""


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            NVCC,
            "environment: the installed nvcc no longer supports compute_70 (--compat raises it); extension 'fused_ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70'",
        ),
        (GCC, "extension 'relu' failed to build: main.cpp:7:32: error: cannot convert 'float*' to 'int*' in initialization"),
    ],
)
def test_a_build_failure_names_the_first_compiler_error(text, expected):
    assert cause.build_message(RuntimeError(text)) == expected


# torch 2.11 headers, g++ (reproduced on the CPU) and nvcc's front end, on
# `AT_DISPATCH_FLOATING_TYPES(x.type(), ...)`.
DISPATCH_GCC = """Error building extension 'relu': [1/2] c++ -MMD -MF main.o.d -c main.cpp -o main.o
FAILED: [code=1] main.o
main.cpp:6:36: warning: 'at::DeprecatedTypeProperties& at::Tensor::type() const' is deprecated: Tensor.type() is deprecated.
    6 |   AT_DISPATCH_FLOATING_TYPES(x.type(), "relu", ([&] {
/tmp/b/main.cpp:6:3: error: cannot convert 'const at::DeprecatedTypeProperties' to 'c10::ScalarType'
torch/include/torch/headeronly/core/Dispatch.h:23:35: note:   initializing argument 1 of 'c10::ScalarType detail::scalar_type(c10::ScalarType)'
ninja: build stopped: subcommand failed.
"""
DISPATCH_NVCC = """Error building extension 'relu': [1/3] nvcc -c cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
cuda.cu(12): error: no suitable conversion function from "const at::DeprecatedTypeProperties" to "c10::ScalarType" exists
"""


@pytest.mark.parametrize("text", [DISPATCH_GCC, DISPATCH_NVCC])
def test_a_dispatch_on_tensor_type_is_named_toolchain_drift(text):
    import torch

    message = cause.build_message(RuntimeError(text))
    version = torch.__version__.split("+")[0]
    assert message.startswith(f"environment: the kernel uses AT_DISPATCH on x.type(), which torch {version} removed (use x.scalar_type()); extension 'relu' failed to build: ")
    assert "DeprecatedTypeProperties" in message


def test_a_kernel_error_is_not_drift():
    assert not cause.build_message(RuntimeError(GCC)).startswith("environment:")
    assert cause.drifted(GCC) is None
    assert "drift" not in errors.build_error(RuntimeError(GCC))


@pytest.mark.parametrize("text", [NVCC, DISPATCH_GCC, DISPATCH_NVCC])
def test_drift_is_a_field_of_the_build_error_kbench_reads(text):
    """kbench's verdict `environment` reads the record's `drift`, never its message; the message
    says the same for people."""
    record = errors.build_error(RuntimeError(text))
    assert record["kind"] == "build"
    assert record["drift"] == cause.drifted(text)
    assert record["message"].startswith(f"environment: {record['drift']}; extension ")


def test_a_build_failure_without_compiler_output_says_what_it_has():
    assert cause.build_message(RuntimeError("Error building extension 'x'")) == ("extension 'x' failed to build: RuntimeError: Error building extension 'x'")


def test_a_torchscript_error_names_the_raised_exception():
    text = (
        "The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript (most recent call last):\n"
        '  File "sub.py", line 12, in forward\n'
        "    return torch.mm(x, w)\n"
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)\n"
    )
    assert cause.line(RuntimeError(text)) == ("TorchScript RuntimeError: RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)")


def test_any_other_error_is_its_first_line_clipped():
    assert cause.line(ValueError("\n\nbad value\nmore detail")) == "ValueError: bad value"
    assert len(cause.line(ValueError("x" * 5000))) == cause.LINE_CHARS
    assert cause.line(KeyError()) == "KeyError"


def test_a_build_failed_in_the_pool_fails_the_same_in_the_gpu_worker_without_compiling(tmp_path, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.checks import kernels

    calls = []

    def failing_load_inline(*args, **kwargs):
        calls.append(kwargs["name"])
        assert kwargs["verbose"] is False, "quiet builds put the compiler's output into the error"
        raise RuntimeError(GCC)

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpp_extension, "load_inline", failing_load_inline)
    monkeypatch.setattr(cpp_extension, "load", failing_load_inline)
    monkeypatch.setattr(kernels, "_failed", [])
    kernels.watch_extensions()
    load = {
        "name": "relu",
        "cpp_sources": "int f();",
        "extra_cuda_cflags": ["-O3"],
        "verbose": True,
        "build_directory": "/pool/build",
    }
    native = {"name": "relu", "cpp_sources": "int f();", "extra_cuda_cflags": ["-arch=native"]}

    monkeypatch.setattr(kernels, "remember", True)  # the compile pool
    for kwargs in (load, native):
        with pytest.raises(RuntimeError):
            cpp_extension.load_inline(**kwargs)
    assert calls == ["relu", "relu"]

    monkeypatch.setattr(kernels, "remember", False)  # the GPU worker, its file elsewhere
    with pytest.raises(RuntimeError, match="Error building extension 'relu'"):
        cpp_extension.load_inline(**{**load, "build_directory": "/slot/build"})
    assert calls == ["relu", "relu"], "the pool's failure is raised again, nothing compiled"
    with pytest.raises(RuntimeError):
        cpp_extension.load_inline(**native)
    assert calls == ["relu", "relu", "relu"], "a build for the GPU at hand is not taken from the pool"
    with pytest.raises(RuntimeError):
        cpp_extension.load_inline(**{**load, "cpp_sources": "int g();"})
    assert len(calls) == 4, "other sources build again"
    # Only flags name the architecture: sources that say "alternative" are remembered.
    alternative = {**load, "cpp_sources": "// an alternative kernel\nint h();"}
    monkeypatch.setattr(kernels, "remember", True)
    with pytest.raises(RuntimeError):
        cpp_extension.load_inline(**alternative)
    monkeypatch.setattr(kernels, "remember", False)
    with pytest.raises(RuntimeError, match="Error building extension 'relu'"):
        cpp_extension.load_inline(**alternative)
    assert len(calls) == 5, "the pool's failure is raised again, nothing compiled"
    causes = {f["cause"] for f in kernels.failures()}
    assert causes == {"extension 'relu' failed to build: main.cpp:7:32: error: cannot convert 'float*' to 'int*' in initialization"}
    assert {f["drift"] for f in kernels.failures()} == {None}, "a kernel's own error is no drift"


def test_a_failed_build_into_a_folder_of_its_own_is_remembered(tmp_path, monkeypatch):
    """A load with its own `build_directory` leaves TORCH_EXTENSIONS_DIR unmade (torch makes it
    only for builds of its own): the pool's failure is remembered there all the same (on an H100,
    four CUDA-L1 kernels built their failing extension again in the GPU slot, 23-96 s each)."""
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.checks import kernels

    calls = []

    def failing_load_inline(*args, **kwargs):
        calls.append(kwargs["name"])
        raise RuntimeError(GCC)

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "builds" / "torch_extensions"))
    monkeypatch.setattr(cpp_extension, "load_inline", failing_load_inline)
    monkeypatch.setattr(kernels, "_failed", [])
    kernels.watch_extensions()
    load = {"name": "relu", "cpp_sources": "int f();", "build_directory": "cuda_extensions"}
    monkeypatch.setattr(kernels, "remember", True)  # the compile pool
    with pytest.raises(RuntimeError):
        cpp_extension.load_inline(**load)
    monkeypatch.setattr(kernels, "remember", False)  # the GPU worker
    with pytest.raises(RuntimeError, match="Error building extension 'relu'"):
        cpp_extension.load_inline(**load)
    assert calls == ["relu"], "the pool's failure is raised again, nothing compiled"


def test_builds_run_quietly_whatever_the_submission_asked(monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.checks import kernels

    seen = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kwargs: seen.append(kwargs))
    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    kernels.watch_extensions()
    cpp_extension.load("a", ["a.cpp"], verbose=True)
    cpp_extension.load("b", ["b.cpp"], None, None, None, None, None, None, True)  # verbose by position
    assert seen == [
        {"name": "a", "sources": ["a.cpp"], "verbose": False},
        {"name": "b", "sources": ["b.cpp"], "extra_cflags": None, "extra_cuda_cflags": None, "extra_sycl_cflags": None, "extra_ldflags": None, "extra_include_paths": None, "verbose": False},
    ]


def test_sources_written_at_run_time_build_where_the_pool_built_them(tmp_path, monkeypatch):
    """A submission that writes its sources when it runs, into a temporary folder of its own,
    hands torch the same files in the pool and in the GPU worker, no newer than the pool's
    build, and neither builds in its own `build_directory` (on an H100, four CUDA-L1 kernels
    compiled again in the GPU slot, 20-69 s each)."""
    import os

    import torch.utils.cpp_extension as cpp_extension

    from kbench_worker.checks import kernels

    seen = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kwargs: seen.append(kwargs))
    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    kernels.watch_extensions()

    def submission(folder):
        folder.mkdir()
        (folder / "op.cu").write_text("__global__ void k() {}\n")
        (folder / "op.cpp").write_text('#include <torch/extension.h>\n#include "missing.h"\n')
        cpp_extension.load(name="op", sources=[str(folder / "op.cpp"), str(folder / "op.cu")], build_directory=str(folder))

    submission(tmp_path / "pool-tmp")
    copies = seen[0]["sources"]
    assert [os.path.basename(c) for c in copies] == ["op.cpp", "op.cu"]
    assert all(c.startswith(str(tmp_path / "torch_extensions" / ".kbench-sources")) for c in copies)
    assert "build_directory" not in seen[0]
    times = [os.stat(c).st_mtime_ns for c in copies]
    os.utime(copies[0], ns=(1, 1))
    submission(tmp_path / "slot-tmp")
    assert seen[1]["sources"] == copies, "the same files, wherever the submission wrote them"
    assert os.stat(copies[0]).st_mtime_ns == 1 and os.stat(copies[1]).st_mtime_ns == times[1], "written once"

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "op.h").write_text("int f();\n")
    (tmp_path / "other" / "op.cpp").write_text('#include "op.h"\n')
    cpp_extension.load("op2", [str(tmp_path / "other" / "op.cpp")])
    assert seen[2]["sources"] == [str(tmp_path / "other" / "op.cpp")], "a source that includes a file beside it stays"
