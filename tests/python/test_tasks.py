"""The 250 task files against the facts of upstream KernelBench v0.2 (tests/fixtures/task_facts.jsonl).

On the meta device (no memory): constructor arguments, input shapes and dtypes, parameter and
buffer names and shapes in named_parameters order, the order in which parameters are created
(= the order default initialisers draw from the RNG), and the output shape and dtype.
On the CPU at the task's small size: forward runs, and two runs from the same seed agree exactly.
"""

import json
from pathlib import Path

import pytest
import torch

from kbench_worker.task import taskfile

ROOT = Path(__file__).resolve().parents[2]
FACTS = [json.loads(line) for line in (ROOT / "tests/fixtures/task_facts.jsonl").open()]


def task_id(fact):
    return f"level{fact['level']}/{fact['id']}"


def task_path(fact):
    return ROOT / f"level{fact['level']}" / fact["file"]


def plain(value):
    """Tuples as lists, as the facts store them."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def dtype_name(value):
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    if isinstance(value, float):
        return "python float"
    return type(value).__name__


def build(module):
    """Construct the model the way the harness does, recording parameter creation order."""
    created = []
    handle = torch.nn.modules.module.register_module_parameter_registration_hook(lambda mod, name, param: created.append(param))
    try:
        torch.manual_seed(42)
        init = module.get_init_inputs()
        torch.manual_seed(42)
        model = module.Model(*init)
    finally:
        handle.remove()
    return init, model, created


def test_every_task_has_a_file():
    files = {(f.parent.name, f.name) for lvl in ("level1", "level2", "level3") for f in (ROOT / lvl).glob("*.py")}
    expected = {(f"level{t['level']}", t["file"]) for t in FACTS}
    assert sorted(expected - files) == []
    assert sorted(files - expected) == []


@pytest.mark.parametrize("fact", FACTS, ids=task_id)
def test_meta_matches_facts(fact):
    path = task_path(fact)
    if not path.exists():
        pytest.fail(f"missing {path}")
    module = taskfile.load(path)
    names = [n for n, _ in fact["constants"]]
    assert [n for n in taskfile.assigned(path) if n in names] == names
    assert [[n, plain(getattr(module, n))] for n in names] == fact["constants"]
    with torch.device("meta"):
        init, model, created = build(module)
        assert plain(list(init)) == fact["init_values"]
        inputs = module.get_inputs()
        assert [list(x.shape) if isinstance(x, torch.Tensor) else [] for x in inputs] == [i["shape"] for i in fact["inputs"]]
        assert [dtype_name(x) for x in inputs] == [i["dtype"] for i in fact["inputs"]]
        params = [[n, list(p.shape)] for n, p in model.named_parameters()]
        assert params == fact["params"]
        buffers = [[n, list(b.shape), str(b.dtype).removeprefix("torch.")] for n, b in model.named_buffers()]
        assert buffers == fact["buffers"]
        index = {id(p): i for i, (_, p) in enumerate(model.named_parameters())}
        order = [index[id(p)] for p in created if id(p) in index]
        # Parameters made by deep-copying a template (nn.TransformerEncoder) are never
        # registered one by one: they draw no random numbers, so they are skipped here.
        expected_order = fact.get("param_creation_order", list(range(len(params))))
        assert order == [i for i in expected_order if i in set(order)]
        out = model(*inputs)
    assert isinstance(out, torch.Tensor)
    assert list(out.shape) == fact["returns"]["shape"]
    assert str(out.dtype).removeprefix("torch.") == fact["returns"]["dtype"]


def run_small(path, seed):
    module = taskfile.load(path, taskfile.scale_overrides(path, "small"))
    _, model, _ = build(module)
    torch.manual_seed(seed)
    inputs = module.get_inputs()
    torch.manual_seed(seed + 1)
    with torch.no_grad():
        return model(*inputs)


@pytest.mark.parametrize("fact", FACTS, ids=task_id)
def test_small_cpu_forward_is_reproducible(fact):
    path = task_path(fact)
    if not path.exists():
        pytest.fail(f"missing {path}")
    first = run_small(path, 7)
    second = run_small(path, 7)
    torch.testing.assert_close(first, second, rtol=0, atol=0, equal_nan=True)
