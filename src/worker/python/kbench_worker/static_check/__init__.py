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

The package: ``registry`` (the rules' table), ``context`` (a parsed submission), ``cpp`` (the
C++/CUDA tokenizer), ``python_rules`` and ``cpp_rules`` (the rules, registered on import, Python
first) and ``entry`` (the entry points).
"""

from . import python_rules  # noqa: F401 - registers the Python rules first

# isort: split
from . import cpp_rules  # noqa: F401 - then the C++ rules
from .entry import check_file, commands, failure, run, scan
from .registry import RULES, SEVERITIES, Rule, rule

__all__ = ["RULES", "SEVERITIES", "Rule", "check_file", "commands", "failure", "rule", "run", "scan"]
