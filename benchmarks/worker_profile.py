"""Where the workers' time goes: the cProfile files of a run made with
``KBENCH_WORKER_PROFILE=DIR`` (and ``--sandbox off``), summed per role.

    python3 benchmarks/worker_profile.py DIR [--top N]

For each role (reference, candidate): the time in each request's handler, then the functions
with the most cumulative time among kbench's worker code and the most time of their own
anywhere (torch's, the driver's)."""

import argparse
import io
import pstats
from pathlib import Path


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
        for title, order, pattern in (
            ("cumulative, kbench's worker code", "cumulative", "kbench_worker"),
            ("own time, anywhere", "tottime", ""),
        ):
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats(order).print_stats(*([pattern] if pattern else []), args.top)
            table = out.getvalue()
            print(f"### {title}\n\n```\n{table[table.find('   ncalls'):].rstrip()}\n```\n")


if __name__ == "__main__":
    main()
