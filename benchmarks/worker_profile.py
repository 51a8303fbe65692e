"""Where the workers' time goes: the cProfile files of a run made with
``KBENCH_WORKER_PROFILE=DIR`` (and ``--sandbox off``), summed per role.

    python3 benchmarks/worker_profile.py DIR [--top N]

For each role (reference, candidate): the calls and seconds per worker of each entry point,
kbench's functions the profiler saw called from outside Python: the request handlers, and any
callback C code made (a reference or candidate worker serves one evaluation, so these are per
evaluation: the median over workers, and the total). Then the functions with the most
cumulative time among kbench's worker code, and those with the most time of their own
anywhere (torch's, the driver's)."""

import argparse
import io
import pstats
import statistics
from pathlib import Path


def handlers(path):
    """{entry point: (calls, seconds)} of one worker's profile: kbench's functions with no
    profiled caller (the handlers `runcall` called, and callbacks from C code)."""
    stats = pstats.Stats(str(path)).stats
    return {f"{Path(file).name}:{name}": (calls, cumulative) for (file, _, name), (_, calls, _, cumulative, callers) in stats.items() if not callers and "kbench_worker" in file}


def handler_table(paths):
    """Markdown rows: each handler's median calls and seconds per worker, and its total."""
    per_worker = [handlers(p) for p in paths]
    names = sorted({n for w in per_worker for n in w}, key=lambda n: -sum(w.get(n, (0, 0))[1] for w in per_worker))
    rows = ["| entry point | workers | calls per worker (median) | s per worker (median) | s in all |", "| --- | --- | --- | --- | --- |"]
    for name in names:
        seen = [w[name] for w in per_worker if name in w]
        calls = statistics.median(c for c, _ in seen)
        seconds = statistics.median(t for _, t in seen)
        rows.append(f"| {name} | {len(seen)} | {calls:g} | {seconds:.3f} | {sum(t for _, t in seen):.1f} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    files = sorted(args.directory.glob("*.prof"))
    if not files:
        raise SystemExit(f"no .prof files in {args.directory}")
    for role in sorted({f.name.rsplit("-", 1)[0] for f in files}):
        mine = [str(f) for f in files if f.name.rsplit("-", 1)[0] == role]
        stats = pstats.Stats(mine[0])
        for other in mine[1:]:
            stats.add(other)
        print(f"## {role}: {len(mine)} worker(s)\n")
        print(f"### entry points (request handlers)\n\n{handler_table(mine)}\n")
        for title, order, pattern in (
            ("cumulative, kbench's worker code", "cumulative", "kbench_worker"),
            ("own time, anywhere", "tottime", ""),
        ):
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats(order).print_stats(*([pattern] if pattern else []), args.top)
            table = out.getvalue()
            print(f"### {title}\n\n```\n{table[table.find('   ncalls') :].rstrip()}\n```\n")


if __name__ == "__main__":
    main()
