"""Static checks on a submission: cheap evidence read from the source, never from running it.

Standard library only (``kbench check`` runs in CI without torch). The Python file is parsed with
``ast``; C++/CUDA held in string literals (``load_inline`` sources, or any other non-docstring
string) is read with a small tokenizer that skips comments and string/char literals, so a rule
matches code, never prose or the substring "stream" in a name.

Findings are evidence, mostly ``warning`` (a few ``error``: rebinding a timing or comparison
function); the runtime checks decide the verdict. A finding is
``{"rule": "python.frame_access", "severity": "warning", "line": 12, "why": "..."}``; ``line`` is
1-based in the Python file, and for C++/CUDA inside a string literal it is the Python line where
that text sits.

API: ``scan(source, filename) -> list[dict]`` (sorted by line; raises SyntaxError when the file
does not parse) and the worker role ``run(channel)``: request ``{"cmd": "check_files", "files":
[PATH, ...]}``, reply ``{"ok": true, "results":
[{"file": PATH, "findings": [...], "error": null | "syntax error: ... (line N)"}]}``;
``{"cmd": "exit"}`` ends the worker.

The rules are the table ``RULES`` (name, usual severity, what it catches), one function each.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import io
import tokenize
from typing import Callable, Iterable, NamedTuple

SEVERITIES = ("info", "warning", "error")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# A qualified name standing for "this module" (sys.modules[__name__]).
SELF_MODULE = "<this module>"

_BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_DEPTH = 40  # recursion cap for name and constant resolution
_MAX_EXEC_NESTING = 3  # exec("...") of a constant string is scanned, this deep


class Rule(NamedTuple):
    name: str
    severity: str  # the usual severity; a rule may raise or lower it for one finding
    catches: str
    check: Callable[["Context"], Iterable[tuple]]


RULES: list[Rule] = []


def rule(name, severity, catches):
    """Registers a rule function. It yields ``(line, why)`` or ``(line, why, severity)``."""

    def register(fn):
        RULES.append(Rule(name, severity, catches, fn))
        return fn

    return register


def under(name, prefixes):
    """Whether dotted ``name`` is one of ``prefixes`` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# ---------------------------------------------------------------------------------------------
# Python side: names, constants and the strings that hold C++/CUDA


class Piece(NamedTuple):
    """A part of a text that came from one Python string token (for line mapping)."""

    start: int  # offset in the text
    value: str
    first_line: int  # Python lines the token spans
    last_line: int


class Text:
    """A string value (maybe joined from several literals) and where its parts sit in the file."""

    def __init__(self, pieces):
        self.pieces = []
        parts = []
        offset = 0
        for value, first, last in pieces:
            self.pieces.append(Piece(offset, value, first, max(first, last)))
            parts.append(value)
            offset += len(value)
        self.value = "".join(parts)
        self._starts = [p.start for p in self.pieces]
        self._newlines = [[i for i, c in enumerate(p.value) if c == "\n"] for p in self.pieces]

    def line_of(self, offset):
        if not self.pieces:
            return 1
        k = max(0, bisect.bisect_right(self._starts, offset) - 1)
        piece = self.pieces[k]
        newlines = bisect.bisect_left(self._newlines[k], offset - piece.start)
        return piece.first_line + min(newlines, piece.last_line - piece.first_line)


