"""benchmarks/v0_tree.py: the task files rewritten to upstream KernelBench v0 sizes and randn inputs.

The tree is built once (a subprocess, as a user runs it) into a temporary folder; every written
file is then loaded with the worker's loader and held against benchmarks/v0_sizes.csv.
"""

import ast
import csv
import importlib.util
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import torch

from kbench_worker.task import taskfile

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "v0_tree.py"
CSV_PATH = ROOT / "benchmarks" / "v0_sizes.csv"

_spec = importlib.util.spec_from_file_location("kbench_v0_tree", SCRIPT)
v0_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(v0_tree)

with CSV_PATH.open(newline="") as _f:
    RAW_ROWS = list(csv.DictReader(_f))
ROWS = v0_tree.read_rows(CSV_PATH)
WRITTEN_ROWS = [r for r in ROWS if r["reproducible"]]


def label(row):
    return f"level{row['level']}/{Path(row['file_v0']).stem}"


def plain(value):
    """Tuples as lists, for comparing values whose container type may differ."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def v0(tmp_path_factory):
    out = tmp_path_factory.mktemp("v0") / "tree"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out, done.stdout.splitlines()


def test_csv_is_parsed_as_documented():
    assert len(RAW_ROWS) == 250
    by_label = {label(r): r["constants"] for r in ROWS}
    # `(4000)` in the CSV is a 1-tuple; a file's list stays a list (checked on the tree below).
    assert by_label["level1/89_cumsum"] == {"batch_size": 128, "input_shape": (4000,), "dim": 1}
    assert by_label["level3/1_MLP"]["layer_sizes"] == (400, 800)
    assert by_label["level2/84_Gemm_BatchNorm_Scaling_Softmax"]["bn_eps"] == 1e-05
    assert by_label["level2/34_ConvTranspose3d_LayerNorm_GELU_Scaling"]["bias"] is True


def test_written_plus_skipped_is_every_row(v0):
    out, lines = v0
    files = sorted(p.relative_to(out).as_posix() for p in out.glob("level*/*.py"))
    skipped = [line for line in lines if line.startswith("skip ")]
    assert len(files) + len(skipped) == len(RAW_ROWS)
    assert files == sorted(f"level{r['level']}/{r['file_v0']}" for r in WRITTEN_ROWS)
    assert sorted(s.split(":", 1)[0].removeprefix("skip ") for s in skipped) == sorted(label(r) for r in ROWS if not r["reproducible"])
    assert lines[-1] == (f"wrote {len(files)} v0 tasks to {out}, skipped {len(skipped)} ({len(RAW_ROWS)} rows)")


def _skeleton(source, constants, switch_rand):
    """The file's AST with the v0 constants' values blanked (and, for the v0.2 source,
    torch.rand turned into torch.randn inside get_inputs), plus its comments."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in constants for t in node.targets):
            node.value = ast.Constant(None)
        if switch_rand and isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            for call in ast.walk(node):
                if v0_tree._is_torch_rand(call):
                    call.func.attr = "randn"
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return ast.dump(tree), comments


@pytest.mark.parametrize("row", WRITTEN_ROWS, ids=label)
def test_written_file_has_v0_constants_and_nothing_else_changed(v0, row):
    out, _ = v0
    path = out / f"level{row['level']}" / row["file_v0"]
    original = ROOT / f"level{row['level']}" / row["file_v0"]
    module = taskfile.load(path)
    reference = taskfile.load(original)
    for name, expected in row["constants"].items():
        got = getattr(module, name)
        assert plain(got) == plain(expected), name
        if isinstance(expected, tuple):
            # a tuple stays a tuple; only a constant the v0.2 file builds as a list is a list
            assert type(got) is type(getattr(reference, name)), name
        else:
            assert type(got) is type(expected), name
    source = path.read_text()
    get_inputs = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    assert not any(v0_tree._is_torch_rand(c) for c in ast.walk(get_inputs))
    assert _skeleton(source, row["constants"], False) == _skeleton(original.read_text(), row["constants"], True)


def _load_v0(out, level, stem):
    (path,) = (out / f"level{level}").glob(f"{stem}.py")
    return taskfile.load(path)


