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

/// What a seed derived from the run's seed is for: each use draws from its own stream, so no
/// two uses share inputs, and the numbers are allocated here only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The base of timing's warm-up draws and of its statistics' resampling.
    Timing,
    /// Correctness trial `index`: its inputs, or (`forward`) its forward's random state.
    Trial { index: u32, forward: bool },
    /// `params.perturbation`'s new parameter values.
    Perturb,
    /// The profiled calls after timing: their inputs, or their forward's random state.
    Profile { forward: bool },
    /// The candidate's state checks after timing: their inputs, or their forward's.
    State { forward: bool },
}

impl Stream {
    /// The stream's number: the trials count up from 1 (two streams each), the stages' down
    /// from `u64::MAX`, timing's is 0.
    fn number(self) -> u64 {
        match self {
            Stream::Timing => 0,
            Stream::Trial { index, forward } => 2 * u64::from(index) + 1 + u64::from(forward),
            Stream::Perturb => u64::MAX,
            Stream::Profile { forward } => u64::MAX - 1 - u64::from(forward),
            Stream::State { forward } => u64::MAX - 3 - u64::from(forward),
        }
    }

    /// The seed of this stream in the run whose seed is `run`.
    pub fn seed(self, run: u64) -> u64 {
        derive_seed(run, self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_seeds_differ_and_repeat() {
        let seeds: Vec<u64> = (0..10).map(|i| derive_seed(42, i)).collect();
        let mut unique = seeds.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10);
        assert_eq!(seeds[3], derive_seed(42, 3));
        assert!(
            seeds.iter().all(|s| *s < 1 << 53),
            "seeds must survive JSON as exact numbers"
        );
        // The worker derives timed calls' seeds the same way (timing/seeds.py derive_seed(42, 3)).
        assert_eq!(derive_seed(42, 3), 542_934_981_142_619);
    }

    /// Every use has a stream of its own, for as many trials as a run can ask for, and the
    /// numbers are the ones earlier records were made with.
    #[test]
    fn every_stream_is_its_own() {
        let fixed = [
            Stream::Timing,
            Stream::Perturb,
            Stream::Profile { forward: false },
            Stream::Profile { forward: true },
            Stream::State { forward: false },
            Stream::State { forward: true },
        ];
        let trials = (0..10_000u32)
            .flat_map(|index| [false, true].map(|forward| Stream::Trial { index, forward }));
        let mut numbers: Vec<u64> = fixed
            .into_iter()
            .chain(trials)
            .map(Stream::number)
            .collect();
        let all = numbers.len();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), all);
        let trial = |index, forward| Stream::Trial { index, forward }.number();
        assert_eq!(
            [trial(0, false), trial(0, true), trial(1, false)],
            [1, 2, 3]
        );
        assert_eq!(
            [
                Stream::Profile { forward: true },
                Stream::State { forward: false }
            ]
            .map(Stream::number),
            [u64::MAX - 2, u64::MAX - 3]
        );
        assert_eq!(
            Stream::Trial {
                index: 1,
                forward: false
            }
            .seed(42),
            542_934_981_142_619
        );
    }
}
