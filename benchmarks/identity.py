"""Write the identity submission: every task's own reference saved as ModelNew.

    python3 benchmarks/identity.py OUT_DIR [TASKS_DIR]

Each level<L>/<task>.py of TASKS_DIR (default: this repository's) is copied to
OUT_DIR/level<L>/<task>.py with `ModelNew = Model` appended. kbench should find every one
correct (a no_kernel verdict: it is pure PyTorch) and its speedup 1 within noise.
"""

import sys
from pathlib import Path


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    tasks = Path(sys.argv[2]) if len(sys.argv) == 3 else Path(__file__).resolve().parents[1]
    count = 0
    for level in ("level1", "level2", "level3"):
        for task in sorted((tasks / level).glob("[0-9]*_*.py")):
            target = out / level / task.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(task.read_text() + "\n\nModelNew = Model\n")
            count += 1
    print(f"wrote {count} identity submissions to {out}")


if __name__ == "__main__":
    main()
