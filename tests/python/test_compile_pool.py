"""The compile pool builds what a submission would build on the GPU."""

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from conftest import ROOT
from kbench_worker.checks import kernels
from kbench_worker.roles import compile as pool
from kbench_worker.wire.messages import Compile, Warm

GATED = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="gated", cpp_sources="") if torch.cuda.is_available() else None


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


@pytest.mark.parametrize("device,builds", [("cuda", True), ("cpu", False)])
def test_a_build_gated_on_a_gpu_runs_in_the_pool_of_a_gpu_run(tmp_path, monkeypatch, device, builds):
    calls = []
    # The pool wraps the loaders and keeps build failures: all of it undone after the test.
    monkeypatch.setattr(cpp_extension, "load_inline", lambda **kwargs: calls.append(kwargs["name"]))
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)
    monkeypatch.setattr(kernels, "remember", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the pool hides the GPU
    submission = tmp_path / "gated.py"
    submission.write_text(GATED)
    req = Compile(submission=str(submission), task=str(ROOT / "level1" / "19_ReLU.py"), set={}, device=device)
    module, reply = pool.compile_file(req)
    assert reply["ok"], reply
    assert calls == (["gated"] if builds else [])
    assert torch.cuda.is_available() is False, "the pretence ends with the submission's code"


BUILDS_IN_INIT = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.norm = nn.BatchNorm1d(4)  # its counter is a constant torch computes on the device
        self.ext = load_inline(name="in_init", cpp_sources="")

    def forward(self, x):
        return torch.relu(x)
"""


BUILDS_AFTER_ITEM = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4)
        with torch.no_grad():  # a CUDA-L1 kernel (level2/23) folds constants in its constructor
            self.sums = self.norm.weight.view(2, 2).sum(dim=-1).contiguous().cuda()
            self.bias_sum = self.norm.bias.sum().item()
        self.ext = load_inline(name="in_init", cpp_sources=f"// {self.bias_sum}")

    def forward(self, x):
        return torch.relu(x)
"""


@pytest.mark.parametrize("source", [BUILDS_IN_INIT, BUILDS_AFTER_ITEM], ids=["after_a_tensor", "after_item"])
def test_the_warm_up_of_a_gpu_run_reaches_a_build_made_after_a_tensor(tmp_path, monkeypatch, source):
    """The pool has no GPU: fake CUDA tensors made before the build must not need one (once
    `torch.cuda.is_available()` is true, torch makes a real one first to set up a GPU context,
    and computes constants on the device), and a constructor that reads a value out of a
    tensor (`.item()`) gets a symbol rather than an error (on an H100 such a warm-up stopped
    there, and the slot built the extension: 24 s)."""
    calls = []
    monkeypatch.setattr(cpp_extension, "load_inline", lambda **kwargs: calls.append(kwargs["name"]))
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)
    monkeypatch.setattr(kernels, "remember", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    submission = tmp_path / "in_init.py"
    submission.write_text(source)
    # The pool's compile and warm requests differ only in the precision, which compile ignores.
    req = Warm(submission=str(submission), task=str(ROOT / "level1" / "19_ReLU.py"), set={}, device="cuda", precision="fp32")
    module, reply = pool.compile_file(req)
    assert reply["ok"], reply
    warmed = pool.warm(module, req)
    assert calls == ["in_init"], warmed
    assert warmed["reached"] == "forward", warmed
