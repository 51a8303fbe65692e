"""The worker package imports without a cycle: every module of `kbench_worker` is parsed with
`ast`, its imports of the package (relative or absolute, lazy ones inside functions too) make a
graph over its modules and one over its folders (the package and each subpackage: `roles/`,
`wire/`, `task/`, `checks/`, `timing/`, `static_check/`), and neither may hold a cycle. A cycle
found is named, module by module or folder by folder."""

import ast
import textwrap

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "worker" / "python" / "kbench_worker"


def modules(package):
    """Module name -> file, for every module of the package at `package` (a folder's
    `__init__.py` is the folder's own module, named as the folder)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name, path, known):
    """The modules among `known` that module `name` (its file at `path`) imports."""
    # The package a relative import starts from: a folder's own module is in that folder.
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            # `from a import b` imports the module a.b where there is one, else names of a.
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names]
        else:
            continue
        found |= {target for target in targets if target in known}
    return found - {name}


def module_graph(package):
    """Module -> the package's modules it imports."""
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def folder_graph(package):
    """Folder (the package or a subpackage, by module name) -> the other folders whose modules
    its modules import."""
    known = modules(package)
    folder = {name: name if path.name == "__init__.py" else name.rpartition(".")[0] for name, path in known.items()}
    graph = {f: set() for f in folder.values()}
    for name, targets in module_graph(package).items():
        graph[folder[name]] |= {folder[t] for t in targets} - {folder[name]}
    return graph


def find_cycle(graph):
    """A cycle of `graph` (node -> the nodes it imports) as the nodes along it, the first one
    repeated at the end; None where there is none. Nodes are visited in sorted order, so the
    cycle named is always the same one."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_worker_modules_import_no_cycle():
    graph = module_graph(PACKAGE)
    # The graph is read: a role imports the wire it answers on.
    assert "kbench_worker.wire.protocol" in graph["kbench_worker.roles.candidate"], graph["kbench_worker.roles.candidate"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_worker_folders_import_no_cycle():
    graph = folder_graph(PACKAGE)
    assert {"kbench_worker.roles", "kbench_worker.wire", "kbench_worker.task", "kbench_worker.checks", "kbench_worker.timing", "kbench_worker.static_check"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between folders: " + " -> ".join(cycle)


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({}, None),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}, None),  # a diamond is no cycle
        ({"a": {"a"}}, ["a", "a"]),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),  # not through the first node
        ({"a": set(), "x": {"y"}, "y": {"z"}, "z": {"x"}}, ["x", "y", "z", "x"]),  # nor reached from it
    ],
)
def test_a_cycle_is_found_and_named(graph, cycle):
    assert find_cycle(graph) == cycle


def test_a_cycle_between_folders_is_found_where_the_modules_have_none(tmp_path):
    """`pkg.a.one` imports `pkg.b.two` (relatively, two levels up) and `pkg.b.three` imports
    `pkg.a.four` (absolutely, inside a function): no module imports itself again, but folder a
    needs b and b needs a."""
    sources = {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "",
        "pkg/a/one.py": "from ..b import two\n",
        "pkg/a/four.py": "import os\n",
        "pkg/b/__init__.py": "",
        "pkg/b/two.py": "from . import three\n",
        "pkg/b/three.py": "def late():\n    from pkg.a.four import x\n",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    package = tmp_path / "pkg"
    assert module_graph(package) == {
        "pkg": set(),
        "pkg.a": set(),
        "pkg.a.four": set(),
        "pkg.a.one": {"pkg.b.two"},
        "pkg.b": set(),
        "pkg.b.three": {"pkg.a.four"},
        "pkg.b.two": {"pkg.b.three"},
    }
    assert find_cycle(module_graph(package)) is None
    assert find_cycle(folder_graph(package)) == ["pkg.a", "pkg.b", "pkg.a"]


def test_every_worker_module_opens_with_a_docstring():
    bare = [name for name, path in modules(PACKAGE).items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not bare, f"modules without a docstring saying what they own: {bare}"
