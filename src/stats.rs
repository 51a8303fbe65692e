//! Statistics on timing samples. Pure: no I/O, no clocks; the bootstrap is seeded so the same
//! samples always give the same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Median of a non-empty slice (NaN-free).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Speedup of `candidate` over `reference` as a ratio of medians, with a percentile bootstrap
/// confidence interval (each arm resampled independently).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speedup {
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

pub fn speedup(
    reference: &[f64],
    candidate: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Speedup {
    let ratio = median(reference) / median(candidate);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draw = |arm: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..arm.len()).map(|_| arm[rng.gen_range(0..arm.len())]));
        median(buf)
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..resamples)
        .map(|_| draw(reference, &mut a) / draw(candidate, &mut b))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let at = |q: f64| ratios[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Speedup {
        ratio,
        ci_low: at(tail),
        ci_high: at(1.0 - tail),
    }
}

/// Geometric mean of positive values; None when empty.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn speedup_is_seeded_and_brackets_the_ratio() {
        let reference: Vec<f64> = (0..50).map(|i| 2.0 + (i % 7) as f64 * 0.01).collect();
        let candidate: Vec<f64> = (0..50).map(|i| 1.0 + (i % 5) as f64 * 0.01).collect();
        let s = speedup(&reference, &candidate, 2000, 0.95, 7);
        assert_eq!(s, speedup(&reference, &candidate, 2000, 0.95, 7));
        assert!(s.ci_low <= s.ratio && s.ratio <= s.ci_high, "{s:?}");
        assert!((s.ratio - 2.03 / 1.02).abs() < 1e-9);
        assert!(s.ci_high - s.ci_low < 0.1);
    }

    #[test]
    fn geometric_mean_of_reciprocals_is_one() {
        assert!((geometric_mean(&[2.0, 0.5]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[]), None);
    }
}