def test_relu_inputs_are_randn_at_v0_size(v0):
    out, _ = v0
    torch.manual_seed(0)
    (x,) = _load_v0(out, 1, "19_ReLU").get_inputs()
    assert x.shape == (16, 16384) and x.dtype == torch.float32
    assert (x < 0).any() and (x > 0).any()
    # The v0.2 file at the same sizes draws the same shape from torch.rand: never negative.
    original = taskfile.load(ROOT / "level1/19_ReLU.py", {"batch_size": 16, "dim": 16384})
    torch.manual_seed(0)
    (y,) = original.get_inputs()
    assert y.shape == x.shape and (y >= 0).all()


def test_level2_inputs_are_randn_at_v0_size(v0):
    out, _ = v0
    module = _load_v0(out, 2, "1_Conv2D_ReLU_BiasAdd")
    torch.manual_seed(0)
    (x,) = module.get_inputs()
    assert x.shape == (128, 3, 32, 32)
    assert (x < 0).any()
    assert module.get_init_inputs() == [3, 16, 3, (16, 1, 1)]


@pytest.mark.parametrize(
    "level, stem, shapes",
    [
        (1, "1_Square_matrix_multiplication_", [(2048, 2048), (2048, 2048)]),
        (1, "89_cumsum", [(128, 4000)]),
        (1, "95_CrossEntropyLoss", [(4096, 10), (4096,)]),
        (2, "84_Gemm_BatchNorm_Scaling_Softmax", [(128, 1024)]),
        (3, "1_MLP", [(1, 1000)]),
        (3, "9_ResNet18", [(2, 3, 224, 224)]),
    ],
)
def test_input_shapes_at_v0_size_on_meta(v0, level, stem, shapes):
    out, _ = v0
    module = _load_v0(out, level, stem)
    with torch.device("meta"):
        inputs = module.get_inputs()
    assert [tuple(x.shape) for x in inputs] == shapes
    assert all(x.is_meta for x in inputs)


def test_tree_is_discovered_by_kbench_layout(v0):
    """The rule of src/task.rs `discover`: levelN/ holding `<digits>_<name>.py`, ids unique."""
    out, _ = v0
    found = {}
    for level in (1, 2, 3):
        for path in (out / f"level{level}").iterdir():
            m = re.match(r"^(\d+)_.*\.py$", path.name)
            assert m, path
            key = (level, int(m.group(1)))
            assert key not in found, f"{path} and {found[key]} share an id"
            found[key] = path.stem
    assert found == {(int(r["level"]), int(r["id"])): Path(r["file_v0"]).stem for r in WRITTEN_ROWS}


def test_a_v0_constant_the_file_does_not_assign_is_an_error():
    with pytest.raises(v0_tree.V0Error, match=r"level1/7_Foo.*\bK\b"):
        v0_tree.to_v0("M = 1\nN = 2\n", {"M": 3, "K": 4}, "level1/7_Foo")


def test_rewrite_keeps_comments_and_rand_outside_get_inputs():
    source = (
        "import torch\n"
        "\n"
        "class Model:\n"
        "    def forward(self, x):\n"
        "        return x + torch.rand(3)  # noise stays rand\n"
        "\n"
        "shape = (out, 1)  # comment kept\n"
        "sizes = [8] * 2\n"
        "n = 7\n"
        "\n"
        "def get_inputs():\n"
        "    # draw\n"
        "    return [torch.rand(n, *shape), torch.randint(0, 2, (n,)), torch.rand_like(torch.rand(1))]\n"
    )
    new, switched = v0_tree.to_v0(source, {"shape": (4,), "sizes": (1, 2), "n": 5}, "t")
    assert switched == 2
    assert new == (
        "import torch\n"
        "\n"
        "class Model:\n"
        "    def forward(self, x):\n"
        "        return x + torch.rand(3)  # noise stays rand\n"
        "\n"
        "shape = (4,)  # comment kept\n"
        "sizes = [1, 2]\n"
        "n = 5\n"
        "\n"
        "def get_inputs():\n"
        "    # draw\n"
        "    return [torch.randn(n, *shape), torch.randint(0, 2, (n,)), torch.rand_like(torch.randn(1))]\n"
    )
