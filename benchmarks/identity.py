"""Write the identity submission: every task's own reference saved as ModelNew.

    python3 benchmarks/identity.py OUT_DIR [TASKS_DIR] [--twice]

Each level<L>/<task>.py of TASKS_DIR (default: this repository's) is copied to
OUT_DIR/level<L>/<task>.py with `ModelNew = Model` appended. kbench should find every one
correct (a no_kernel verdict: it is pure PyTorch) and its speedup 1 within noise.

With --twice, ModelNew runs the reference's forward twice and returns the second result: the
same outputs for deterministic tasks at twice the work, which kbench should label SLOWER with a
speedup near 0.5.
"""

import argparse
from pathlib import Path

IDENTITY = "\n\nModelNew = Model\n"
TWICE = '''

class ModelNew(Model):
    """The reference's work, done twice."""

    def forward(self, *args):
        super().forward(*args)
        return super().forward(*args)
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="OUT_DIR", help="where the submission goes")
    parser.add_argument("tasks", type=Path, nargs="?", metavar="TASKS_DIR", help="the task tree (default: this repository's)")
    parser.add_argument("--twice", action="store_true", help="ModelNew does the reference's work twice (kbench should say SLOWER, 0.5)")
    args = parser.parse_args()
    suffix = TWICE if args.twice else IDENTITY
    out, tasks = args.out, args.tasks or Path(__file__).resolve().parents[1]
    levels = [level for level in ("level1", "level2", "level3") if (tasks / level).is_dir()]
    if not levels:
        parser.error(f"{tasks} holds no level1, level2 or level3 folder of tasks")
    count = 0
    for level in levels:
        for task in sorted((tasks / level).glob("[0-9]*_*.py")):
            target = out / level / task.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(task.read_text() + suffix)
            count += 1
    print(f"wrote {count} submissions to {out}")


if __name__ == "__main__":
    main()
