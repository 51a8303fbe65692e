//! The statistics of one arm and of two arms against each other: samples, speedups with
//! confidence intervals, rank tests, decision labels and sample-quality warnings (the suite's
//! are `suite`'s). Pure, as the rest of `stats`.

use std::collections::BTreeMap;
use std::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Bootstrap resamples of the protocol (10.4 step 16).
pub const DEFAULT_RESAMPLES: usize = 5_000;
/// Confidence level of every reported interval.
pub const DEFAULT_LEVEL: f64 = 0.95;
/// Practical band of the decision label on a dedicated GPU (10.4 step 17).
pub const DELTA_DEDICATED: f64 = 0.01;
/// Practical band on a GPU shared with other compute processes.
pub const DELTA_SHARED: f64 = 0.03;
/// Systematic relative error of a speedup whose times are all host submission (a forward that
/// synchronizes with the host inside and keeps the GPU waiting): the host's speed drifts in ways
/// the rounds do not average out. On an H100, identity runs of the ten such tasks (level3/30,
/// 34-42) read 0.83-1.25 with the arms on different CPUs, with intervals as narrow as ±3 %, and
/// 0.94-1.12 with both on one (`cpus`); `timing::host_error` scales it by the idle share.
pub const HOST_SPEED_ERROR: f64 = 0.25;
/// The stopping rule looks at no arm with fewer samples (10.3 step 13).
pub const MIN_SAMPLES_FOR_STOPPING: usize = 20;
/// Level of the stopping rule's quick interval.
pub const STOPPING_LEVEL: f64 = 0.95;
/// Share of severe outliers above which an arm's environment is called noisy (hyperfine).
pub const NOISY_SEVERE_FRACTION: f64 = 0.05;
/// A first sample this many MADs above the median means the warm-up was too short (hyperfine).
pub const WARMUP_MADS: f64 = 10.0;
/// Floor on the MAD and the IQR behind the warnings, as a fraction of the median. Event times are
/// quantized (~0.5 µs), so a stable kernel often has MAD = IQR = 0 and every sample one tick off
/// the median would be a severe outlier or a slow first call. Deviations under a few percent
/// move no median; with the floor a warm-up warning needs a first sample >= 10 % above the median
/// and a severe outlier lies >= 3 % of the median beyond a quartile.
const SPREAD_FLOOR: f64 = 0.01;

/// Numbers this module refuses: they would make a statistic meaningless rather than wrong.
/// Messages read after "failed to".
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("summarize {n} sample(s): at least two are needed")]
    TooFewSamples { n: usize },
    #[error("use sample {index} ({value} ms): a time must be finite and positive")]
    BadSample { index: usize, value: f64 },
    #[error("use a sample of round {round} ({value} ms): a time must be finite and positive")]
    BadRoundSample { round: u32, value: f64 },
    #[error("resample {n} round(s): at least two are needed")]
    TooFewRounds { n: usize },
    #[error("pair round {round}: it holds samples of one arm only")]
    UnpairedRound { round: u32 },
    #[error("tag samples with rounds: {samples} samples but {tags} round tags")]
    TagMismatch { samples: usize, tags: usize },
    #[error("aggregate an empty suite")]
    EmptySuite,
    #[error("aggregate task {index}: speedup {value} is not finite and positive")]
    BadSpeedup { index: usize, value: f64 },
}

pub(super) fn is_time(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

// ---------------------------------------------------------------------------------------------
// Samples of one arm

/// The accepted samples of one arm, in the order they were taken: at least two, all finite and
/// positive. The order matters for the warm-up check; a sorted copy is kept because almost every
/// statistic wants one.
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    values_ms: Vec<f64>,
    sorted_ms: Vec<f64>,
}

impl Samples {
    pub fn new(values_ms: Vec<f64>) -> Result<Self, StatsError> {
        if values_ms.len() < 2 {
            return Err(StatsError::TooFewSamples { n: values_ms.len() });
        }
        if let Some((index, &value)) = values_ms.iter().enumerate().find(|(_, v)| !is_time(**v)) {
            return Err(StatsError::BadSample { index, value });
        }
        let mut sorted_ms = values_ms.clone();
        sorted_ms.sort_by(f64::total_cmp);
        Ok(Samples {
            values_ms,
            sorted_ms,
        })
    }

