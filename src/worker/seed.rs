//! The seed derivation kbench and its workers share: kbench derives every seed it sends, and a
//! worker that draws several sets of inputs from one (a timed block's) derives the others as
//! kbench does, so kbench can check a timed call's output on inputs it made itself.

use sha2::{Digest, Sha256};

/// A seed derived from the run's seed for one use (`stream`): the first 8 bytes of SHA-256 over
/// both as little-endian u64s, cut to 53 bits so JSON carries it exactly. One-way, so knowing
/// one derived seed (e.g. the forward seed a submission can read from torch) reveals no other.
/// `kbench_worker/timing/seeds.py` derives timed calls' seeds the same way.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(stream.to_le_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first) & ((1 << 53) - 1)
}
