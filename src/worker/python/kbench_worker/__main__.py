"""python -m kbench_worker {compile|reference|candidate|probe}"""

import sys

from .protocol import Channel


def main():
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    channel = Channel()
    if role == "compile":
        from . import compile as worker
    elif role == "reference":
        from . import reference as worker
    elif role == "candidate":
        from . import candidate as worker
    elif role == "probe":
        from . import probe as worker
    else:
        sys.exit(f"unknown role {role!r}: expected compile, reference, candidate or probe")
    worker.run(channel)


if __name__ == "__main__":
    main()