    /// Samples in the order they were taken.
    pub fn values_ms(&self) -> &[f64] {
        &self.values_ms
    }

    pub fn sorted_ms(&self) -> &[f64] {
        &self.sorted_ms
    }

    // A `Samples` holds at least two values by construction, so `is_empty` would always be false.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.values_ms.len()
    }

    pub fn median_ms(&self) -> f64 {
        median_sorted(&self.sorted_ms)
    }

    pub fn mean_ms(&self) -> f64 {
        self.values_ms.iter().sum::<f64>() / self.len() as f64
    }

    /// Unbiased sample variance (n - 1 denominator), in ms².
    pub fn variance_ms2(&self) -> f64 {
        let mean = self.mean_ms();
        self.values_ms
            .iter()
            .map(|v| (v - mean).powi(2))
            .sum::<f64>()
            / (self.len() - 1) as f64
    }

    /// Quantile with linear interpolation between order statistics (R type 7, as criterion.rs).
    pub fn quantile_ms(&self, p: f64) -> f64 {
        quantile_sorted(&self.sorted_ms, p)
    }

    /// Median absolute deviation from the median, unscaled (no 1.4826 factor).
    pub fn mad_ms(&self) -> f64 {
        let median = self.median_ms();
        let mut deviations: Vec<f64> = self.values_ms.iter().map(|v| (v - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        median_sorted(&deviations)
    }
}

/// Median of a non-empty slice (NaN-free).
pub fn median(values: &[f64]) -> f64 {
    median_sorted(&sorted_copy(values))
}

fn sorted_copy(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Median of the multiset in which `sorted[k]` appears `weight(k)` times, `total` being the sum of
/// the weights (> 0). A bootstrap replicate is such a multiset: walking the sorted originals with
/// draw counts gives the replicate's median without copying or sorting it, and exactly the value
/// `median` would give on the materialized replicate.
fn weighted_median(sorted: &[f64], total: u64, weight: impl Fn(usize) -> u64) -> f64 {
    let (lo_rank, hi_rank) = ((total - 1) / 2, total / 2);
    let mut seen = 0;
    let mut lo = f64::NAN;
    for (k, &value) in sorted.iter().enumerate() {
        seen += weight(k);
        if lo.is_nan() && seen > lo_rank {
            lo = value;
        }
        if seen > hi_rank {
            return (lo + value) / 2.0;
        }
    }
    unreachable!("weights sum to less than total")
}

pub(super) fn check_level(level: f64) {
    assert!(
        level > 0.0 && level < 1.0,
        "confidence level {level} is outside (0, 1)"
    );
}

pub(super) fn check_resamples(resamples: usize) {
    assert!(resamples > 0, "a bootstrap needs at least one resample");
}

/// Percentile interval of sorted bootstrap replicates.
pub(super) fn percentile_interval(sorted: &[f64], level: f64) -> (f64, f64) {
    let tail = (1.0 - level) / 2.0;
    (
        quantile_sorted(sorted, tail),
        quantile_sorted(sorted, 1.0 - tail),
    )
}

fn standard_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the unit normal is a valid distribution")
}

/// z such that a standard normal lies in [-z, z] with probability `level`.
fn z_two_sided(level: f64) -> f64 {
    standard_normal().inverse_cdf(0.5 + level / 2.0)
}

// ---------------------------------------------------------------------------------------------
// Speedup with a bootstrap interval

/// A speedup estimate (reference / candidate) with a confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speedup {
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

impl Speedup {
    pub fn decision(&self, delta: f64) -> Decision {
        decide(self.ci_low, self.ci_high, delta)
    }
}

/// Speedup of `candidate` over `reference` as a ratio of medians, with a percentile bootstrap
/// confidence interval (each arm resampled independently). Prefer `paired_speedup` when the
/// samples come in rounds: independent resampling loses the pairing that cancels drift.
///
/// # Panics
/// On an empty arm, `resamples == 0` or a level outside (0, 1).
pub fn speedup(
    reference: &[f64],
    candidate: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Speedup {
    check_resamples(resamples);
    check_level(level);
    let (reference, candidate) = (sorted_copy(reference), sorted_copy(candidate));
    let ratio = median_sorted(&reference) / median_sorted(&candidate);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut ref_draws, mut cand_draws) =
        (vec![0u32; reference.len()], vec![0u32; candidate.len()]);
    let mut replicates: Vec<f64> = (0..resamples)
        .map(|_| {
            let r = independent_replicate_median(&reference, &mut ref_draws, &mut rng);
            r / independent_replicate_median(&candidate, &mut cand_draws, &mut rng)
        })
        .collect();
    replicates.sort_by(f64::total_cmp);
    let (ci_low, ci_high) = percentile_interval(&replicates, level);
    Speedup {
        ratio,
        ci_low,
        ci_high,
    }
}

/// Ratio of the `q` quantiles, reference over candidate (q = 0.99: tail latency), with a
/// percentile bootstrap interval (each arm resampled independently, each replicate sorted).
///
/// # Panics
/// On an empty arm, `resamples == 0`, a level outside (0, 1) or `q` outside [0, 1].
pub fn quantile_speedup(
    reference: &[f64],
    candidate: &[f64],
    q: f64,
    resamples: usize,
    level: f64,
    seed: u64,
) -> Speedup {
    check_resamples(resamples);
    check_level(level);
    assert!((0.0..=1.0).contains(&q), "quantile {q} outside [0, 1]");
    let quantile = |arm: &[f64]| quantile_sorted(&sorted_copy(arm), q);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut resample = |arm: &[f64]| {
        let draw: Vec<f64> = (0..arm.len())
            .map(|_| arm[rng.gen_range(0..arm.len())])
            .collect();
        quantile(&draw)
    };
    let mut replicates: Vec<f64> = (0..resamples)
        .map(|_| resample(reference) / resample(candidate))
        .collect();
    replicates.sort_by(f64::total_cmp);
    let (ci_low, ci_high) = percentile_interval(&replicates, level);
    Speedup {
        ratio: quantile(reference) / quantile(candidate),
        ci_low,
        ci_high,
    }
}

/// Median of one with-replacement resample of `sorted`; `draws` is scratch of the same length.
fn independent_replicate_median(sorted: &[f64], draws: &mut [u32], rng: &mut ChaCha8Rng) -> f64 {
    let n = sorted.len();
    draws.fill(0);
    for _ in 0..n {
        draws[rng.gen_range(0..n)] += 1;
    }
    weighted_median(sorted, n as u64, |k| u64::from(draws[k]))
}

/// The samples of one round: each arm's samples taken back to back within the round.
#[derive(Clone, Copy, Debug)]
pub struct Round<'a> {
    pub reference_ms: &'a [f64],
    pub candidate_ms: &'a [f64],
}

