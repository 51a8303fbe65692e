"""Upstream KernelBench's own eval of CUDA-L1's kernels, as an oracle for kbench's
`kernelbench_correct` (issue 31).

    python3 benchmarks/kernelbench_oracle.py CORPUS.jsonl --upstream KB --out oracle.jsonl \
        [--tolerances 1e-4,1e-2] [--jobs N] [--gpu-jobs M] [--row-timeout S] [--limit-s S] \
        [--resume] [--only 1/19,2/3] [--dry-run]

CORPUS is CUDA-L1's JSON Lines release (level_id, task_id, ref_code, custom_code); the rows kept
are those `kbench import cuda-l1` turns into submissions: the first row of each (level, task),
with a ref_code and a custom_code that is not null, blank or "None". A row's key is
"level{L}/{N}", matched to kbench's results.json by its task's level and number
(benchmarks/oracle_compare.py).

KB is a checkout of upstream KernelBench (its `src/kernelbench` package is imported at run time
from there, in each row's own process; nothing of it is copied here). Each row runs in its own
process group with a hard timeout: upstream's `build_compile_cache` builds the extension into the
row's own build dir on the CPU (up to --jobs rows at once), then, holding one of --gpu-jobs GPU
slots, `eval_kernel_against_ref` runs once per tolerance (5 correctness trials, seed 42, no
performance measurement), each tolerance in a fresh process (later ones reuse the build): a
kernel that changes global state on import or construction (TF32 switches, cuDNN benchmark mode,
TorchScript caches) would otherwise carry it into the next tolerance's evaluation. Upstream's eval takes no tolerance:
its `run_and_check_correctness` reads `get_tolerance_for_precision(precision)` from its module,
so this script replaces that module attribute in the row's process before each call (atol = rtol
= the tolerance, as upstream uses it); upstream's files are not modified. Upstream's package
imports LLM clients (openai, litellm, python-dotenv) that the eval path never calls: where one is
not installed it is stubbed in the row's process (dotenv's load_dotenv as a no-op, anything else
raising when called). It needs pydantic, requests, numpy, tqdm and torch with CUDA.

Each finished row is appended to --out as one JSON line (written only by the parent, so the file
is consistent whenever it stops): key, level, number, and per tolerance upstream's compiled,
correctness and metadata, or an error (a timeout, a crash, upstream returning None for a lock
error). At --limit-s the rows still running are killed and not written; --resume skips the keys
already in --out.
"""

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor


def code(row, key):
    value = row.get(key)
    if not isinstance(value, str) or not value.strip() or value.strip() == "None":
        return None
    return value


def whole(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def corpus_rows(path):
    """The rows kbench imports as submissions: (key, level, number, ref, custom)."""
    seen = set()
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            level, number = whole(row.get("level_id")), whole(row.get("task_id"))
            if not level or number is None or (level, number) in seen:
                continue
            seen.add((level, number))
            ref, custom = code(row, "ref_code"), code(row, "custom_code")
            if ref is None or custom is None:
                continue
            rows.append((f"level{level}/{number}", level, number, ref, custom))
    return rows


def done_keys(path):
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        return {json.loads(line)["key"] for line in f if line.strip()}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus")
    p.add_argument("--upstream", help="upstream KernelBench checkout (holds src/kernelbench)")
    p.add_argument("--out", help="JSON Lines results, appended as rows finish")
    p.add_argument("--tolerances", default="1e-4,1e-2", type=lambda s: [float(t) for t in s.split(",")])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="rows at once")
    p.add_argument("--gpu-jobs", type=int, default=4, help="rows on the GPU at once")
    p.add_argument("--row-timeout", type=float, default=300.0, help="seconds a row may take at each tolerance")
    p.add_argument("--limit-s", type=float, default=0.0, help="stop after this many seconds (0: none)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kb-oracle"), help="build dirs, GPU slot locks, each row's log")
    p.add_argument("--resume", action="store_true", help="skip rows already in --out")
    p.add_argument("--only", default="", help="only these tasks, e.g. 1/19,2/3")
    p.add_argument("--dry-run", action="store_true", help="list the rows that would run")
    p.add_argument("--row", help=argparse.SUPPRESS)  # a row's own process: its spec file
    args = p.parse_args(argv)
    if not args.dry_run and not args.row and not (args.upstream and args.out):
        p.error("--upstream and --out are needed unless --dry-run")
    return args


def selected(args):
    rows = corpus_rows(args.corpus)
    if args.only:
        wanted = {f"level{t.split('/')[0]}/{t.split('/')[1]}" for t in args.only.split(",")}
        rows = [r for r in rows if r[0] in wanted]
    if args.resume and args.out:
        done = done_keys(args.out)
        rows = [r for r in rows if r[0] not in done]
    return rows


# ---- a row's own process ----------------------------------------------------------------------


def stub_missing(names):
    """Stub the LLM-client modules upstream's package imports but its eval never calls: each
    name it imports from them (module -> names) raises when called; load_dotenv is a no-op."""
    import importlib.util

    def unavailable(*_a, **_k):
        raise RuntimeError("not installed: stubbed by kernelbench_oracle.py")

    for name, attrs in names.items():
        if importlib.util.find_spec(name) is None:
            module = types.ModuleType(name)
            for attr in attrs:
                setattr(module, attr, unavailable)
            if name == "dotenv":
                module.load_dotenv = lambda *a, **k: False
            sys.modules[name] = module


