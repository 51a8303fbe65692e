"""kbench's seed derivation, which the timed calls' inputs follow (src/worker/seed.rs).

The ``j``-th draw of a block uses seed ``derive_seed(block_seed, j)`` and forward seed
``derive_seed(seed, 0)``, where kbench sends a fresh block seed with every block, drawn from
randomness no worker holds: nothing the candidate saw before a block tells it that block's
inputs. The warm-up uses the set-up's seed. kbench derives the same values to check a kept
output without trusting the candidate's word on which inputs it used.
"""

import hashlib

MASK53 = (1 << 53) - 1


def derive_seed(base, stream):
    """kbench's seed derivation (pipeline/mod.rs `derive_seed`): the first 8 bytes of SHA-256 over
    two little-endian u64s, as an integer, cut to 53 bits so JSON carries it exactly."""
    digest = hashlib.sha256(base.to_bytes(8, "little") + stream.to_bytes(8, "little")).digest()
    return int.from_bytes(digest[:8], "little") & MASK53