/// Two arms sampled in interleaved rounds: at least two rounds, each holding at least one finite
/// positive sample of each arm. Rounds are the unit of resampling, because samples of one round
/// share the GPU's clock and thermal state: resampling whole rounds keeps that drift paired.
#[derive(Clone, Debug)]
pub struct Rounds {
    reference: PooledArm,
    candidate: PooledArm,
    rounds: usize,
}

/// One arm's samples of all rounds, sorted, each remembering its round.
#[derive(Clone, Debug)]
struct PooledArm {
    sorted_ms: Vec<f64>,
    round_of: Vec<u32>,
    per_round: Vec<u64>,
}

impl PooledArm {
    fn new<'a>(rounds: impl Iterator<Item = &'a [f64]>) -> Self {
        let mut tagged: Vec<(f64, u32)> = Vec::new();
        let mut per_round = Vec::new();
        for (slot, samples) in rounds.enumerate() {
            tagged.extend(samples.iter().map(|&v| (v, slot as u32)));
            per_round.push(samples.len() as u64);
        }
        tagged.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (sorted_ms, round_of) = tagged.into_iter().unzip();
        PooledArm {
            sorted_ms,
            round_of,
            per_round,
        }
    }

    fn median_ms(&self) -> f64 {
        median_sorted(&self.sorted_ms)
    }

    /// Median of the arm when round `r` is drawn `draws[r]` times.
    fn replicate_median(&self, draws: &[u32]) -> f64 {
        let total = draws
            .iter()
            .zip(&self.per_round)
            .map(|(&d, &n)| u64::from(d) * n)
            .sum();
        weighted_median(&self.sorted_ms, total, |k| {
            u64::from(draws[self.round_of[k] as usize])
        })
    }
}

