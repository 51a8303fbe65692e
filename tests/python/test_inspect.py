"""The inspect worker role: facts derived from task files (meta at full size, CPU at small size)."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_worker.roles.inspect import derive_small, input_only_constants, inspect_task, value_facts
from kbench_worker.wire.protocol import PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[2]


def task(level, prefix):
    (path,) = (ROOT / f"level{level}").glob(f"{prefix}_*.py")
    return path


def test_square_matmul_counts_flops_and_bytes():
    facts = inspect_task(task(1, "1"))
    n = 4096
    assert facts["errors"] == []
    assert facts["flops"] == 2 * n**3
    assert facts["input_bytes"] == 2 * n * n * 4
    assert facts["output_bytes"] == n * n * 4
    assert facts["param_bytes"] == 0
    assert facts["min_bytes"] == 3 * n * n * 4
    assert facts["degenerate"] == []
    assert facts["nondeterministic"] is False
    assert facts["random_ops"] == []
    assert facts["input_only_constants"] == ["N"]
    json.dumps(facts, allow_nan=False)


def test_relu_on_uniform_inputs_is_the_identity():
    facts = inspect_task(task(1, "19"))
    assert facts["errors"] == []
    assert facts["degenerate"] == ["identity"]
    assert facts["nondeterministic"] is False
    assert facts["flops"] == 0  # FlopCounterMode counts matmul-like ops only
    assert facts["input_bytes"] == facts["output_bytes"] == 4096 * 393216 * 4


def test_clamped_dropout_output_is_constant_and_random():
    facts = inspect_task(task(2, "83"))
    assert facts["errors"] == []
    assert {"constant_output", "input_independent", "below_tolerance"} <= set(facts["degenerate"])
    assert "identity" not in facts["degenerate"]
    assert facts["nondeterministic"] is True


def test_active_dropout_is_nondeterministic():
    facts = inspect_task(task(2, "66"))
    assert facts["errors"] == []
    assert facts["nondeterministic"] is True
    assert any("bernoulli" in op for op in facts["random_ops"])  # seen at full size, on meta
    assert facts["degenerate"] == []
    assert facts["param_bytes"] == (16384 * 16384 + 16384) * 4


def test_random_initial_state_is_nondeterministic():
    # Only the small-size part: the full-size LSTM forward on meta is unrolled step by step (slow).
    facts = value_facts(task(3, "35"))
    assert facts == {"nondeterministic": True, "degenerate": [], "errors": []}


def test_conv_batch_and_spatial_sizes_are_input_only():
    found = input_only_constants(task(1, "55"))
    assert "batch_size" in found and "height" in found and "width" in found
    assert "in_channels" not in found  # also a constructor argument
    assert "out_channels" not in found and "kernel_size" not in found


def test_mamba_sizes_that_shape_parameters_are_not_input_only():
    # The parameters A, B, C are shaped (batch_size, seq_length, ...): no size is input-only.
    assert input_only_constants(task(3, "48")) == []


def test_tuple_elements_are_listed_one_by_one():
    # input_shape = (batch_size, 3, 224, 224): the channel count is fixed by the first conv.
    found = input_only_constants(task(3, "9"))
    assert "input_shape[0]" in found and "input_shape[2]" in found and "input_shape[3]" in found
    assert "input_shape[1]" not in found and "input_shape" not in found


def test_a_broken_task_reports_errors_without_raising(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('no')\n"
        "n = 4\ndef get_inputs():\n    return [torch.rand(n)]\ndef get_init_inputs():\n    return []\n"
    )
    facts = inspect_task(path)
    assert facts["flops"] is None and facts["degenerate"] is None
    assert any("RuntimeError: no" in e for e in facts["errors"])
    json.dumps(facts, allow_nan=False)


def test_worker_role_answers_over_the_protocol(tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\nn = 4\ndef get_inputs():\n    return [torch.rand(n)]\ndef get_init_inputs():\n    return []\n"
    )
    (tmp_path / "scale.toml").write_text('["tiny"]\nsmall = { n = 3 }\n')
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    requests = [{"v": PROTOCOL_VERSION, "key": "k3y"}, {"v": PROTOCOL_VERSION, "cmd": "inspect", "task": str(path)}, {"v": PROTOCOL_VERSION, "cmd": "exit"}]
    os.write(req_w, "".join(json.dumps(r) + "\n" for r in requests).encode())
    os.close(req_w)
    env = {**os.environ, "KBENCH_PROTOCOL_FDS": f"{req_r},{rep_w}", "PYTHONPATH": str(ROOT / "src/worker/python")}
    proc = subprocess.run([sys.executable, "-m", "kbench_worker", "inspect"], env=env, pass_fds=(req_r, rep_w), timeout=120)
    os.close(req_r)
    os.close(rep_w)
    with os.fdopen(rep_r) as replies:
        ((tag, line),) = [line.rstrip("\n").split(" ", 1) for line in replies]
    assert proc.returncode == 0
    # Signed with the key it was given first: HMAC-SHA256 of the JSON, as kbench checks it.
    assert tag == hmac.new(b"k3y", line.encode(), hashlib.sha256).hexdigest()
    reply = json.loads(line)
    assert reply["ok"] is True and reply["v"] == PROTOCOL_VERSION
    facts = reply["facts"]
    assert facts["errors"] == []
    assert facts["input_bytes"] == facts["output_bytes"] == facts["min_bytes"] // 2 == 16
    assert facts["input_only_constants"] == ["n"]
    assert facts["degenerate"] == [] and facts["nondeterministic"] is False


@pytest.mark.parametrize("level,prefix", [(1, "23")])
def test_softmax_over_a_short_row_is_not_below_tolerance(level, prefix):
    # At full size (rows of 393216) every output is ~2.5e-6 < atol; meta holds no values, and
    # the small size (rows of 1024, ~1e-3) does not show it.
    assert "below_tolerance" not in value_facts(task(level, prefix))["degenerate"]


TASK = """import torch
class Model(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = torch.nn.Linear(features, features)
    def forward(self, x):
        return torch.relu(self.linear(x))
batch_size = {batch}
features = {features}
def get_inputs():
    return [torch.rand(batch_size, features)]
def get_init_inputs():
    return [features]
"""


def test_without_scale_toml_a_small_size_is_derived(tmp_path):
    # 65536 x 2048 floats in and out (1 GiB): too large for the CPU, so the batch shrinks.
    path = tmp_path / "1_Big_batch.py"
    path.write_text(TASK.format(batch=65536, features=2048))
    facts = inspect_task(path)
    assert facts["errors"] == []
    assert facts["small_size"] == "derived"
    assert facts["degenerate"] == [] and facts["nondeterministic"] is False
    assert derive_small(path, facts["input_only_constants"], {"batch_size": 65536, "features": 2048}) == {"batch_size": 2}


def test_a_derived_size_shrinks_a_task_the_cpu_could_run_until_it_is_cheap(tmp_path):
    # 4096 x 1024 floats in and out (32 MiB, 8.6 GFLOP): within reach of the CPU, but the value
    # facts run it three times on one thread, so it shrinks as scale.toml's small sizes do.
    path = tmp_path / "1_Mid_batch.py"
    path.write_text(TASK.format(batch=4096, features=1024))
    assert derive_small(path, ["batch_size"], {"batch_size": 4096, "features": 1024}) == {"batch_size": 2}


TAIL = """import torch
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(n, n))
    def forward(self, x):
        return x[:, 3:] + (self.w @ self.w).mean()
n = 1024
width = 64
def get_inputs():
    return [torch.rand(8, width)]
def get_init_inputs():
    return [n]
"""


def test_a_derived_size_leaves_no_output_empty(tmp_path):
    # The 2 GFLOP square of the weights does not shrink, so width halves as far as it can: to
    # 4, not to 2, where the output x[:, 3:] would be empty (and equal an empty input slice).
    path = tmp_path / "3_Tail.py"
    path.write_text(TAIL)
    facts = inspect_task(path)
    assert facts["errors"] == [] and facts["small_size"] == "derived"
    assert facts["input_only_constants"] == ["width"]
    assert facts["small_overrides"] == {"width": 4}
    assert facts["degenerate"] == []


def test_without_scale_toml_a_task_too_large_to_shrink_skips_value_facts(tmp_path):
    # The weights alone (40 GB) are out of reach: features sizes the parameters, not only inputs.
    path = tmp_path / "2_Huge_weights.py"
    path.write_text(TASK.format(batch=2, features=100000))
    facts = inspect_task(path)
    assert facts["degenerate"] is None and facts["small_size"] is None
    assert facts["input_bytes"] is not None
    (error,) = facts["errors"]
    assert error.startswith("value facts skipped: no ") and "does not bring the task under" in error
