"""The static rule registry: each rule a function registered with its name, usual severity and
what it catches (``@rule``), in ``RULES`` in the order they register; ``run_rules`` runs them all
on one submission and keeps the most severe finding per rule and line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple

if TYPE_CHECKING:
    from .context import Context

SEVERITIES = ("info", "warning", "error")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


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


def run_rules(ctx):
    """The findings of every rule on ``ctx``, sorted by line: per rule and line the most severe."""
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
