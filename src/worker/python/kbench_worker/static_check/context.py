"""A parsed submission and the facts every rule needs (``Context``): names, imports, constants,
and the strings that hold C++/CUDA with where their parts sit in the file (``Text``)."""

from __future__ import annotations

import ast
import bisect
import builtins
import io
import tokenize
from typing import NamedTuple

from .cpp import cpp_tokens

# A qualified name standing for "this module" (sys.modules[__name__]).
SELF_MODULE = "<this module>"

_BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_DEPTH = 40  # recursion cap for name and constant resolution
_MAX_EXEC_NESTING = 3  # exec("...") of a constant string is scanned, this deep


def under(name, prefixes):
    """Whether dotted ``name`` is one of ``prefixes`` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


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
