#!/usr/bin/env python3
"""Render a kbench run of the adversarial corpus against its expected verdicts.

    python3 benchmarks/corpus_table.py RESULTS_JSON [PREFIX=]EXPECTED_TOML...

RESULTS_JSON is a run record (`results.json` of `kbench eval`). Each EXPECTED_TOML is an
expected-verdict table (tests/fixtures/{cpu,gpu}/expected.toml, benchmarks/example/*/expected.toml)
whose paths are relative to its own folder; PREFIX (optional) is the folder of the evaluated tree
that those paths start from, when the run did not evaluate that folder itself.

An entry is either `"path" = { class = "...", expected = "verdict", check = "name" }` (check
optional: a check that must appear as evidence, in the evaluation's reason, as a failed or warning
runtime check, as a static finding's rule, or as a task flag) or the plain `"path" = "verdict"`
(class "honest" when the verdict is pass or no_kernel, else "fault").

Prints a Markdown table (file | class | expected | got | evidence | ok) and a summary line, and
exits 1 when any file is not as expected (another verdict, missing evidence, not evaluated, or
evaluated but in no table). Standard library only.
"""

import json
import sys
import tomllib
from pathlib import Path

CORRECT = ("pass", "no_kernel")
EVIDENCE_CHARS = 110


def load_expected(spec):
    """{path in the run: row} from one `[PREFIX=]TOML` argument."""
    prefix, sep, path = spec.partition("=")
    if not sep:
        prefix, path = "", spec
    prefix = prefix.strip("/")
    table = tomllib.loads(Path(path).read_text())
    rows = {}
    for file, value in table.items():
        if isinstance(value, str):
            row = {"class": "honest" if value in CORRECT else "fault", "expected": value, "check": None}
        elif isinstance(value, dict) and isinstance(value.get("expected"), str):
            row = {"class": value.get("class", ""), "expected": value["expected"], "check": value.get("check")}
        else:
            raise SystemExit(f"{path}: entry {file!r} has no expected verdict")
        rows[f"{prefix}/{file}" if prefix else file] = row
    return rows


def evidence(evaluation, check):
    """(found, text): where `check` appears in the evaluation, or why the verdict was given."""
    reason = evaluation.get("reason") or ""
    if check is None:
        return True, reason
    for c in evaluation.get("checks") or []:
        if c.get("name") == check and c.get("outcome") in ("fail", "warn"):
            return True, f"{check} ({c['outcome']}): {c.get('evidence', '')}"
    if check in reason:
        return True, reason
    for f in evaluation.get("findings") or []:
        if f.get("rule") == check:
            return True, f"{check} (line {f.get('line')}): {f.get('why', '')}"
    if check in (evaluation.get("task_flags") or []):
        return True, f"task flag {check}"
    return False, f"no {check}; {reason}" if reason else f"no {check}"


def cell(text, limit=None):
    text = " ".join(str(text).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|") or " "


def main(argv):
    if len(argv) < 3:
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    record = json.loads(Path(argv[1]).read_text())
    evaluations = {e["file"]: e for e in record.get("evaluations", [])}
    expected = {}
    for spec in argv[2:]:
        expected.update(load_expected(spec))

    lines = [
        "| file | class | expected | got | evidence | ok |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    as_expected = honest_rejected = 0
    for file in sorted(set(expected) | set(evaluations)):
        row = expected.get(file)
        e = evaluations.get(file)
        got = e["verdict"] if e else "(not evaluated)"
        if row is None:
            ok, text = False, f"not in any expected table; {e.get('reason') or ''}"
            row = {"class": "?", "expected": "?", "check": None}
        elif e is None:
            ok, text = False, "not evaluated"
        else:
            found, text = evidence(e, row["check"])
            ok = got == row["expected"] and found
        as_expected += ok
        if row["class"] == "honest" and e is not None and got not in CORRECT:
            honest_rejected += 1
        lines.append(f"| {cell(file)} | {cell(row['class'])} | {cell(row['expected'])} | {cell(got)} | {cell(text, EVIDENCE_CHARS)} | {'yes' if ok else '**no**'} |")
    total = len(set(expected) | set(evaluations))
    print("\n".join(lines))
    print()
    print(f"{total} files, {as_expected} as expected, {total - as_expected} not; honest rejected: {honest_rejected}")
    return 0 if as_expected == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