def run_row(spec_path):
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    sys.path.insert(0, os.path.join(spec["upstream"], "src"))
    stub_missing({"dotenv": ["load_dotenv"], "openai": ["OpenAI"], "litellm": ["completion"]})
    import torch
    from kernelbench import eval as kb_eval

    os.makedirs(spec["build_dir"], exist_ok=True)
    ok, _, error = kb_eval.build_compile_cache(spec["custom"], build_dir=spec["build_dir"])
    results = {"precompiled": ok, "precompile_error": error}
    with gpu_slot(spec["slots"], spec["gpu_jobs"]):
        for tol in spec["tolerances"]:
            kb_eval.get_tolerance_for_precision = lambda _p, tol=tol: tol
            try:
                r = kb_eval.eval_kernel_against_ref(
                    spec["ref"],
                    spec["custom"],
                    seed_num=42,
                    num_correct_trials=5,
                    num_perf_trials=0,
                    measure_performance=False,
                    verbose=False,
                    build_dir=spec["build_dir"],
                    device=torch.device("cuda:0"),
                    backend="cuda",
                    precision=torch.float32,
                )
                results[repr(tol)] = (
                    {"error": "upstream returned None (a lock error: retry)"}
                    if r is None
                    else {"compiled": r.compiled, "correctness": r.correctness, "metadata": {k: str(v) for k, v in r.metadata.items()}}
                )
            except Exception as e:  # upstream raised: recorded, the next tolerance still runs
                results[repr(tol)] = {"error": f"{type(e).__name__}: {e}"[:2000]}
            with open(spec["result"], "w", encoding="utf-8") as f:
                json.dump(results, f)


class gpu_slot:
    """One of N lock files under a folder, held while the row runs on the GPU."""

    def __init__(self, folder, n):
        self.folder, self.n, self.f = folder, n, None

    def __enter__(self):
        os.makedirs(self.folder, exist_ok=True)
        while True:
            for i in range(self.n):
                f = open(os.path.join(self.folder, f"slot{i}"), "w")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self.f = f
                    return self
                except BlockingIOError:
                    f.close()
            time.sleep(0.2)

    def __exit__(self, *_):
        self.f.close()


# ---- the parent -------------------------------------------------------------------------------


def run_tolerance(args, row, tol, left):
    """One tolerance of the row ``(name, ref, custom)`` in a process of its own, given ``left``
    seconds: its exit code (None where it ran out of time, killed with its process group) and
    the results it wrote."""
    name, ref, custom = row
    spec = {
        "upstream": os.path.abspath(args.upstream),
        "ref": ref,
        "custom": custom,
        "tolerances": [tol],
        "build_dir": os.path.join(args.work, "build", name),
        "slots": os.path.join(args.work, "slots"),
        "gpu_jobs": args.gpu_jobs,
        "result": os.path.join(args.work, f"{name}.{tol!r}.result.json"),
    }
    if os.path.exists(spec["result"]):
        os.remove(spec["result"])
    spec_path = os.path.join(args.work, f"{name}.{tol!r}.spec.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    with open(os.path.join(args.work, f"{name}.{tol!r}.log"), "w") as log:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), args.corpus, "--row", spec_path],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = child.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            rc = None
    if not os.path.exists(spec["result"]):
        return rc, {}
    with open(spec["result"], encoding="utf-8") as f:
        return rc, json.load(f)


def run_all(args, rows):
    deadline = time.monotonic() + args.limit_s if args.limit_s else None
    lock = threading.Lock()
    stopped = threading.Event()
    counts = {"written": 0, "left": 0}
    os.makedirs(args.work, exist_ok=True)

    def remaining():
        return args.row_timeout if deadline is None else min(args.row_timeout, deadline - time.monotonic())

    def one(row):
        key, level, number, ref, custom = row
        left = remaining()
        if stopped.is_set() or left <= 0:
            with lock:
                counts["left"] += 1
            return
        name = key.replace("/", "_")
        start = time.monotonic()
        results, rc = {}, 0
        for tol in args.tolerances:  # each tolerance in a fresh process: nothing carries over
            left = remaining()
            if left <= 0:
                rc = None
                break
            rc, found = run_tolerance(args, (name, ref, custom), tol, left)
            results.update(found)
            if rc is None:
                break
        if rc is None and left < args.row_timeout:
            stopped.set()  # the run's limit, not the row's: left for --resume
            with lock:
                counts["left"] += 1
            return
        why = f"timed out after {args.row_timeout:g} s" if rc is None else f"row process exit code {rc}"
        record = {
            "key": key,
            "level": level,
            "number": number,
            "seconds": round(time.monotonic() - start, 1),
            "precompiled": results.get("precompiled"),
            "precompile_error": results.get("precompile_error"),
        }
        record["tolerances"] = {repr(t): results.get(repr(t), {"error": why}) for t in args.tolerances}
        with lock:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            counts["written"] += 1
        print(f"{key}: " + ", ".join(f"{t}={v.get('correctness', v.get('error'))}" for t, v in record["tolerances"].items()), flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(one, rows))
    print(f"{counts['written']} row(s) written to {args.out}, {counts['left']} left for --resume")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.row:
        run_row(args.row)
        return
    rows = selected(args)
    if args.dry_run:
        for key, *_ in rows:
            print(key)
        print(f"{len(rows)} row(s)", file=sys.stderr)
        return
    run_all(args, rows)


if __name__ == "__main__":
    main()
