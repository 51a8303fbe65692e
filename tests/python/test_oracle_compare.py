"""benchmarks/oracle_compare.py: kbench's KernelBench verdict beside upstream KernelBench's own eval."""

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("oracle_compare", ROOT / "benchmarks" / "oracle_compare.py")
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def evaluation(level, number, verdict, kb_correct, reason=""):
    e = {"task": {"level": level, "number": number}, "verdict": verdict, "reason": reason}
    if kb_correct is not None:
        e["kernelbench_correct"] = kb_correct
    return e


def record(tmp_path, name, tol, evals, gz):
    path = tmp_path / (name + (".json.gz" if gz else ".json"))
    text = json.dumps({"config": {"kernelbench_tolerance": tol}, "evaluations": evals})
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


def oracle(tmp_path, rows):
    path = tmp_path / "oracle.jsonl"
    path.write_text("".join(json.dumps({"key": f"level{lv}/{n}", "level": lv, "number": n, "tolerances": tols}) + "\n" for (lv, n), tols in rows.items()))
    return str(path)


def ok(correct):
    return {"compiled": True, "correctness": correct, "metadata": {"hardware": "H100"}}


STRICT = [  # at 1e-4: 1/1 agrees, 1/2 kbench passes what upstream fails, 2/3 both fail
    evaluation(1, 1, "no_kernel", True),
    evaluation(1, 2, "incorrect", True, "outputs.alias: output 0 is input 0"),
    evaluation(2, 3, "compile_error", None, "nvcc failed"),
]
LOOSE = [evaluation(1, 1, "no_kernel", True), evaluation(1, 2, "incorrect", True), evaluation(2, 3, "compile_error", None)]
ORACLE = {
    (1, 1): {"0.0001": ok(True), "0.01": ok(True)},
    (1, 2): {"0.0001": {"compiled": True, "correctness": False, "metadata": {"max_difference": "['0.0002']", "hardware": "H100"}}, "0.01": ok(True)},
    (2, 3): {"0.0001": {"error": "timed out after 300 s"}, "0.01": {"compiled": False, "correctness": False}},
}


@pytest.mark.parametrize("gz", [False, True])
def test_agreement_per_tolerance_and_the_disagreeing_row(tmp_path, gz):
    runs = compare.kbench_runs([record(tmp_path, "strict", 1e-4, STRICT, gz), record(tmp_path, "loose", 1e-2, LOOSE, gz)])
    table, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, ORACLE)), runs)
    assert (agree[1e-4]["agree"], agree[1e-4]["differ"]) == (2, 1)
    assert (agree[1e-2]["agree"], agree[1e-2]["differ"]) == (3, 0)
    assert "| 0.0001 | 3 | 2 | 1 | 0 |" in table
    assert "| level1/2 | incorrect | yes | no | yes | yes |" in table
    assert "| level2/3 | compile_error | - | no | - | no |" in table
    assert "| incorrect | 1 |" in table and "| compile_error | 1 |" in table
    assert "Disagreements: 1" in table
    [line] = [x for x in table.splitlines() if x.startswith("| level1/2 | 0.0001 |")]
    assert "outputs.alias" in line and "max_difference=['0.0002']" in line and "hardware" not in line


def test_a_row_missing_on_one_side_is_counted_not_compared(tmp_path):
    runs = compare.kbench_runs([record(tmp_path, "strict", 1e-4, STRICT, False)])
    rows = {k: v for k, v in ORACLE.items() if k != (2, 3)}
    _, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, rows)), runs)
    assert dict(agree[1e-4]) == {"agree": 1, "differ": 1, "missing": 1}


def test_records_of_one_tolerance_are_joined_a_later_row_replacing_an_earlier(tmp_path):
    first = record(tmp_path, "first", 1e-4, STRICT[:2], False)
    second = record(tmp_path, "second", 1e-4, [evaluation(1, 2, "no_kernel", False), STRICT[2]], False)
    runs = compare.kbench_runs([first, second])
    assert sorted(runs[1e-4]) == [(1, 1), (1, 2), (2, 3)]
    assert runs[1e-4][(1, 2)]["verdict"] == "no_kernel"
    _, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, ORACLE)), runs)
    assert dict(agree[1e-4]) == {"agree": 3}


def test_a_record_without_the_tolerance_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"config": {}, "evaluations": []}))
    with pytest.raises(SystemExit, match="kernelbench_tolerance"):
        compare.kbench_runs([str(path)])


def test_one_run_serves_every_tolerance_through_kernelbench_needed(tmp_path):
    """At its own tolerance a run's `kernelbench_correct` decides; at another, its trials'
    `kernelbench_needed`; a record without it says nothing there."""
    evals = [dict(e) for e in STRICT]
    evals[0]["kernelbench_needed"] = 0.0
    evals[1]["kernelbench_needed"] = 2e-4
    runs = compare.kbench_runs([record(tmp_path, "strict", 1e-4, evals, False)])
    table, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, ORACLE)), runs)
    assert dict(agree[1e-4]) == {"agree": 2, "differ": 1}
    assert dict(agree[1e-2]) == {"agree": 3}
    assert "| level1/2 | incorrect | yes | no | yes | yes |" in table
    evals[1]["kernelbench_needed"] = 0.5
    runs = compare.kbench_runs([record(tmp_path, "strict", 1e-4, evals, False)])
    _, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, ORACLE)), runs)
    assert dict(agree[1e-2]) == {"agree": 2, "differ": 1}
    del evals[1]["kernelbench_needed"]
    runs = compare.kbench_runs([record(tmp_path, "strict", 1e-4, evals, False)])
    _, agree = compare.compare(compare.oracle_rows(oracle(tmp_path, ORACLE)), runs)
    assert dict(agree[1e-2]) == {"agree": 2, "missing": 1}


def test_a_later_oracle_run_replaces_rows_at_its_tolerances(tmp_path):
    first = oracle(tmp_path, ORACLE)
    later = tmp_path / "later.jsonl.gz"
    with gzip.open(later, "wt") as f:
        f.write(json.dumps({"key": "level1/1", "level": 1, "number": 1, "tolerances": {"0.01": ok(False)}}) + "\n")
    rows = compare.oracle_rows(first, str(later))
    assert rows[(1, 1)] == {1e-4: ok(True), 1e-2: ok(False)}
    assert rows[(1, 2)][1e-2] == ok(True)
