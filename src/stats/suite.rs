//! Suite-level and run-to-run statistics: Benjamini-Hochberg over a suite's p-values, the
//! geometric mean of speedups with its two-level bootstrap, fast_p, and the ratio of one task's
//! speedups in two runs. Pure, as the rest of `stats`: it computes on the speedups it is given.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::pairwise::{
    check_level, check_resamples, is_time, percentile_interval, PairedBootstrap, Speedup,
    StatsError,
};

/// Benjamini-Hochberg step-up at false discovery rate `q`: which p-values are rejected, in input
/// order. A NaN p-value counts towards m but is never rejected.
///
/// # Panics
/// On q outside (0, 1].
pub fn benjamini_hochberg(p_values: &[f64], q: f64) -> Vec<bool> {
    assert!(
        q > 0.0 && q <= 1.0,
        "false discovery rate {q} is outside (0, 1]"
    );
    let m = p_values.len();
    let key = |i: usize| {
        if p_values[i].is_nan() {
            f64::INFINITY
        } else {
            p_values[i]
        }
    };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| key(a).total_cmp(&key(b)));
    // Step-up: the largest rank k with p_(k) <= k q / m; every smaller p is rejected with it.
    let cut = (1..=m)
        .rev()
        .find(|&k| key(order[k - 1]) <= k as f64 * q / m as f64)
        .unwrap_or(0);
    let mut rejected = vec![false; m];
    for &i in &order[..cut] {
        rejected[i] = true;
    }
    rejected
}

/// Geometric mean of positive values; None when empty.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// One correct task's speedup and its bootstrap replicates (e.g. `PairedBootstrap::replicates`).
#[derive(Clone, Copy, Debug)]
pub struct TaskDraws<'a> {
    pub ratio: f64,
    /// Empty: the task contributes its point estimate only (no within-task uncertainty).
    pub replicates: &'a [f64],
}

/// Geometric mean of the tasks' speedups with a two-level percentile bootstrap (10.4 step 19):
/// each replicate draws tasks with replacement and, for every drawn task, one of its own
/// bootstrap replicates at random. The inner level reuses each task's bootstrap instead of
/// resampling its samples again: the same within-task variability, already paired by rounds,
/// at the cost of one draw.
///
/// # Panics
/// On `resamples == 0` or a level outside (0, 1).
pub fn geometric_mean_ci(
    tasks: &[TaskDraws<'_>],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Result<Speedup, StatsError> {
    check_resamples(resamples);
    check_level(level);
    if tasks.is_empty() {
        return Err(StatsError::EmptySuite);
    }
    let mut logs = Vec::with_capacity(tasks.len());
    for (index, task) in tasks.iter().enumerate() {
        if let Some(&value) = std::iter::once(&task.ratio)
            .chain(task.replicates)
            .find(|v| !is_time(**v))
        {
            return Err(StatsError::BadSpeedup { index, value });
        }
        let draws = if task.replicates.is_empty() {
            std::slice::from_ref(&task.ratio)
        } else {
            task.replicates
        };
        logs.push(draws.iter().map(|v| v.ln()).collect::<Vec<f64>>());
    }
    let ratios: Vec<f64> = tasks.iter().map(|t| t.ratio).collect();
    let ratio = geometric_mean(&ratios).expect("tasks are not empty");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = logs.len();
    let mut replicates: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: f64 = (0..n)
                .map(|_| {
                    let task = &logs[rng.gen_range(0..n)];
                    task[rng.gen_range(0..task.len())]
                })
                .sum();
            (sum / n as f64).exp()
        })
        .collect();
    replicates.sort_by(f64::total_cmp);
    let (ci_low, ci_high) = percentile_interval(&replicates, level);
    Ok(Speedup {
        ratio,
        ci_low,
        ci_high,
    })
}

/// fast_p over a suite (KernelBench): the fraction of all tasks that are correct and faster than
/// `p`, as a point estimate and counting only tasks whose interval clears `p`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FastP {
    pub p: f64,
    /// Tasks correct with speedup > p, over all tasks.
    pub point: f64,
    /// Tasks correct with ci_low > p, over all tasks.
    pub significant: f64,
}

/// `tasks` holds one entry per task of the suite: None for an incorrect or failed task (it
/// counts in the denominator, never in the numerator). None when the suite is empty.
pub fn fast_p(tasks: &[Option<Speedup>], p: f64) -> Option<FastP> {
    if tasks.is_empty() {
        return None;
    }
    let share = |keep: fn(&Speedup, f64) -> bool| {
        tasks.iter().flatten().filter(|s| keep(s, p)).count() as f64 / tasks.len() as f64
    };
    Some(FastP {
        p,
        point: share(|s, p| s.ratio > p),
        significant: share(|s, p| s.ci_low > p),
    })
}

/// fast_p's band at `p`: the share of tasks whose interval lies above p (the lower edge, as
/// `FastP::significant`) and whose interval reaches above p (the upper edge). None when empty.
pub fn fast_p_band(tasks: &[Option<Speedup>], p: f64) -> Option<(f64, f64)> {
    let low = fast_p(tasks, p)?.significant;
    let high = tasks.iter().flatten().filter(|s| s.ci_high > p).count() as f64 / tasks.len() as f64;
    Some((low, high))
}

// Two runs

/// The ratio of two independent speedups, `after / before` (e.g. the same task in two runs),
/// with a percentile interval. With both runs' bootstrap replicates (`PairedBootstrap`), each
/// replicate of the ratio divides one replicate of each drawn at random (the runs are
/// independent), and the replicates are returned sorted for a suite-level bootstrap
/// (`geometric_mean_ci`). Without replicates on either side, the two intervals combine on the
/// log scale as independent normal errors (half-widths in quadrature), and no replicates.
///
/// # Panics
/// On `resamples == 0` or a level outside (0, 1).
pub fn ratio_of_speedups(
    before: (&Speedup, &[f64]),
    after: (&Speedup, &[f64]),
    resamples: usize,
    level: f64,
    seed: u64,
) -> PairedBootstrap {
    check_resamples(resamples);
    check_level(level);
    let ratio = after.0.ratio / before.0.ratio;
    let (b, a) = (before.1, after.1);
    if b.is_empty() || a.is_empty() {
        let half = |s: &Speedup| (s.ci_high.ln() - s.ci_low.ln()) / 2.0;
        let spread = half(before.0).hypot(half(after.0));
        return PairedBootstrap {
            speedup: Speedup {
                ratio,
                ci_low: ratio * (-spread).exp(),
                ci_high: ratio * spread.exp(),
            },
            replicates: Vec::new(),
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut replicates: Vec<f64> = (0..resamples)
        .map(|_| a[rng.gen_range(0..a.len())] / b[rng.gen_range(0..b.len())])
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
