"""`memory.poisoned_allocator` (GPU): fill the memory the caching allocator will hand out next.

A kernel that returns `torch.empty` without writing every element, or harvests stale blocks
(the Sakana class), gets whatever the previous call or the previous tensors left there. Before
each candidate call the worker empties the cache, allocates most free memory plus a row of
small blocks, fills them with a pattern and frees them without emptying the cache, so the
submission's next allocations are poison: NaN on trial calls (any read shows), a finite value
on the deep checks' reruns (so two runs of a stale read disagree).
"""

import torch

NAN = float("nan")
FINITE = -7.0

# The large block: most of free memory, bounded so that filling it stays ~ms.
LARGE_FRACTION = 0.85
LARGE_MAX = 8 << 30
# The caching allocator serves requests up to 1 MiB from a separate small pool.
SMALL_BYTES = 1 << 20
SMALL_COUNT = 32


def poison(device, value):
    """Fill free memory with ``value`` and leave it cached; returns (outcome, evidence)."""
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    large = min(int(free * LARGE_FRACTION), LARGE_MAX) // 4
    try:
        blocks = [torch.empty(large, dtype=torch.float32, device=device)]
        blocks += [torch.empty(SMALL_BYTES // 4, dtype=torch.float32, device=device) for _ in range(SMALL_COUNT)]
    except torch.cuda.OutOfMemoryError:
        return "skip", f"could not allocate {4 * large:,} bytes to poison"
    for block in blocks:
        block.fill_(value)
    poisoned = sum(b.numel() * 4 for b in blocks)
    del blocks  # back to the cache, not to the driver: the submission's allocations get them
    return "pass", f"{poisoned:,} bytes of free memory filled with {value}"
