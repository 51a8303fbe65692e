"""C++/CUDA in a submission's strings: a small tokenizer that skips comments and string/char
literals, so a rule matches code, never prose, and the queries the C++ rules ask of its tokens."""

from __future__ import annotations

from typing import NamedTuple


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
