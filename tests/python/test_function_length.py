"""No Python function the project ships runs over `LIMIT` lines (its `def` to its last line):
the worker package, the client and the benchmark scripts, read with `ast`. A longer one is
split into named pieces. The Rust side's rule is `tests/function_length.rs`."""

import ast
import textwrap

from conftest import ROOT

LIMIT = 80


def sources():
    """The project's Python outside its tests."""
    worker = sorted((ROOT / "src" / "worker" / "python").rglob("*.py"))
    client = sorted((ROOT / "clients" / "python").rglob("*.py"))
    return worker + client + sorted((ROOT / "benchmarks").glob("*.py"))


def long_functions(code):
    """`name:line (N lines)` for each function in `code` over the limit, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > LIMIT:
                found.append(f"{node.name}:{node.lineno} ({lines} lines)")
    return found


def test_no_function_is_over_the_limit():
    files = sources()
    assert len(files) > 30, "the project's Python was found"
    found = [f"{path.relative_to(ROOT)}: {f}" for path in files for f in long_functions(path.read_text())]
    assert not found, f"functions over {LIMIT} lines (split them into named pieces):\n" + "\n".join(found)


def test_the_reader_counts_functions_and_methods():
    body = textwrap.indent("x = '}'\n" * LIMIT, "    ")
    code = f"def short():\n    pass\n\n\ndef long():\n{body}\n\nclass C:\n    def method(self):\n{textwrap.indent(body, '    ')}"
    assert long_functions(code) == [f"long:5 ({LIMIT + 1} lines)", f"method:{LIMIT + 9} ({LIMIT + 1} lines)"]
