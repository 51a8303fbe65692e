//! Per-level aggregates in KernelBench's terms: correct counts, fast_p (the fraction of
//! evaluated kernels that are correct and faster than p times the reference) and the
//! geometric-mean speedup of the correct kernels. Skipped evaluations are not counted.

use crate::record::{Evaluation, RunRecord};
use crate::stats;

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// None for all levels together.
    pub level: Option<u32>,
    pub evaluated: usize,
    pub correct: usize,
    pub fast_0: f64,
    pub fast_1: f64,
    /// fast_1 counting only kernels whose speedup interval lies above 1.
    pub fast_1_significant: f64,
    pub geomean_speedup: Option<f64>,
}

fn summarize(level: Option<u32>, evals: &[&Evaluation]) -> Summary {
    let evaluated: Vec<_> = evals
        .iter()
        .filter(|e| e.verdict != crate::verdict::Verdict::Skipped)
        .collect();
    let timings: Vec<_> = evaluated
        .iter()
        .filter(|e| e.verdict.is_correct())
        .filter_map(|e| e.timing.as_ref())
        .collect();
    let speedups: Vec<f64> = timings.iter().map(|t| t.speedup).collect();
    let n = evaluated.len().max(1) as f64;
    let fast = |p: f64| speedups.iter().filter(|s| **s > p).count() as f64 / n;
    Summary {
        level,
        evaluated: evaluated.len(),
        correct: evaluated.iter().filter(|e| e.verdict.is_correct()).count(),
        fast_0: fast(0.0),
        fast_1: fast(1.0),
        fast_1_significant: timings.iter().filter(|t| t.speedup_ci_low > 1.0).count() as f64 / n,
        geomean_speedup: stats::geometric_mean(&speedups),
    }
}

/// One summary per level present, then the total.
pub fn by_level(record: &RunRecord) -> Vec<Summary> {
    let mut levels: Vec<u32> = record.evaluations.iter().map(|e| e.task.level).collect();
    levels.sort();
    levels.dedup();
    let mut out: Vec<Summary> = levels
        .iter()
        .map(|l| {
            summarize(
                Some(*l),
                &record
                    .evaluations
                    .iter()
                    .filter(|e| e.task.level == *l)
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    out.push(summarize(
        None,
        &record.evaluations.iter().collect::<Vec<_>>(),
    ));
    out
}