impl Rounds {
    pub fn new(rounds: &[Round<'_>]) -> Result<Self, StatsError> {
        Self::build(
            rounds
                .iter()
                .enumerate()
                .map(|(i, r)| (i as u32, r.reference_ms, r.candidate_ms)),
        )
    }

    /// Rounds from per-arm samples tagged with their round number (the raw-data layout: a round
    /// tag per sample). Tags need not be contiguous; a round with samples of one arm only is an
    /// error, because the protocol discards whole rounds so the arms stay balanced.
    pub fn from_tagged(
        reference_ms: &[f64],
        reference_round: &[u32],
        candidate_ms: &[f64],
        candidate_round: &[u32],
    ) -> Result<Self, StatsError> {
        for (samples, tags) in [
            (reference_ms, reference_round),
            (candidate_ms, candidate_round),
        ] {
            if samples.len() != tags.len() {
                return Err(StatsError::TagMismatch {
                    samples: samples.len(),
                    tags: tags.len(),
                });
            }
        }
        let mut grouped: BTreeMap<u32, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (&v, &round) in reference_ms.iter().zip(reference_round) {
            grouped.entry(round).or_default().0.push(v);
        }
        for (&v, &round) in candidate_ms.iter().zip(candidate_round) {
            grouped.entry(round).or_default().1.push(v);
        }
        Self::build(
            grouped
                .iter()
                .map(|(&round, (r, c))| (round, r.as_slice(), c.as_slice())),
        )
    }

    fn build<'a>(
        rounds: impl Iterator<Item = (u32, &'a [f64], &'a [f64])> + Clone,
    ) -> Result<Self, StatsError> {
        let mut n = 0;
        for (round, reference, candidate) in rounds.clone() {
            if reference.is_empty() || candidate.is_empty() {
                return Err(StatsError::UnpairedRound { round });
            }
            if let Some(&value) = reference.iter().chain(candidate).find(|v| !is_time(**v)) {
                return Err(StatsError::BadRoundSample { round, value });
            }
            n += 1;
        }
        if n < 2 {
            return Err(StatsError::TooFewRounds { n });
        }
        Ok(Rounds {
            reference: PooledArm::new(rounds.clone().map(|r| r.1)),
            candidate: PooledArm::new(rounds.map(|r| r.2)),
            rounds: n,
        })
    }

    /// Number of rounds.
    // Never empty: at least two rounds by construction.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.rounds
    }

    pub fn reference_median_ms(&self) -> f64 {
        self.reference.median_ms()
    }

    pub fn candidate_median_ms(&self) -> f64 {
        self.candidate.median_ms()
    }
}

/// A paired bootstrap: the speedup and its sorted replicates (the latter feed the suite's
/// two-level bootstrap, `geometric_mean_ci`).
#[derive(Clone, Debug, PartialEq)]
pub struct PairedBootstrap {
    pub speedup: Speedup,
    pub replicates: Vec<f64>,
}

