"""Write the identity submission: every task's own reference saved as ModelNew.

    python3 benchmarks/identity.py OUT_DIR [TASKS_DIR] [--twice]

Each level<L>/<task>.py of TASKS_DIR (default: this repository's) is copied to
OUT_DIR/level<L>/<task>.py with `ModelNew = Model` appended. kbench should find every one
correct (a no_kernel verdict: it is pure PyTorch) and its speedup 1 within noise.

With --twice, ModelNew runs the reference's forward twice and returns the second result: the
same outputs for deterministic tasks at twice the work, which kbench should label SLOWER with a
speedup near 0.5.
"""

import sys
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
    args = [a for a in sys.argv[1:] if a != "--twice"]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    suffix = TWICE if "--twice" in sys.argv else IDENTITY
    out = Path(args[0])
    tasks = Path(args[1]) if len(args) == 2 else Path(__file__).resolve().parents[1]
    count = 0
    for level in ("level1", "level2", "level3"):
        for task in sorted((tasks / level).glob("[0-9]*_*.py")):
            target = out / level / task.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(task.read_text() + suffix)
            count += 1
    print(f"wrote {count} submissions to {out}")


if __name__ == "__main__":
    main()
