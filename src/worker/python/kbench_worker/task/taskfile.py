"""Load a KernelBench-format file as a fresh module, optionally with module constants overridden.

Overrides are applied to the source, not to the loaded module: every top-level assignment of an
overridden name gets the new value before the file runs, so constants derived from it
(``bias_shape = (out_channels, 1, 1)``) follow. The same mechanism serves small CPU sizes,
upstream v0 sizes and shape perturbation. Nothing here imports submission code by itself: the
caller decides which file to load, and in which process.
"""

import ast
import importlib.util
import sys
import tomllib
from pathlib import Path


class OverrideError(ValueError):
    """An override names a constant the file does not assign at top level."""


def _literal(value):
    node = ast.parse(repr(value), mode="eval").body
    return node


def _assigned_names(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node


def rewrite(source, overrides, filename="<task>", strict=True):
    """Return the module's code object with the given top-level constants replaced.

    With ``strict`` every override must name a constant the file assigns (task files); without
    it, names the file does not assign are ignored (submissions need not repeat the constants).
    """
    tree = ast.parse(source, filename=filename)
    found = set()
    for name, node in _assigned_names(tree):
        if name in overrides:
            node.value = _literal(overrides[name])
            found.add(name)
    missing = sorted(set(overrides) - found)
    if missing and strict:
        raise OverrideError(f"{filename} assigns no module constant named {', '.join(missing)}")
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def load(path, overrides=None, module_name=None, strict=True):
    """Execute the file at ``path`` as a new module under a name of its own."""
    path = Path(path)
    source = path.read_text()
    code = rewrite(source, overrides or {}, str(path), strict)
    name = module_name or f"kbench_file_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    # Registered while it runs so that dataclasses, pickling and torch.compile can find it.
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def assigned(path):
    """Names assigned at the file's top level, in file order, each once."""
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    return list(dict.fromkeys(name for name, _ in _assigned_names(tree)))


def scale_overrides(task_path, scale):
    """Constants for a named scale ('small') from the ``scale.toml`` beside the task file.

    Returns {} for scale 'full'. A task with no entry for the scale is an error: silently
    running it at full size on a CPU would take hours.
    """
    if scale in (None, "full"):
        return {}
    task_path = Path(task_path)
    table_path = task_path.parent / "scale.toml"
    if not table_path.exists():
        raise OverrideError(f"no {table_path} for --scale {scale}")
    table = tomllib.loads(table_path.read_text())
    entry = table.get(task_path.stem, {}).get(scale)
    if entry is None:
        raise OverrideError(f"{table_path} has no '{scale}' sizes for {task_path.stem}")
    return entry


def overrides(task_path, scale=None, sets=None):
    """The constants to override for a task: its named scale, then explicit --set values."""
    return {**scale_overrides(task_path, scale), **(sets or {})}