/// Speedup S = median_ref / median_cand over all samples, with a percentile bootstrap CI that
/// resamples whole rounds with replacement (10.4 step 16): each replicate draws as many rounds as
/// there are and takes both arms' samples of every drawn round, so drift shared by the arms
/// within a round cancels in the ratio instead of widening the interval.
///
/// # Panics
/// On `resamples == 0` or a level outside (0, 1).
pub fn paired_speedup(rounds: &Rounds, resamples: usize, level: f64, seed: u64) -> PairedBootstrap {
    check_resamples(resamples);
    check_level(level);
    let ratio = rounds.reference_median_ms() / rounds.candidate_median_ms();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rounds.len();
    let mut draws = vec![0u32; n];
    let mut replicates: Vec<f64> = (0..resamples)
        .map(|_| {
            draws.fill(0);
            for _ in 0..n {
                draws[rng.gen_range(0..n)] += 1;
            }
            rounds.reference.replicate_median(&draws) / rounds.candidate.replicate_median(&draws)
        })
        .collect();
    replicates.sort_by(f64::total_cmp);
    let (ci_low, ci_high) = percentile_interval(&replicates, level);
    PairedBootstrap {
        speedup: Speedup {
            ratio,
            ci_low,
            ci_high,
        },
        replicates,
    }
}

// ---------------------------------------------------------------------------------------------
// Rank statistics: Hodges-Lehmann and Mann-Whitney

