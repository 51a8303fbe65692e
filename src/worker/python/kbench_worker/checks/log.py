"""The runtime checks' entries in a reply: `{"name", "outcome", "evidence", "seconds"}` each.

A check that proves cheating raises `errors.TamperError`, one that proves wrong outputs raises
`errors.OutputCheckError`; what passes, warns or is skipped is recorded here, so kbench can show
what was verified and what it cost. A breach of the module contract (`errors.ContractError`) is
recorded as a failure and kept (`Log.breach`): it is judged once the outputs have been compared,
since wrong values outrank it. A check run on several calls of one request (the deep
checks call forward again) keeps one entry: the most severe outcome, the time summed.
"""

import time

from ..wire.errors import ContractError, OutputCheckError, OutputTypeError
from ..wire.messages import CheckName

# Order of severity when one check ran more than once in a request.
SEVERITY = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


class Log:
    """The check entries of one request, in the order the checks first ran."""

    def __init__(self):
        self._entries = {}
        # The first breach of the module contract a check found (its message), or None.
        self.breach = None

    def add(self, name, outcome, evidence, seconds=0.0):
        name = CheckName(name)  # a name not in the schema's list raises here, not in kbench
        entry = self._entries.get(name)
        if entry is None:
            self._entries[name] = {"name": name, "outcome": outcome, "evidence": evidence, "seconds": seconds}
            return
        entry["seconds"] += seconds
        if SEVERITY[outcome] > SEVERITY[entry["outcome"]]:
            entry.update(outcome=outcome, evidence=evidence)

    def run(self, name, check, *args):
        """Call ``check(*args)``, which returns (outcome, evidence), and record it with its time.
        An exception (the check's verdict) propagates and records nothing, naming the check where
        it proves the outputs wrong (``check``, the error record's), except a breach of the
        module contract: a failure, kept in ``breach``."""
        started = time.perf_counter()
        try:
            outcome, evidence = check(*args)
        except ContractError as exc:
            self.breach = self.breach or str(exc)
            outcome, evidence = "fail", str(exc)
        except (OutputCheckError, OutputTypeError) as exc:
            # Wrong outputs this check proved, unless a check it ran (a second call's) did first.
            exc.check = getattr(exc, "check", None) or CheckName(name)
            raise
        self.add(name, outcome, evidence, time.perf_counter() - started)

    def entries(self):
        return list(self._entries.values())
