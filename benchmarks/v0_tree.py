"""Write the KernelBench tasks at upstream v0 sizes, for corpora generated against v0.

    python3 benchmarks/v0_tree.py OUT_DIR

This repository's task files are written at upstream KernelBench v0.2 sizes with `torch.rand`
inputs. Upstream v0 (commit 862fc31) used smaller sizes and `torch.randn` inputs, and some
published corpora of generated kernels were timed against it. For every row of
benchmarks/v0_sizes.csv whose `renamed_or_changed` is `no`, this writes
OUT_DIR/level<L>/<v0 file name> as the task file with

* each v0 constant's top-level assignment given its v0 value (a source-level edit: the rest of
  the file, comments included, is kept byte for byte; a constant the file held as a list stays a
  list, tuples stay tuples), and
* every `torch.rand(...)` call inside `get_inputs` turned into `torch.randn(...)` (nowhere else).

Rows marked `yes: ...` (renamed, replaced or computing something else at v0) cannot be
reproduced from v0.2 files: they are skipped and listed with their reason. A v0 constant the
file does not assign at top level is an error naming the task. Standard library only (no torch).
"""

import ast
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSV_PATH = ROOT / "benchmarks" / "v0_sizes.csv"


class V0Error(ValueError):
    """The CSV and a task file do not fit together."""


# ---- the CSV ---------------------------------------------------------------------------------


def _split_top(text, sep):
    """Split on `sep` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_value(text):
    """One CSV value: a Python literal, or `(a,b,...)` = a tuple. `(4000)` is the 1-tuple (4000,):
    the CSV writes every tuple in parentheses and never parenthesises a scalar."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        inner = text[1:-1].strip()
        return tuple(parse_value(p) for p in _split_top(inner, ",")) if inner else ()
    return ast.literal_eval(text)


def parse_constants(text):
    """`k=v;k=v` -> {k: v} in CSV order."""
    constants = {}
    for item in _split_top(text, ";"):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise V0Error(f"bad constant {item!r} in {text!r}")
        if name in constants:
            raise V0Error(f"constant {name} listed twice in {text!r}")
        constants[name] = parse_value(value)
    return constants


def read_rows(csv_path=CSV_PATH):
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["constants"] = parse_constants(row["constants_v0"])
        verdict = row["renamed_or_changed"].strip()
        # `no` alone, or `no: <a change that does not matter>` (two rows say why they are `no`).
        head = verdict.split(":", 1)[0].strip()
        if head not in ("no", "yes"):
            raise V0Error(f"level{row['level']}/{row['id']}: renamed_or_changed must start with no or yes, not {verdict!r}")
        row["reproducible"] = head == "no"
    return rows


# ---- the source rewrite ------------------------------------------------------------------------


class _Source:
    """Byte-offset edits on a source text, applied together (ast columns are UTF-8 offsets)."""

    def __init__(self, text):
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.edits = []

    def offset(self, lineno, col):
        return self.line_starts[lineno - 1] + col

    def span(self, node):
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def replace(self, start, end, text):
        self.edits.append((start, end, text.encode("utf-8")))

    def result(self):
        out = self.data
        last = len(out) + 1
        for start, end, text in sorted(self.edits, reverse=True):
            if end > last:
                raise V0Error("overlapping edits")
            out = out[:start] + text + out[end:]
            last = start
        return out.decode("utf-8")


def _is_list_expr(node):
    """Whether the file's expression builds a list (`[a, b]`, `[a] * n`, a comprehension)."""
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        return _is_list_expr(node.left) or _is_list_expr(node.right)
    return False


def _literal_text(value, as_list):
    if isinstance(value, tuple):
        items = [_literal_text(v, False) for v in value]
        if as_list:
            return "[" + ", ".join(items) + "]"
        if len(items) == 1:
            return "(" + items[0] + ",)"
        return "(" + ", ".join(items) + ")"
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    raise V0Error(f"cannot write {value!r} as a literal")


def _top_level_assignments(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            yield node, names, len(names) == len(node.targets)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            yield node, [node.target.id], True


def _is_torch_rand(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rand" and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"


def to_v0(source, constants, label="<task>"):
    """The task source with `constants` assigned and get_inputs drawing from torch.randn.

    Returns (new_source, number of torch.rand calls switched)."""
    tree = ast.parse(source, filename=label)
    src = _Source(source)
    found = set()
    for node, names, plain in _top_level_assignments(tree):
        hits = [n for n in names if n in constants]
        if not hits:
            continue
        values = {repr(constants[n]) for n in hits}
        if not plain or len(hits) != len(names) or len(values) != 1:
            raise V0Error(f"{label}: line {node.lineno} assigns {', '.join(hits)} together with other targets; cannot give it a single v0 value")
        value = constants[hits[0]]
        start, end = src.span(node.value)
        src.replace(start, end, _literal_text(value, _is_list_expr(node.value)))
        found.update(hits)
    missing = [n for n in constants if n not in found]
    if missing:
        raise V0Error(f"{label}: v0 constant(s) {', '.join(missing)} not assigned at top level")

    switched = 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "get_inputs":
            for call in ast.walk(node):
                if _is_torch_rand(call):
                    _, end = src.span(call.func)
                    if src.data[end - 4 : end] != b"rand":
                        raise V0Error(f"{label}: line {call.lineno}: unexpected spelling of torch.rand")
                    src.replace(end - 4, end, "randn")
                    switched += 1
    new_source = src.result()
    _check(new_source, constants, label)
    return new_source, switched


def _check(new_source, constants, label):
    """The rewritten file parses and assigns exactly the v0 values."""
    tree = ast.parse(new_source, filename=label)
    for node, names, _ in _top_level_assignments(tree):
        for name in names:
            if name in constants:
                got = ast.literal_eval(node.value)
                if isinstance(got, list):
                    got = tuple(got)
                if got != constants[name] or type(got) is not type(constants[name]):
                    raise V0Error(f"{label}: {name} came out as {got!r}, not {constants[name]!r}")


# ---- the tree ----------------------------------------------------------------------------------


def build(out_dir, tasks_dir=ROOT, csv_path=CSV_PATH, log=print):
    """Write the v0 tree; return (written labels, skipped [(label, reason)])."""
    out_dir, tasks_dir = Path(out_dir), Path(tasks_dir)
    written, skipped = [], []
    for row in read_rows(csv_path):
        level, number, name = row["level"], row["id"], row["file_v0"]
        label = f"level{level}/{Path(name).stem}"
        if not row["reproducible"]:
            skipped.append((label, row["renamed_or_changed"]))
            log(f"skip {label}: {row['renamed_or_changed']}")
            continue
        source_path = tasks_dir / f"level{level}" / name
        if not source_path.is_file():
            matches = sorted((tasks_dir / f"level{level}").glob(f"{number}_*.py"))
            hint = f" (this repository has {', '.join(m.name for m in matches)})" if matches else ""
            raise V0Error(f"{label}: no task file {source_path}{hint}")
        new_source, _ = to_v0(source_path.read_text(), row["constants"], label)
        target = out_dir / f"level{level}" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new_source)
        written.append(label)
    return written, skipped


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.exit(__doc__)
    out_dir = Path(argv[0])
    try:
        written, skipped = build(out_dir)
    except V0Error as e:
        sys.exit(f"v0_tree: {e}")
    print(f"wrote {len(written)} v0 tasks to {out_dir}, skipped {len(skipped)} ({len(written) + len(skipped)} rows)")


if __name__ == "__main__":
    main()