/// Hodges-Lehmann speedup: exp of the median of all pairwise differences ln(ref_i) - ln(cand_j),
/// with the distribution-free interval from Mann-Whitney order statistics (Hollander & Wolfe
/// 4.3, normal approximation with tie correction, index rounded down so coverage is at least
/// `level`). A cross-check of the ratio of medians that uses every sample.
///
/// The m·n differences (4 M at 2 000 per arm) are never materialized: each order statistic is
/// found by bisecting on the bits of an f64 and counting differences <= t in O(m + n) with two
/// pointers, so the cost is O(64 (m + n)) per statistic instead of a 32 MB sort.
///
/// # Panics
/// On a level outside (0, 1).
pub fn hodges_lehmann(reference: &Samples, candidate: &Samples, level: f64) -> Speedup {
    check_level(level);
    let logs = |s: &Samples| {
        // ln is monotone in exact arithmetic; sorting again keeps the two-pointer count exact
        // even if a libm rounds two neighbours out of order.
        let mut v: Vec<f64> = s.sorted_ms().iter().map(|v| v.ln()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let pairs = PairDifferences {
        x: logs(reference),
        y: logs(candidate),
    };
    let total = pairs.len();
    let shift = if total % 2 == 1 {
        pairs.kth(total.div_ceil(2))
    } else {
        (pairs.kth(total / 2) + pairs.kth(total / 2 + 1)) / 2.0
    };
    let (_, tie_term) = u_statistic(reference.sorted_ms(), candidate.sorted_ms());
    let sigma = u_sigma(reference.len(), candidate.len(), tie_term);
    let c = ((total as f64 / 2.0 - z_two_sided(level) * sigma)
        .floor()
        .max(1.0) as u64)
        .min(total.div_ceil(2));
    Speedup {
        ratio: shift.exp(),
        ci_low: pairs.kth(c).exp(),
        ci_high: pairs.kth(total + 1 - c).exp(),
    }
}

/// The implicit sorted list of x_i - y_j for ascending x and y.
struct PairDifferences {
    x: Vec<f64>,
    y: Vec<f64>,
}

impl PairDifferences {
    fn len(&self) -> u64 {
        (self.x.len() * self.y.len()) as u64
    }

    /// Number of pairs with x_i - y_j <= t. Floating-point subtraction is monotone in each
    /// argument, so for ascending x the first j with x_i - y_j <= t only moves right.
    fn count_le(&self, t: f64) -> u64 {
        let (mut j, mut count) = (0, 0);
        for &xi in &self.x {
            while j < self.y.len() && xi - self.y[j] > t {
                j += 1;
            }
            count += (self.y.len() - j) as u64;
        }
        count
    }

    /// The k-th smallest difference (1-based): the smallest f64 t with count_le(t) >= k. The
    /// answer is itself one of the computed differences, found exactly in at most 64 steps.
    fn kth(&self, k: u64) -> f64 {
        let (x, y) = (&self.x, &self.y);
        let mut lo = order_key(x[0] - y[y.len() - 1]);
        let mut hi = order_key(x[x.len() - 1] - y[0]);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.count_le(from_order_key(mid)) >= k {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        from_order_key(lo)
    }
}

/// Maps an f64 to a u64 whose unsigned order is the float's total order.
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// One-sided Mann-Whitney U test on the two arms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// Pairs with reference > candidate, ties counting one half: large when the candidate is faster.
    pub u: f64,
    /// (u - mn/2) / sigma without continuity correction; 0 when every sample is tied.
    pub z: f64,
    /// p-value of "the candidate is faster" (its times tend to be smaller).
    pub p_faster: f64,
    /// p-value of "the candidate is slower".
    pub p_slower: f64,
}

/// Mann-Whitney U with the tie-corrected normal approximation and a continuity correction (as R's
/// `wilcox.test(exact = FALSE)` and SciPy's asymptotic method). Ties are common because event
/// times are quantized. When every sample is tied, U cannot move under the null: both p = 1.
pub fn mann_whitney(reference: &Samples, candidate: &Samples) -> MannWhitney {
    let (m, n) = (reference.len(), candidate.len());
    let (u, tie_term) = u_statistic(reference.sorted_ms(), candidate.sorted_ms());
    let mean = (m * n) as f64 / 2.0;
    let sigma = u_sigma(m, n, tie_term);
    if sigma <= 0.0 {
        return MannWhitney {
            u,
            z: 0.0,
            p_faster: 1.0,
            p_slower: 1.0,
        };
    }
    let normal = standard_normal();
    MannWhitney {
        u,
        z: (u - mean) / sigma,
        p_faster: normal.sf((u - mean - 0.5) / sigma),
        p_slower: normal.cdf((u - mean + 0.5) / sigma),
    }
}

/// U of x against y (pairs x > y, ties one half) and the tie term sum(t³ - t) over groups of
/// equal values, by one merge of the sorted arms.
fn u_statistic(x: &[f64], y: &[f64]) -> (f64, f64) {
    let (mut i, mut j) = (0, 0);
    let (mut u, mut tie_term) = (0.0, 0.0);
    while i < x.len() || j < y.len() {
        let value = match (x.get(i), y.get(j)) {
            (Some(&a), Some(&b)) => a.min(b),
            (Some(&a), None) => a,
            (None, Some(&b)) => b,
            (None, None) => unreachable!(),
        };
        let in_x = x[i..].iter().take_while(|&&v| v == value).count();
        let in_y = y[j..].iter().take_while(|&&v| v == value).count();
        // j values of y lie strictly below `value`
        u += in_x as f64 * (j as f64 + in_y as f64 / 2.0);
        let t = (in_x + in_y) as f64;
        tie_term += t * t * t - t;
        i += in_x;
        j += in_y;
    }
    (u, tie_term)
}

/// Standard deviation of U under the null, corrected for ties.
fn u_sigma(m: usize, n: usize, tie_term: f64) -> f64 {
    let (m, n) = (m as f64, n as f64);
    let total = m + n;
    let variance = m * n / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    variance.max(0.0).sqrt()
}

// ---------------------------------------------------------------------------------------------
// Ratio of means (KernelBench compatibility)

/// A confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// Ratio of means mean_ref / mean_cand, the speedup KernelBench and GPU MODE report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanRatio {
    pub ratio: f64,
    /// Fieller interval; None when it is unbounded (the candidate's mean is not distinguishable
    /// from zero at this level, which takes a huge spread).
    pub ci: Option<Interval>,
}

/// Ratio of means with Fieller's interval for independent arms: the θ with
/// (a - θb)² <= t² (var_a + θ² var_b), a and b the means, var the squared standard errors.
/// t is Student's with min(n_ref, n_cand) - 1 degrees of freedom, the conservative choice for
/// unequal variances (it matters at the ~100 samples of KernelBench's loop: t₉₉ = 1.984 vs z = 1.960).
///
/// # Panics
/// On a level outside (0, 1).
pub fn ratio_of_means(reference: &Samples, candidate: &Samples, level: f64) -> MeanRatio {
    check_level(level);
    let df = (reference.len().min(candidate.len()) - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, df)
        .expect("degrees of freedom are at least one")
        .inverse_cdf(0.5 + level / 2.0);
    fieller(
        reference.mean_ms(),
        reference.variance_ms2() / reference.len() as f64,
        candidate.mean_ms(),
        candidate.variance_ms2() / candidate.len() as f64,
        t,
    )
}

fn fieller(a: f64, var_a: f64, b: f64, var_b: f64, t: f64) -> MeanRatio {
    let t2 = t * t;
    let ratio = a / b;
    let denom = b * b - t2 * var_b;
    if denom <= 0.0 {
        return MeanRatio { ratio, ci: None };
    }
    // The discriminant (ab)² - denom (a² - t² var_a) simplifies to this, never negative.
    let root = (t2 * (a * a * var_b + var_a * denom)).sqrt();
    MeanRatio {
        ratio,
        ci: Some(Interval {
            low: (a * b - root) / denom,
            high: (a * b + root) / denom,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Decision label

/// What a speedup interval says against the practical band [1 - δ, 1 + δ] (10.4 step 17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Faster,
    Slower,
    Same,
    Inconclusive,
}

impl Decision {
    /// Stable string for CSV and JSON (the same as serde's).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Faster => "faster",
            Decision::Slower => "slower",
            Decision::Same => "same",
            Decision::Inconclusive => "inconclusive",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// FASTER if ci_low > 1 + δ; SLOWER if ci_high < 1 - δ; SAME if the interval lies inside
/// [1 - δ, 1 + δ]; otherwise INCONCLUSIVE. δ is `DELTA_DEDICATED` or `DELTA_SHARED`.
pub fn decide(ci_low: f64, ci_high: f64, delta: f64) -> Decision {
    let (low_edge, high_edge) = (1.0 - delta, 1.0 + delta);
    if ci_low > high_edge {
        Decision::Faster
    } else if ci_high < low_edge {
        Decision::Slower
    } else if ci_low >= low_edge && ci_high <= high_edge {
        Decision::Same
    } else {
        Decision::Inconclusive
    }
}

/// `decide` for an interval that may be off by a systematic relative `error` either way: the
/// interval is widened by it first, so such a result is SAME only if the error fits in the band,
/// and FASTER or SLOWER only beyond the error.
pub fn decide_within(ci_low: f64, ci_high: f64, delta: f64, error: f64) -> Decision {
    decide(ci_low / (1.0 + error), ci_high * (1.0 + error), delta)
}

// ---------------------------------------------------------------------------------------------
// Outliers and warnings

/// Tukey label of one sample (criterion.rs): mild beyond 1.5 IQR from the quartiles, severe
/// beyond 3 IQR. Labels only: the estimators are robust and no sample is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outlier {
    LowSevere,
    LowMild,
    NotAnOutlier,
    HighMild,
    HighSevere,
}

/// Labels in sample order, fences from type-7 quartiles; the IQR is floored at 1 % of the median
/// (`SPREAD_FLOOR`), the one departure from criterion.rs, so quantized times are not all outliers.
pub fn tukey_labels(samples: &Samples) -> Vec<Outlier> {
    let (q1, q3) = (samples.quantile_ms(0.25), samples.quantile_ms(0.75));
    let iqr = (q3 - q1).max(SPREAD_FLOOR * samples.median_ms());
    let (low_severe, low_mild) = (q1 - 3.0 * iqr, q1 - 1.5 * iqr);
    let (high_mild, high_severe) = (q3 + 1.5 * iqr, q3 + 3.0 * iqr);
    samples
        .values_ms()
        .iter()
        .map(|&v| {
            if v < low_severe {
                Outlier::LowSevere
            } else if v > high_severe {
                Outlier::HighSevere
            } else if v < low_mild {
                Outlier::LowMild
            } else if v > high_mild {
                Outlier::HighMild
            } else {
                Outlier::NotAnOutlier
            }
        })
        .collect()
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutlierCounts {
    pub low_severe: usize,
    pub low_mild: usize,
    pub high_mild: usize,
    pub high_severe: usize,
}

impl OutlierCounts {
    pub fn from_labels(labels: &[Outlier]) -> Self {
        let mut counts = OutlierCounts::default();
        for label in labels {
            match label {
                Outlier::LowSevere => counts.low_severe += 1,
                Outlier::LowMild => counts.low_mild += 1,
                Outlier::NotAnOutlier => {}
                Outlier::HighMild => counts.high_mild += 1,
                Outlier::HighSevere => counts.high_severe += 1,
            }
        }
        counts
    }

    pub fn severe(&self) -> usize {
        self.low_severe + self.high_severe
    }
}

/// A hyperfine-style warning about one arm's samples (10.4 step 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleWarning {
    /// The first sample lies > 10 MAD above the median (MAD floored at 1 % of the median).
    WarmupTooShort,
    /// More than 5 % of the samples are severe outliers.
    NoisyEnvironment,
}

pub fn sample_warnings(samples: &Samples) -> Vec<SampleWarning> {
    let mut warnings = Vec::new();
    let median = samples.median_ms();
    let mad = samples.mad_ms().max(SPREAD_FLOOR * median);
    if samples.values_ms()[0] > median + WARMUP_MADS * mad {
        warnings.push(SampleWarning::WarmupTooShort);
    }
    let severe = OutlierCounts::from_labels(&tukey_labels(samples)).severe();
    if severe as f64 > NOISY_SEVERE_FRACTION * samples.len() as f64 {
        warnings.push(SampleWarning::NoisyEnvironment);
    }
    warnings
}

// ---------------------------------------------------------------------------------------------
// Stopping rule

/// Distribution-free interval of the median from order statistics (normal approximation of the
/// binomial, rounded outwards): [x_(l), x_(u)] with l = ⌊(n - z√n)/2⌋, u = ⌈1 + (n + z√n)/2⌉,
/// clamped to the sample.
fn median_rank_interval(sorted: &[f64], z: f64) -> (f64, f64) {
    let n = sorted.len() as f64;
    let spread = z * n.sqrt();
    let lo = ((n - spread) / 2.0).floor().max(1.0) as usize;
    let hi = ((n + spread) / 2.0 + 1.0).ceil().min(n) as usize;
    (sorted[lo - 1], sorted[hi - 1])
}

/// Half-width of the quick interval of ln(median_ref / median_cand) (10.3 step 13): each median's
/// rank interval gives a half-width in log space, and the two combine as independent errors,
/// sqrt(h_ref² + h_cand²). No resampling, so it is cheap enough to run after every round.
///
/// # Panics
/// On a level outside (0, 1).
pub fn log_ratio_half_width(reference: &Samples, candidate: &Samples, level: f64) -> f64 {
    check_level(level);
    let z = z_two_sided(level);
    let half = |s: &Samples| {
        let (lo, hi) = median_rank_interval(s.sorted_ms(), z);
        (hi.ln() - lo.ln()) / 2.0
    };
    half(reference).hypot(half(candidate))
}

/// Whether sampling may stop: both arms hold at least `MIN_SAMPLES_FOR_STOPPING` samples and the
/// 95 % interval of the ratio of medians reaches within ±`target` (0.01 = the 1 % default):
/// log half-width <= ln(1 + target).
pub fn precision_reached(reference: &Samples, candidate: &Samples, target: f64) -> bool {
    reference.len() >= MIN_SAMPLES_FOR_STOPPING
        && candidate.len() >= MIN_SAMPLES_FOR_STOPPING
        && log_ratio_half_width(reference, candidate, STOPPING_LEVEL) <= target.ln_1p()
}

#[cfg(test)]
mod tests;
