"""Does a kernel's time depend on where its input and output lie? level1/33's training-mode
BatchNorm2d (input and output 4 GiB each) and, as a control, x + 1, timed for input block i and
output block j among N blocks of 4 GiB (default 6; about 26 GB of GPU memory).

    python3 place.py [N]

Prints each op's row i: the median of 5 calls (ms, L2 flushed before each) for every output
block j; then four pairs timed again, to show a pair's time is a property of the pair. The
output of a call lands in block j because j is the only free block of its size in PyTorch's
caching allocator when the call allocates it.
"""

import sys

import torch

N = int(sys.argv[1]) if len(sys.argv) > 1 else 6
SHAPE = (64, 64, 512, 512)
DEV = "cuda"

torch.manual_seed(0)
bn = torch.nn.BatchNorm2d(64).to(DEV)
blocks = [torch.empty(SHAPE, device=DEV).uniform_() for _ in range(N)]
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
flush, sink = torch.ones((100 << 20) // 4, device=DEV), torch.empty((), device=DEV)


def timed(fn, reps=5):
    """The median time of `fn` over `reps` calls, and its output's address (each output is let
    go before the next call)."""
    times, ptr = [], None
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.sum(flush, dim=0, out=sink)
        start.record()
        out = fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
        ptr = out.data_ptr()
        del out
    return sorted(times)[reps // 2], ptr


def pair(op, i, j):
    """`op` on block i with its output in block j."""
    x = blocks[i]
    blocks[j] = None  # the only free block of this size: the output's
    ms, ptr = timed((lambda: bn(x)) if op == "bn" else (lambda: torch.add(x, 1.0)))
    blocks[j] = torch.empty(SHAPE, device=DEV)  # takes the freed block back
    assert blocks[j].data_ptr() == ptr, (hex(ptr), hex(blocks[j].data_ptr()))
    return ms


print("blocks", [hex(b.data_ptr()) for b in blocks], flush=True)
first = {}
with torch.no_grad():
    for op in ("bn", "add"):
        for i in range(N):
            for j in range(N):
                if i != j:
                    first[(op, i, j)] = pair(op, i, j)
            print(op, i, [round(first.get((op, i, j), 0), 3) for j in range(N)], flush=True)
    for i, j in [(0, 1), (1, 0), (2, 3), (3, 2)]:
        print("again bn", i, j, round(pair("bn", i, j), 3), "was", round(first[("bn", i, j)], 3))
