"""Every table of this report's README from the committed records:
python3 reports/h100-isolation/analyze.py"""

import collections
import gzip
import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).parent
CALLS = ("call1", "call2", "call3", "call4")
CL1 = HERE.parent / "h100-verdicts" / "cl1.results.json.gz"


def evaluations(name):
    path = HERE / name
    return json.load(gzip.open(path))["evaluations"] if path.exists() else []


def label(e):
    return (e.get("timing") or {}).get("label")


def identity():
    print("## Identities (40 tasks, every sixth of the 250)\n")
    print("| call | code | evaluated | labels | not SAME | pause_s median / max / sum | candidate_end_s median / max / sum | evaluation seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for call, code in (("call1", "592314f"), ("call2", "e3113c5"), ("call3", "5fabbad"), ("call4", "2a0b34a")):
        es = evaluations(f"{call}-identity.results.json.gz")
        labels = collections.Counter(label(e) for e in es)
        odd = "; ".join(f"{e['file']} {label(e)} {e['timing']['speedup']:.3f} ({e['timing']['method']})" for e in es if label(e) != "same")
        ps = [e["phases"].get("pause_s", 0.0) for e in es]
        ce = [e["phases"].get("candidate_end_s", 0.0) for e in es]
        print(f"| {call} | {code} | {len(es)} | {dict(labels)} | {odd} | {statistics.median(ps):.3f} / {max(ps):.3f} / {sum(ps):.2f} | "
              f"{statistics.median(ce):.3f} / {max(ce):.3f} / {sum(ce):.2f} | {sum(e['seconds'] for e in es):.1f} |")
    print()


def attacks():
    print("## Attacks (level1/19_ReLU)\n")
    rows = collections.defaultdict(dict)
    for call in CALLS:
        for e in evaluations(f"{call}-attacks.results.json.gz"):
            rp = next((c for c in e["checks"] if c["name"] == "runtime.processes"), None)
            rows[e["file"].split("/")[-1]][call] = f"{e['verdict']} {label(e) or ''}".strip() + (f" [{rp['outcome']}]" if rp and rp["outcome"] != "pass" else "")
    print("| file | call1 | call2 | call3 | call4 |\n|---|---|---|---|---|")
    for f, r in sorted(rows.items()):
        print(f"| {f} | " + " | ".join(r.get(c, "-") for c in CALLS) + " |")
    print()


def cuda_l1():
    print("## CUDA-L1 sample against the last full record (h100-verdicts/cl1, H100)\n")
    old = {e["file"]: e for e in json.load(gzip.open(CL1))["evaluations"]}
    print("| call | rows | same verdict | changed |\n|---|---|---|---|")
    for call in ("call1", "call2", "call4"):
        es = evaluations(f"{call}-cuda-l1.results.json.gz")
        changed = [f"{e['file'].split('_')[0]} {old[e['file']]['verdict']} -> {e['verdict']}" for e in es if old[e["file"]]["verdict"] != e["verdict"]]
        print(f"| {call} | {len(es)} | {len(es) - len(changed)} | {'; '.join(changed)} |")
    print()


def corpus():
    print("## GPU corpus\n")
    for call in CALLS:
        path = HERE / f"{call}-corpus.table.md"
        if path.exists():
            print(f"{call}: {path.read_text().strip().splitlines()[-1]} ({len(evaluations(f'{call}-corpus.results.json.gz'))} evaluated)")
    for e in evaluations("call1-corpus.results.json.gz"):
        if "beside" in e["file"]:
            print(f"call1 {e['file']}: {e['verdict']}: {e['reason'][:160]}")
    print()


identity()
attacks()
cuda_l1()
corpus()