class Context:
    """A parsed submission and the facts every rule needs."""

    def __init__(self, source, tree, task_source=None, outer=None):
        """``outer``: the Context whose exec()/eval() runs this code (its imports are visible)."""
        self.source = source
        self.tree = tree
        self.lines = source.splitlines()
        self.outer = outer
        self.exec_nesting = outer.exec_nesting + 1 if outer is not None else 0
        self.parent = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.module_bound = self._module_bindings()
        self.aliases = {}  # name -> dotted name it stands for (imports, `x = torch.cuda`)
        self.consts = {}  # module-level name -> str constant
        self._resolve_bindings()
        self.refs = self._references()  # (dotted name, line)
        self.api_names = self._api_names()  # (identifier, line) of attributes/names/getattr keys
        self.ext_handles = self._extension_handles()
        self.task_values = _task_values(task_source) if task_source is not None else None
        self.task_names = set(self.task_values) if self.task_values is not None else TASK_GLOBALS
        self._texts = None
        self._cpp = None

    # -- bindings ---------------------------------------------------------------------------

    def _module_bindings(self):
        bound = set()
        for stmt in _module_level_nodes(self.tree):
            if isinstance(stmt, ast.Name) and isinstance(stmt.ctx, (ast.Store, ast.Del)):
                bound.add(stmt.id)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(stmt.name)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for a in stmt.names:
                    bound.add(a.asname or a.name.split(".")[0])
        return bound

    def _resolve_bindings(self):
        imports = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        imports[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        imports[top] = top
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        imports[a.asname or a.name] = f"{node.module}.{a.name}"
        self.aliases = {**(self.outer.aliases if self.outer else {}), **imports}
        self.consts = dict(self.outer.consts) if self.outer else {}
        counts = {}
        for stmt in _module_level_nodes(self.tree):
            if isinstance(stmt, ast.Name) and isinstance(stmt.ctx, ast.Store):
                counts[stmt.id] = counts.get(stmt.id, 0) + 1
        pairs = list(self._assignment_pairs())
        for _ in range(4):  # chains: a = torch; b = a.cuda; c = b.Event
            changed = False
            for name, value, module_level in pairs:
                if name in imports:
                    continue
                q = self.qualname(value) if isinstance(value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else None
                if q and name not in self.aliases:
                    self.aliases[name] = q
                    changed = True
                if module_level and counts.get(name) == 1 and name not in self.consts:
                    s = self.const_str(value)
                    if s is not None:
                        self.consts[name] = s
                        changed = True
            if not changed:
                break

    def _assignment_pairs(self):
        """(name, value node, at module level) for every simple `name = value` anywhere."""
        module_level = set(map(id, _module_level_nodes(self.tree)))
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    yield from _pairs(target, node.value, id(node) in module_level)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    yield node.target.id, node.value, id(node) in module_level

    # -- resolution -------------------------------------------------------------------------

    def qualname(self, node, depth=0):
        """The dotted name an expression stands for (`torch.cuda.Event`), or None."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id == "__builtins__":
                return "builtins"
            if node.id in _BUILTIN_NAMES and node.id not in self.module_bound:
                return "builtins." + node.id
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value, depth + 1)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.qualname(node.func, depth + 1)
            if func == "builtins.getattr" and len(node.args) >= 2:
                base = self.qualname(node.args[0], depth + 1)
                name = self.const_str(node.args[1], depth + 1)
                if base and name:
                    return f"{base}.{name}"
            elif func in ("builtins.__import__", "importlib.__import__") and node.args:
                name = self.const_str(node.args[0], depth + 1)
                fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
                if name:
                    return name if fromlist else name.split(".")[0]
            elif func == "importlib.import_module" and node.args:
                return self.const_str(node.args[0], depth + 1)
            elif func == "builtins.type" and len(node.args) == 1 and isinstance(node.args[0], ast.Call):
                return self.qualname(node.args[0].func, depth + 1)  # type(torch.cuda.Event()) is the class
            return None
        if isinstance(node, ast.Subscript):
            if self.qualname(node.value, depth + 1) == "sys.modules":
                if isinstance(node.slice, ast.Name) and node.slice.id == "__name__":
                    return SELF_MODULE
                return self.const_str(node.slice, depth + 1)
            return None
        return None

    def const_str(self, node, depth=0):
        """The value of a string expression built from constants only, or None."""
        if depth > _MAX_DEPTH or node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.const_str(node.left, depth + 1)
            right = self.const_str(node.right, depth + 1) if left is not None else None
            return left + right if right is not None else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            fmt = self.const_str(node.left, depth + 1)
            args = self._const_values(node.right, depth + 1)
            if fmt is not None and args is not None:
                try:
                    return fmt % args
                except (TypeError, ValueError):
                    return None
            return None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion in (-1, 115):
                    s = self.const_str(v.value, depth + 1)
                    if s is None:
                        return None
                    parts.append(s)
                else:
                    return None
            return "".join(parts)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            s = self.const_str(node.value, depth + 1)
            bounds = [self._const_int(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)]
            if s is not None and all(b is not False for b in bounds):
                try:
                    return s[slice(*bounds)]
                except ValueError:
                    return None
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = self.const_str(node.func.value, depth + 1)
            if base is None or node.keywords:
                return None
            method = node.func.attr
            if method == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
                items = [self.const_str(e, depth + 1) for e in node.args[0].elts]
                return base.join(items) if all(i is not None for i in items) else None
            if method in ("upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize") and not node.args:
                return getattr(base, method)()
            if method in ("replace", "format"):
                args = [self.const_str(a, depth + 1) for a in node.args]
                if all(a is not None for a in args):
                    try:
                        return getattr(base, method)(*args)
                    except (TypeError, ValueError, IndexError, KeyError):
                        return None
        return None

    def _const_values(self, node, depth):
        if isinstance(node, ast.Tuple):
            values = [self._const_value(e, depth) for e in node.elts]
            return tuple(values) if all(v is not None for v in values) else None
        return self._const_value(node, depth)

    def _const_value(self, node, depth):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        return self.const_str(node, depth)

    @staticmethod
    def _const_int(node):
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            if isinstance(node.operand.value, int):
                return -node.operand.value
        return False

    # -- facts for the rules ----------------------------------------------------------------

    def _references(self):
        """Every place a dotted name is imported or used, as (dotted name, line)."""
        refs = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                refs.extend((a.name, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                refs.append((node.module, node.lineno))
                refs.extend((f"{node.module}.{a.name}", node.lineno) for a in node.names if a.name != "*")
            elif isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    continue
                q = self.qualname(node)
                if q:
                    refs.append((q, node.lineno))
        return refs

    def _api_names(self):
        """Identifiers used as attributes, names, imported names or getattr/[] keys, with lines."""
        names = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute):
                names.append((node.attr, node.lineno))
            elif isinstance(node, ast.Name):
                names.append((node.id, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                names.extend((a.name, node.lineno) for a in node.names)
            elif isinstance(node, ast.Call) and len(node.args) >= 2:
                if self.qualname(node.func) in ("builtins.getattr", "builtins.setattr", "builtins.hasattr", "builtins.delattr"):
                    s = self.const_str(node.args[1])
                    if s:
                        names.append((s, node.lineno))
            elif isinstance(node, ast.Subscript):
                s = self.const_str(node.slice)
                if s and s.isidentifier():
                    names.append((s, node.lineno))
        return names

    def _extension_handles(self):
        """Names and attributes bound to a compiled extension (load_inline / load results)."""
        handles = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                q = self.qualname(node.value.func) or ""
                if not under(q, ("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load")):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        handles.add(t.id)
                    elif isinstance(t, ast.Attribute):
                        handles.add(t.attr)
        return handles

    def is_docstring_like(self, node):
        """A string that is a statement by itself (a docstring or a string used as a comment)."""
        return isinstance(self.parent.get(node), ast.Expr)

    def enclosing_function(self, node):
        p = self.parent.get(node)
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if isinstance(p, ast.ClassDef):
                return None
            p = self.parent.get(p)
        return p

    def enclosing_class(self, node):
        p = self.parent.get(node)
        while p is not None and not isinstance(p, ast.ClassDef):
            p = self.parent.get(p)
        return p

    # -- C++/CUDA text ----------------------------------------------------------------------

    def texts(self):
        """Every non-docstring string value in the file, joined where `+` or f-strings join them."""
        if self._texts is None:
            self._texts = _collect_texts(self)
        return self._texts

    def cpp(self):
        """(text, tokens) for every text; tokens skip comments and string/char literals."""
        if self._cpp is None:
            self._cpp = [(t, cpp_tokens(t.value)) for t in self.texts()]
        return self._cpp


def _pairs(target, value, module_level):
    if isinstance(target, ast.Name):
        yield target.id, value, module_level
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        if len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                yield from _pairs(t, v, module_level)


def _module_level_nodes(tree):
    """All nodes outside function, class and lambda bodies and comprehensions."""
    out = []
    stack = list(tree.body) if isinstance(tree, ast.Module) else [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _string_tokens(source):
    """Python STRING tokens as (start (line, col), end (line, col), value)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    value = None
                out.append((tok.start, tok.end, value if isinstance(value, str) else None))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out


def _collect_texts(ctx):
    tokens = _string_tokens(ctx.source)
    starts = [t[0] for t in tokens]

    def char_col(line, byte_col):
        text = ctx.lines[line - 1] if 0 < line <= len(ctx.lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def constant_pieces(node):
        """Pieces of one str Constant, one per Python token where they can be matched."""
        start = (node.lineno, char_col(node.lineno, node.col_offset))
        k = bisect.bisect_left(starts, start)
        pieces, joined = [], ""
        while k < len(tokens) and tokens[k][2] is not None and len(joined) < len(node.value):
            (l0, _), (l1, _), value = tokens[k]
            pieces.append((value, l0, l1))
            joined += value
            k += 1
        if pieces and joined == node.value:
            return pieces
        return [(node.value, node.lineno, node.end_lineno or node.lineno)]

    def joined_pieces(node):
        pieces = []
        line = node.lineno
        last = node.end_lineno or node.lineno
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                pieces.append((v.value, min(line, last), last))
                line += v.value.count("\n")
            elif isinstance(v, ast.FormattedValue):
                s = ctx.const_str(v.value)
                pieces.append((s if s is not None else " ", min(line, last), min(line, last)))
        return pieces

    def leaf_pieces(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return constant_pieces(node)
        if isinstance(node, ast.JoinedStr):
            return joined_pieces(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = leaf_pieces(node.left), leaf_pieces(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.Name) and node.id in ctx.consts:
            return [(ctx.consts[node.id], node.lineno, node.lineno)]
        return None

    texts, consumed = [], set()
    for node in ast.walk(ctx.tree):
        if id(node) in consumed:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            pieces = leaf_pieces(node)
            if pieces is not None:
                texts.append(Text(pieces))
                consumed.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.JoinedStr):
            if not ctx.is_docstring_like(node):
                texts.append(Text(joined_pieces(node)))
            consumed.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not ctx.is_docstring_like(node) and any(c in node.value for c in "(;{:#<"):
                texts.append(Text(constant_pieces(node)))
    return texts


# ---------------------------------------------------------------------------------------------
# C++/CUDA tokenizer


class Tok(NamedTuple):
    kind: str  # "id", "num", "str" (a literal, contents dropped), "punct"
    value: str
    offset: int


_PUNCT3 = ("<<<", ">>>", "...", "<<=", ">>=", "->*")
_PUNCT2 = ("::", "->", "<<", ">>", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", ".*")
_STRING_PREFIXES = ("u8", "u", "U", "L")


def cpp_tokens(text):
    """Tokens of C++/CUDA text; comments, string and char literal contents are skipped."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\f\v":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] in "\r\n":
            i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 1  # a comment continued by a trailing backslash
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == '"' or c == "'":
            out.append(Tok("str", c, i))
            i = _skip_quoted(text, i, c)
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n:
                d = text[j]
                if d.isalnum() or d in "._":
                    j += 1
                elif d == "'" and j + 1 < n and text[j + 1].isalnum():
                    j += 1  # digit separator 1'000'000
                elif d in "+-" and text[j - 1] in "eEpP":
                    j += 1
                else:
                    break
            out.append(Tok("num", text[i:j], i))
            i = j
            continue
        if c.isalpha() or c == "_" or c == "$":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            word = text[i:j]
            if j < n and text[j] == '"' and word.endswith("R") and word[:-1] in ("",) + _STRING_PREFIXES:
                out.append(Tok("str", 'R"', i))
                i = _skip_raw(text, j)
                continue
            if j < n and text[j] in "\"'" and word in _STRING_PREFIXES:
                out.append(Tok("str", text[j], i))
                i = _skip_quoted(text, j, text[j])
                continue
            out.append(Tok("id", word, i))
            i = j
            continue
        for p in _PUNCT3 + _PUNCT2:
            if text.startswith(p, i):
                out.append(Tok("punct", p, i))
                i += len(p)
                break
        else:
            out.append(Tok("punct", c, i))
            i += 1
    return out


def _skip_quoted(text, i, quote):
    """The offset after a "..." or '...' literal starting at i (an unterminated one ends at the line)."""
    j, n = i + 1, len(text)
    while j < n:
        d = text[j]
        if d == "\\":
            j += 2
            continue
        if d == quote:
            return j + 1
        if d == "\n":
            return j
        j += 1
    return n


def _skip_raw(text, j):
    """The offset after a raw string R"delim( ... )delim" whose quote is at j."""
    paren = text.find("(", j + 1)
    if paren < 0 or paren - j - 1 > 16:
        return j + 1
    delim = text[j + 1 : paren]
    end = text.find(")" + delim + '"', paren + 1)
    return len(text) if end < 0 else end + len(delim) + 2


def _next(tokens, k, value):
    return k + 1 < len(tokens) and tokens[k + 1].value == value


def _prev(tokens, k, value):
    return k > 0 and tokens[k - 1].value == value


def _call_args(tokens, k):
    """Tokens between the parentheses of the call whose name is tokens[k] (empty if none)."""
    if not _next(tokens, k, "("):
        return []
    depth, j = 0, k + 1
    while j < len(tokens):
        v = tokens[j].value
        if v == "(":
            depth += 1
        elif v == ")":
            depth -= 1
            if depth == 0:
                return tokens[k + 2 : j]
        j += 1
    return tokens[k + 2 :]


def cpp_calls(ctx, names):
    """(line, name) for every C++ call `name(` and, in Python, every use of such an API name."""
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and t.value in names and _next(toks, k, "(") and not _prev(toks, k, "."):
                yield text.line_of(t.offset), t.value
    yield from python_api(ctx, names)


def cpp_idents(ctx, names):
    """(line, name) for every C++ identifier in ``names`` (in code) and Python uses of them."""
    for text, toks in ctx.cpp():
        for t in toks:
            if t.kind == "id" and t.value in names:
                yield text.line_of(t.offset), t.value
    yield from python_api(ctx, names)


def python_api(ctx, names):
    """CUDA API names used from Python (cuda-python, cupy, ctypes handles)."""
    for name, line in ctx.api_names:
        if name in names:
            yield line, name


# ---------------------------------------------------------------------------------------------
# Python rules

FRAME_REFS = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "inspect", "traceback.walk_stack", "threading.settrace")
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_getframe", "_current_frames", "currentframe", "getouterframes"}


@rule("python.frame_access", "warning", "frame and introspection access (sys._getframe, inspect, f_back, f_locals, f_globals, tb_frame): a way to read the harness's locals")
def rule_frame_access(ctx):
    for name, line in ctx.refs:
        if under(name, FRAME_REFS):
            yield line, f"uses {name}, which can reach the harness's frames and the expected output held there"
    for name, line in ctx.api_names:
        if name in FRAME_ATTRS:
            yield line, f"touches `{name}`, a frame or traceback internal that exposes other functions' locals"


GC_REFS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")


@rule("python.gc_scan", "warning", "gc.get_objects / get_referrers / get_referents: a way to find the reference output or the harness's tensors")
def rule_gc_scan(ctx):
    for name, line in ctx.refs:
        if under(name, GC_REFS):
            yield line, f"uses {name}, which can find the reference output or the harness's objects in memory"
    for name, line in ctx.api_names:
        if name in ("get_objects", "get_referrers", "get_referents"):
            yield line, f"calls `{name}`, a garbage-collector scan that can find other code's objects"


@rule("python.ctypes", "warning", "ctypes / cffi: raw memory and native calls from Python")
def rule_ctypes(ctx):
    for name, line in ctx.refs:
        if under(name, ("ctypes", "_ctypes", "cffi")):
            yield line, f"uses {name.split('.')[0]}, which can call native code and write raw memory outside the checks"


TIMING_ROOTS = ("torch", "time", "timeit", "numpy", "triton", "kbench_worker", "builtins")
ERROR_ATTRS = {
    "elapsed_time", "record", "synchronize", "Event", "perf_counter", "perf_counter_ns", "time", "time_ns",
    "monotonic", "monotonic_ns", "process_time", "process_time_ns", "default_timer", "do_bench",
    "allclose", "isclose", "equal", "assert_close", "assert_allclose",
}
SUSPICIOUS_UNRESOLVED_ATTRS = {"elapsed_time", "perf_counter", "perf_counter_ns", "allclose", "isclose", "assert_close", "synchronize"}
PRECISION_FLAGS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}


def attribute_writes(ctx):
    """(base node, attribute name or None when computed, line, how) for every attribute write."""

    def targets(t):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                yield from targets(e)
        elif isinstance(t, ast.Starred):
            yield from targets(t.value)
        else:
            yield t

    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Assign):
            written = [x for t in node.targets for x in targets(t)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            written = list(targets(node.target))
        elif isinstance(node, ast.Delete):
            written = [x for t in node.targets for x in targets(t)]
        else:
            written = []
        for t in written:
            if isinstance(t, ast.Attribute):
                yield t.value, t.attr, t.lineno, "assignment"
            elif isinstance(t, ast.Subscript):
                base = _namespace_of(ctx, t.value)
                if base is not None:
                    yield base, ctx.const_str(t.slice), t.lineno, "__dict__ write"
        if isinstance(node, ast.Call):
            func = ctx.qualname(node.func)
            if func in ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__", "builtins.type.__setattr__") and len(node.args) >= 2:
                yield node.args[0], ctx.const_str(node.args[1]), node.lineno, func.rsplit(".", 1)[1]
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("__setattr__", "__delattr__") and node.args:
                yield node.func.value, ctx.const_str(node.args[0]), node.lineno, node.func.attr
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault", "__setitem__"):
                base = _namespace_of(ctx, node.func.value)
                if base is not None:
                    key = ctx.const_str(node.args[0]) if node.func.attr != "update" and node.args else None
                    yield base, key, node.lineno, "__dict__ write"


def _namespace_of(ctx, node):
    """For `X.__dict__` or `vars(X)`, the node X; else None."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.vars" and len(node.args) == 1:
        return node.args[0]
    return None


@rule("python.patch_attribute", "warning", "assignment to attributes of torch, timers or other imported modules, also via setattr / __dict__ (error for timing and comparison functions)")
def rule_patch_attribute(ctx):
    for base_node, attr, line, how in attribute_writes(ctx):
        base = ctx.qualname(base_node)
        if base is None:
            if attr in SUSPICIOUS_UNRESOLVED_ATTRS and not (isinstance(base_node, ast.Name) and base_node.id in ("self", "cls")):
                yield line, f"rebinds an attribute named {attr} ({how}), the name of a timing or comparison function"
            continue
        if base == SELF_MODULE:
            continue  # writes to this module's own globals: python.task_globals
        root = base.split(".")[0]
        target = f"{base}.{attr}" if attr else f"{base}.<computed>"
        if attr is None:
            yield line, f"sets a computed attribute name on {base} ({how}), which may rebind a timer or checker", "warning"
        elif attr in ERROR_ATTRS and root in TIMING_ROOTS:
            yield line, f"rebinds {target} ({how}), a timing or comparison function the harness relies on", "error"
        elif under(base, ("torch.backends", "torch._dynamo.config", "torch._inductor.config")):
            if attr not in PRECISION_FLAGS:  # reduced precision: python.reduced_precision
                yield line, f"sets {target}, a global torch configuration flag", "info"
        else:
            yield line, f"rebinds {target} ({how}), changing an imported module for every caller", "warning"


THREAD_REFS = (
    "threading", "_thread", "multiprocessing", "concurrent.futures", "torch.multiprocessing",
    "os.fork", "os.forkpty", "os.register_at_fork", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.popen",
    "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe", "subprocess",
)


@rule("python.threads", "warning", "threads and processes (threading, _thread, multiprocessing, concurrent.futures, os.fork, subprocess): work that escapes the timed call")
def rule_threads(ctx):
    for name, line in ctx.refs:
        if under(name, THREAD_REFS):
            yield line, f"uses {name}, which can run work in another thread or process outside the timed call"


STREAM_REFS = (
    "torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda._set_stream",
    "torch.cuda.streams.Stream", "torch.cuda.streams.ExternalStream", "torch.cuda.StreamContext", "torch.Stream",
    "torch._C._cuda_setStream", "torch.accelerator.set_stream", "cupy.cuda.Stream", "cupy.cuda.ExternalStream",
    "cupy.cuda.stream", "numba.cuda.stream", "pycuda.driver.Stream",
)


@rule("python.streams", "warning", "CUDA streams from Python (torch.cuda.Stream, torch.cuda.stream(...), set_stream): work the caller's stream does not wait for")
def rule_streams(ctx):
    for name, line in ctx.refs:
        if under(name, STREAM_REFS) or (name.startswith("torch.") and name.rsplit(".", 1)[-1] == "set_stream"):
            yield line, f"uses {name}: work on a stream other than the current one is not covered by the caller's timing events unless joined"


@rule("python.cuda_graph", "info", "CUDA graph capture/replay from Python (legitimate, but the static-output and stale-address tricks live here)")
def rule_cuda_graph(ctx):
    for name, line in ctx.refs:
        if under(name, ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables")):
            yield line, f"uses {name}; graph replay must still produce a fresh, correct output for every call"


@rule("python.reduced_precision", "warning", "turning on TF32 / reduced-precision reductions or lowering float32 matmul precision")
def rule_reduced_precision(ctx):
    for node in ast.walk(ctx.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if isinstance(node.value, ast.Constant) and node.value.value is False:
                continue  # turning reduced precision off
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                base = ctx.qualname(t.value) if isinstance(t, ast.Attribute) else None
                if base and t.attr in PRECISION_FLAGS and under(base, ("torch.backends",)):
                    yield t.lineno, f"sets {base}.{t.attr}, letting float32 work run in reduced precision (TF32/fp16/bf16)"
        if isinstance(node, ast.Call) and ctx.qualname(node.func) == "torch.set_float32_matmul_precision":
            value = ctx.const_str(node.args[0]) if node.args else None
            if value != "highest":
                yield node.lineno, f"sets float32 matmul precision to {value or 'a computed value'}, allowing TF32/bf16 for float32 matmuls"


TORCH_NON_COMPUTE = (
    "torch.cuda", "torch.utils", "torch.backends", "torch.version", "torch.device", "torch.dtype", "torch.is_tensor",
    "torch.is_floating_point", "torch.get_default_dtype", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
    "torch.manual_seed", "torch.Size", "torch.finfo", "torch.iinfo", "torch.compiler", "torch.jit", "torch.library",
    "torch.autograd.profiler", "torch.profiler", "torch.testing", "torch.nn.init", "torch.nn.Parameter", "torch.nn.parameter",
    "torch._C", "torch.Generator", "torch.set_default_dtype", "torch.distributed",
)
TENSOR_METHOD_OPS = {
    "matmul", "mm", "bmm", "addmm", "addmm_", "baddbmm", "addmv", "mv", "relu", "relu_", "sigmoid", "sigmoid_", "tanh",
    "tanh_", "softmax", "log_softmax", "logsumexp", "exp", "exp_", "mean", "amax", "amin", "clamp", "clamp_", "clamp_min",
    "clamp_min_", "clamp_max", "clamp_max_", "cumsum", "cumprod", "norm", "sqrt", "rsqrt", "matrix_power", "conv2d",
}


def _is_nn_module_class(ctx, node):
    """A class defined in the file that derives (maybe indirectly) from torch.nn.Module, or named Model."""
    if node.name == "Model":
        return True
    for b in node.bases:
        if under(ctx.qualname(b) or "", ("torch.nn.Module",)):
            return True
    return False


def _layer_attributes(ctx, cls):
    """Attributes of ``cls`` assigned an nn layer or a model instance (`self.fc = nn.Linear(...)`)."""
    local_models = {n.name for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef) and _is_nn_module_class(ctx, n)}
    attrs = {}
    if cls is None:
        return attrs
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            q = ctx.qualname(func) or ""
            layer = None
            if under(q, ("torch.nn",)) and not under(q, ("torch.nn.Parameter", "torch.nn.parameter", "torch.nn.functional", "torch.nn.init", "torch.nn.ParameterList", "torch.nn.ParameterDict")):
                layer = q
            elif isinstance(func, ast.Name) and func.id in local_models:
                layer = func.id
            if layer:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        attrs[t.attr] = layer
    return attrs


def _functions(ctx):
    """Module-level functions by name, and methods by (class node, name)."""
    funcs, methods = {}, {}
    for node in ctx.tree.body if isinstance(ctx.tree, ast.Module) else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[(node, item.name)] = item
    return funcs, methods


def _compute_in(ctx, body, cls, layers, funcs, methods, seen):
    """What a block computes with torch/nn/the reference, following local calls; None if nothing."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return "the @ operator"
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            q = ctx.qualname(func)
            if q and q.startswith("torch.") and not under(q, TORCH_NON_COMPUTE):
                return q
            if isinstance(func, ast.Name) and func.id == "Model":
                return "the reference Model"
            if isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id == "self":
                    if func.attr in layers:
                        return f"self.{func.attr} ({layers[func.attr]})"
                    target = methods.get((cls, func.attr))
                    if target is not None and id(target) not in seen:
                        seen.add(id(target))
                        found = _compute_in(ctx, target.body, cls, layers, funcs, methods, seen)
                        if found:
                            return f"{found} via self.{func.attr}"
                if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
                    if owner.attr in layers and func.attr == "forward":
                        return f"self.{owner.attr}.forward ({layers[owner.attr]})"
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super" and func.attr == "forward":
                    return "super().forward (the parent model)"
                if func.attr in TENSOR_METHOD_OPS and q is None and not _is_extension(ctx, owner):
                    return f".{func.attr}()"
            if isinstance(func, ast.Name) and func.id in funcs and id(funcs[func.id]) not in seen:
                seen.add(id(funcs[func.id]))
                found = _compute_in(ctx, funcs[func.id].body, cls, layers, funcs, methods, seen)
                if found:
                    return f"{found} via {func.id}()"
    return None


def _is_extension(ctx, node):
    if isinstance(node, ast.Name):
        return node.id in ctx.ext_handles
    if isinstance(node, ast.Attribute):
        return node.attr in ctx.ext_handles
    return False


@rule("python.try_fallback", "warning", "try/except whose handler computes with torch ops, torch.nn.functional, nn layers or the reference model (a fallback path)")
def rule_try_fallback(ctx):
    funcs, methods = _functions(ctx)
    for node in ast.walk(ctx.tree):
        if not isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            continue
        cls = ctx.enclosing_class(node)
        layers = _layer_attributes(ctx, cls)
        for handler in node.handlers:
            found = _compute_in(ctx, handler.body, cls, layers, funcs, methods, set())
            if found:
                yield handler.lineno, f"the except handler computes with {found}, so the benchmark may run a PyTorch fallback instead of the custom kernel"


TASK_GLOBALS = frozenset(
    """batch_size dim dim1 dim2 dim3 N M K L D H W in_channels out_channels in_features out_features kernel_size stride
    padding dilation groups output_padding height width depth height_in width_in depth_in length input_length features
    num_features channels num_channels input_channels input_shape sequence_length seq_len seq_length hidden_size
    input_size output_size num_layers num_heads n_heads n_head heads embed_dim embedding_dimension n_embd d_head d_state
    num_classes num_groups reduce_dim sum_dim max_dim kernel_depth kernel_width kernel_height kernel_size_h kernel_size_w
    stride_h stride_w padding_h padding_w dilation_h dilation_w pool_kernel_size pool_stride pool_padding pool_size
    image_size image_height image_width patch_size mlp_dim bias_shape scale_shape norm_shape scaling_factor scale_factor
    eps bn_eps bn_momentum negative_slope block_len layer_sizes hidden_layer_sizes growth_rate stages block_widths
    num_input_features num_output_features output_classes max_seqlen dropout dropout_p multiplier_shape
    sum_tensor_shape add_value_shape multiply_weight_shape""".split()
)


def _task_values(task_source):
    """Module-level `name = value` of a task file, as ast dumps of the value."""
    values = {}
    try:
        tree = ast.parse(task_source)
    except (SyntaxError, ValueError):
        return values
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                for name, value, _ in _pairs(t, stmt.value, True):
                    values[name] = ast.dump(value)
    return values


@rule("python.task_globals", "info", "redefinition of task globals (batch_size, dim, N, in_channels, ...): module level is info, `global` writes inside functions or globals()[...] writes are warnings")
def rule_task_globals(ctx):
    names = ctx.task_names
    for node in _module_level_nodes(ctx.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            if isinstance(ctx.parent.get(node), ast.AugAssign):
                yield node.lineno, f"modifies the task global {node.id} in place at module level", "warning"
                continue
            value = _assigned_value(ctx, node)
            if ctx.task_values is not None and node.id in ctx.task_values and value is not None:
                if ast.dump(value) != ctx.task_values[node.id]:
                    yield node.lineno, f"redefines the task global {node.id} with a value that differs from the task's", "warning"
                    continue
                yield node.lineno, f"redefines the task global {node.id} with the task's own value"
                continue
            yield node.lineno, f"redefines the task global {node.id} at module level (harmless if identical to the task's value)"
    for func in ast.walk(ctx.tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        declared = {n for stmt in ast.walk(func) if isinstance(stmt, ast.Global) for n in stmt.names}
        declared &= set(names)
        if not declared:
            continue
        for node in _own_nodes(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in declared:
                yield node.lineno, f"writes the task global {node.id} from inside {func.name}() via `global`, changing the problem the harness builds", "warning"
    for node in ast.walk(ctx.tree):
        yield from _globals_dict_write(ctx, node, names)


def _assigned_value(ctx, name_node):
    parent = ctx.parent.get(name_node)
    if isinstance(parent, ast.Assign) and name_node in parent.targets:
        return parent.value
    if isinstance(parent, ast.AnnAssign):
        return parent.value
    return None


def _own_nodes(func):
    """Nodes of a function body, not descending into nested functions or classes."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _globals_dict_write(ctx, node, names):
    """globals()[name] = ..., globals().update(...), setattr(sys.modules[__name__], name, ...)."""
    in_function = ctx.enclosing_function(node) is not None
    key_nodes = []
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and _is_globals_call(ctx, t.value):
                key_nodes.append(t.slice)
            if isinstance(t, ast.Attribute) and ctx.qualname(t.value) == SELF_MODULE:
                key_nodes.append(ast.Constant(t.attr))
    elif isinstance(node, ast.Call):
        func = ctx.qualname(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault", "__setitem__") and _is_globals_call(ctx, node.func.value):
            if node.func.attr == "update":
                if node.args and isinstance(node.args[0], ast.Dict) and all(k is not None for k in node.args[0].keys):
                    key_nodes.extend(node.args[0].keys)
                elif node.args:
                    key_nodes.append(None)
                key_nodes.extend(ast.Constant(k.arg) if k.arg else None for k in node.keywords)
            elif node.args:
                key_nodes.append(node.args[0])
        elif func in ("builtins.setattr", "builtins.delattr") and len(node.args) >= 2 and ctx.qualname(node.args[0]) == SELF_MODULE:
            key_nodes.append(node.args[1])
    for key in key_nodes:
        name = ctx.const_str(key) if key is not None else None
        if name is None:
            yield node.lineno, "writes a computed name into the module's globals, which may redefine a task global", "warning"
        elif name in names:
            if in_function:
                yield node.lineno, f"writes the task global {name} through the globals dict from inside a function", "warning"
            else:
                yield node.lineno, f"redefines the task global {name} through the globals dict"


def _is_globals_call(ctx, node):
    return isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.globals"


TENSOR_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter", "torch.nn.parameter.Parameter")
DISPATCH_REFS = ("torch.utils._python_dispatch", "torch.overrides.TorchFunctionMode", "torch._C._disabled_torch_function_impl")
SUBCLASS_NAMES = {"_make_subclass", "_make_wrapper_subclass", "__torch_function__", "__torch_dispatch__"}


@rule("python.tensor_subclass", "warning", "Tensor subclasses, __torch_function__/__torch_dispatch__, _make_subclass, dispatch modes, __class__ swaps: lazy or deferred outputs")
def rule_tensor_subclass(ctx):
    tensor_classes = set()
    classes = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef)]
    for _ in range(len(classes) + 1):  # local classes deriving from local tensor classes
        before = len(tensor_classes)
        for cls in classes:
            for b in cls.bases:
                q = ctx.qualname(b)
                if (q and under(q, TENSOR_BASES)) or (isinstance(b, ast.Name) and b.id in tensor_classes):
                    if cls.name not in tensor_classes:
                        tensor_classes.add(cls.name)
                        yield cls.lineno, f"class {cls.name} subclasses torch.Tensor ({q or b.id}); an output of such a type can defer its work until it is inspected"
        if len(tensor_classes) == before:
            break
    for node in ast.walk(ctx.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__torch_function__", "__torch_dispatch__"):
            yield node.lineno, f"defines {node.name}, which intercepts torch operations on its objects"
        elif isinstance(node, ast.Call) and ctx.qualname(node.func) == "builtins.type" and len(node.args) == 3:
            bases = node.args[1].elts if isinstance(node.args[1], (ast.Tuple, ast.List)) else [node.args[1]]
            if any(under(ctx.qualname(b) or "", TENSOR_BASES) or (isinstance(b, ast.Name) and b.id in tensor_classes) for b in bases):
                yield node.lineno, "creates a torch.Tensor subclass with type(...), an output type that can defer its work"
    for name, line in ctx.api_names:
        if name in SUBCLASS_NAMES:
            yield line, f"uses {name}, a hook for tensor subclasses whose values can be produced lazily"
    for name, line in ctx.refs:
        if under(name, DISPATCH_REFS):
            yield line, f"uses {name}, which intercepts torch operations globally"
    for base_node, attr, line, _how in attribute_writes(ctx):
        if attr == "__class__":
            yield line, "assigns an object's __class__, which can turn an output into a lazy tensor type"


ENV_WARN_PREFIXES = ("CUDA", "CUBLAS", "CUDNN", "NCCL", "NVIDIA", "PYTORCH", "TORCH", "TRITON", "KBENCH", "LD_", "CUPY")
ENV_BUILD_ONLY = {"TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "MAX_JOBS", "CXX", "CC", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "TORCH_NVCC_FLAGS"}


@rule("python.cuda_environ", "warning", "writes to os.environ (or putenv) of CUDA/torch/harness variables (build-only variables such as TORCH_CUDA_ARCH_LIST are info)")
def rule_cuda_environ(ctx):
    for node in ast.walk(ctx.tree):
        keys = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            keys = [t.slice for t in targets if isinstance(t, ast.Subscript) and ctx.qualname(t.value) == "os.environ"]
        elif isinstance(node, ast.Call):
            func = ctx.qualname(node.func) or ""
            if func in ("os.putenv", "os.unsetenv", "os.environ.setdefault", "os.environ.__setitem__", "os.environ.pop", "os.environ.__delitem__") and node.args:
                keys = [node.args[0]]
            elif func == "os.environ.update":
                if node.args and isinstance(node.args[0], ast.Dict) and all(k is not None for k in node.args[0].keys):
                    keys = list(node.args[0].keys)
                elif node.args:
                    keys = [None]
                keys += [ast.Constant(k.arg) if k.arg else None for k in node.keywords]
            elif func == "os.environ.clear":
                yield node.lineno, "clears os.environ, which changes the CUDA/torch configuration of the process"
        for key in keys:
            name = ctx.const_str(key) if key is not None else None
            if name is None:
                yield node.lineno, "writes an environment variable whose name is computed, possibly a CUDA/torch setting"
            elif name in ENV_BUILD_ONLY:
                yield node.lineno, f"sets {name}, a build-time variable for the extension compiler", "info"
            elif name.upper().startswith(ENV_WARN_PREFIXES):
                yield node.lineno, f"writes the environment variable {name}, which changes how CUDA, torch or the harness behave"


@rule("python.dynamic_code", "warning", "exec/eval/compile, types.FunctionType/CodeType, marshal/pickle loads, imports of computed names: code the static checks cannot see (a constant string passed to exec is scanned too)")
def rule_dynamic_code(ctx):
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Call):
            continue
        func = ctx.qualname(node.func) or ""
        if func in ("builtins.exec", "builtins.eval", "builtins.compile"):
            code = ctx.const_str(node.args[0]) if node.args else None
            if code is None:
                yield node.lineno, f"runs code built at run time with {func.split('.')[1]}(), which static checks cannot read"
                continue
            yield node.lineno, f"runs a constant string with {func.split('.')[1]}(); its findings are reported at this line", "info"
            if ctx.exec_nesting < _MAX_EXEC_NESTING:
                for kind in ("exec", "eval"):
                    try:
                        inner = ast.parse(code, mode=kind)
                        break
                    except (SyntaxError, ValueError):
                        inner = None
                if inner is not None:
                    inner_ctx = Context(code, inner, outer=ctx)
                    for f in _run_rules(inner_ctx):
                        yield node.lineno, f"in code run by {func.split('.')[1]}(): {f['why']}", f["severity"], f["rule"]
        elif under(func, ("types.FunctionType", "types.CodeType", "marshal.loads", "pickle.loads", "runpy", "importlib.util.spec_from_loader")):
            yield node.lineno, f"uses {func}, which builds or loads code the static checks cannot read"
        elif func in ("builtins.__import__", "importlib.import_module", "importlib.__import__") and node.args and ctx.const_str(node.args[0]) is None:
            yield node.lineno, "imports a module whose name is computed at run time"


PROCESS_REFS = (
    "os._exit", "os.kill", "os.killpg", "os.abort", "os.dup", "os.dup2", "os.write", "os.fdopen", "os.close", "os.closerange",
    "os.pipe", "signal.signal", "signal.setitimer", "signal.alarm", "atexit.register", "sys.addaudithook", "faulthandler",
)


@rule("python.process_control", "warning", "os._exit, raw fd writes/dups, signals, atexit: ways to forge or cut off the result channel")
def rule_process_control(ctx):
    for name, line in ctx.refs:
        if under(name, PROCESS_REFS):
            yield line, f"uses {name}, which can end the process early or write to descriptors the harness owns"


# ---------------------------------------------------------------------------------------------
# C++/CUDA rules (in string literals; the same API names used from Python count too)

STREAM_CREATE = {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cuStreamCreate", "cuStreamCreateWithPriority", "getStreamFromPool", "getStreamFromExternal"}


@rule("cuda.stream_create", "warning", "C++ stream creation (cudaStreamCreate*, getStreamFromPool/External) or cudaStreamPerThread: launches the caller's stream does not wait for")
def rule_cuda_stream_create(ctx):
    for line, name in cpp_calls(ctx, STREAM_CREATE):
        yield line, f"calls {name}: work on a private stream escapes the caller's timing events unless joined back"
    for line, name in cpp_idents(ctx, {"cudaStreamPerThread", "CU_STREAM_PER_THREAD"}):
        yield line, f"uses {name}, a stream other than the caller's current stream"


GRAPH_CALLS = {"cudaGraphLaunch", "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cuGraphLaunch", "cuStreamBeginCapture"}


@rule("cuda.graph", "warning", "CUDA graph capture or launch in C++ (cudaStreamBeginCapture, cudaGraphLaunch, at::cuda::CUDAGraph)")
def rule_cpp_cuda_graph(ctx):
    for line, name in cpp_calls(ctx, GRAPH_CALLS):
        yield line, f"calls {name}: a replayed graph can return a static buffer or run on inputs it captured earlier"
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and t.value == "CUDAGraph":
                yield text.line_of(t.offset), "uses at::cuda::CUDAGraph: a replayed graph can return a static buffer or run on stale inputs"


L2_IDENTS = {
    "accessPolicyWindow", "cudaLimitPersistingL2CacheSize", "cudaAccessPropertyPersisting", "cudaStreamAttributeAccessPolicyWindow",
    "cudaLaunchAttributeAccessPolicyWindow", "cudaKernelNodeAttributeAccessPolicyWindow", "cudaAccessPolicyWindow",
    "CU_LIMIT_PERSISTING_L2_CACHE_SIZE", "CU_ACCESS_PROPERTY_PERSISTING", "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW",
    "CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW", "CUaccessPolicyWindow",
}


@rule("cuda.l2_persistence", "warning", "L2 persistence (accessPolicyWindow, cudaLimitPersistingL2CacheSize, cudaStreamSetAttribute with an access policy): inputs kept in L2 across the cache flush")
def rule_cuda_l2(ctx):
    for line, name in cpp_idents(ctx, L2_IDENTS):
        yield line, f"uses {name}: persisting L2 lines survive the harness's cache flush between timed calls"
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and t.value in ("cudaStreamSetAttribute", "cuStreamSetAttribute") and _next(toks, k, "("):
                if any(a.kind == "id" and ("AccessPolicy" in a.value or "ACCESS_POLICY" in a.value) for a in _call_args(toks, k)):
                    yield text.line_of(t.offset), f"{t.value} sets an access-policy window: inputs can persist in L2 across the cache flush"


LAUNCH_EX = {"cudaLaunchKernelEx", "cudaLaunchKernelExC", "cuLaunchKernelEx"}
BENIGN_LAUNCH_ATTRS = {"cudaLaunchAttributeClusterDimension", "cudaLaunchAttributeClusterSchedulingPolicyPreference", "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE", "cudaLaunchAttributeID", "cudaLaunchAttribute", "CUlaunchAttribute", "cudaLaunchAttributeValue", "CUlaunchAttributeValue"}


@rule("cuda.launch_attributes", "warning", "cudaLaunchKernelEx with launch attributes (programmatic serialization, access policy, priority; cluster dimensions alone are info)")
def rule_cuda_launch_attributes(ctx):
    for text, toks in ctx.cpp():
        attrs = sorted({t.value for t in toks if t.kind == "id" and (t.value.startswith("cudaLaunchAttribute") or t.value.startswith("CU_LAUNCH_ATTRIBUTE"))})
        num_attrs = any(t.value == "numAttrs" and _next(toks, k, "=") and k + 2 < len(toks) and toks[k + 2].value != "0" for k, t in enumerate(toks))
        risky = [a for a in attrs if a not in BENIGN_LAUNCH_ATTRS]
        for k, t in enumerate(toks):
            if t.kind != "id" or t.value not in LAUNCH_EX or not _next(toks, k, "("):
                continue
            line = text.line_of(t.offset)
            if risky:
                yield line, f"{t.value} launches with attributes ({', '.join(risky)}) that change stream ordering, priority or caching"
            elif attrs or num_attrs:
                yield line, f"{t.value} launches with attributes ({', '.join(attrs) or 'numAttrs set'})", "info"


@rule("cuda.host_thread", "warning", "host threads in C++ (std::thread, std::jthread, pthread_create, std::async, at::launch): work after forward returns")
def rule_cuda_host_thread(ctx):
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind != "id":
                continue
            qualified = k >= 2 and toks[k - 1].value == "::"
            owner = toks[k - 2].value if qualified else None
            if t.value in ("thread", "jthread") and owner == "std" and not _next(toks, k, "::"):
                yield text.line_of(t.offset), f"uses std::{t.value}, a host thread that can launch work outside the timed call"
            elif t.value == "async" and owner == "std" and _next(toks, k, "("):
                yield text.line_of(t.offset), "calls std::async, which can run work on another host thread"
            elif t.value == "launch" and owner == "at" and _next(toks, k, "("):
                yield text.line_of(t.offset), "calls at::launch, which runs work on torch's inter-op thread pool"
            elif t.value in ("pthread_create", "thrd_create") and _next(toks, k, "(") and not _prev(toks, k, "."):
                yield text.line_of(t.offset), f"calls {t.value}, a host thread that can launch work outside the timed call"


NATIVE_HOOKS = {"dlsym", "dlopen", "mprotect", "ptrace", "dl_iterate_phdr"}


@rule("cuda.native_hook", "warning", "dlsym/dlopen/mprotect/ptrace/RTLD_NEXT in C++: patching timers or the runtime from native code")
def rule_cuda_native_hook(ctx):
    for text, toks in ctx.cpp():
        for k, t in enumerate(toks):
            if t.kind == "id" and ((t.value in NATIVE_HOOKS and _next(toks, k, "(") and not _prev(toks, k, ".")) or t.value == "RTLD_NEXT"):
                yield text.line_of(t.offset), f"uses {t.value}, which can hook or patch functions (timers, the CUDA runtime) in native code"


# ---------------------------------------------------------------------------------------------
# Entry points


def _run_rules(ctx):
    best = {}
    for r in RULES:
        for hit in r.check(ctx):
            line, why = hit[0], hit[1]
            severity = hit[2] if len(hit) > 2 and hit[2] else r.severity
            name = hit[3] if len(hit) > 3 else r.name
            key = (name, line)
            if key not in best or _RANK[severity] > _RANK[best[key]["severity"]]:
                best[key] = {"rule": name, "severity": severity, "line": int(line), "why": why}
    return sorted(best.values(), key=lambda f: (f["line"], f["rule"]))


def scan(source: str, filename: str = "<submission>", task_source: str | None = None) -> list[dict]:
    """Findings for one submission, sorted by line. Raises SyntaxError when it does not parse.

    ``task_source`` (optional) is the task file: a redefined task global is then compared with
    the task's value (identical: info; different: warning).
    """
    try:
        tree = ast.parse(source, filename=filename)
    except ValueError as exc:  # null bytes
        raise SyntaxError(str(exc)) from None
    return _run_rules(Context(source, tree, task_source))


def check_file(path, task_source=None):
    """One result record of the `check` reply."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return {"file": path, "findings": [], "error": f"unreadable: {exc}"}
    try:
        findings = scan(source, path, task_source)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return {"file": path, "findings": [], "error": f"syntax error: {exc.msg}{where}"}
    except (RecursionError, MemoryError) as exc:
        return {"file": path, "findings": [], "error": f"too complex to check: {type(exc).__name__}"}
    return {"file": path, "findings": findings, "error": None}


def check_request(req):
    return {"results": [check_file(path) for path in req.files]}


def commands(channel):
    """The static checker's table: command -> handler."""
    return {"check_files": check_request}


def failure(cmd, exc):
    from .protocol import error

    return error("check", f"{type(exc).__name__}: {exc}", exc)


def run(channel):
    from .protocol import serve

    serve(channel, commands(channel), failure)
