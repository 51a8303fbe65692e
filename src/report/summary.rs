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
    // One entry per evaluated kernel: its speedup when correct and timed, else None.
    let speedups: Vec<Option<stats::Speedup>> = evaluated
        .iter()
        .map(|e| {
            e.timing
                .as_ref()
                .filter(|_| e.verdict.is_correct())
                .map(|t| stats::Speedup {
                    ratio: t.speedup,
                    ci_low: t.speedup_ci_low,
                    ci_high: t.speedup_ci_high,
                })
        })
        .collect();
    let fast = |p: f64| {
        stats::fast_p(&speedups, p).unwrap_or(stats::FastP {
            p,
            point: 0.0,
            significant: 0.0,
        })
    };
    let ratios: Vec<f64> = speedups.iter().flatten().map(|s| s.ratio).collect();
    Summary {
        level,
        evaluated: evaluated.len(),
        correct: evaluated.iter().filter(|e| e.verdict.is_correct()).count(),
        fast_0: fast(0.0).point,
        fast_1: fast(1.0).point,
        fast_1_significant: fast(1.0).significant,
        geomean_speedup: stats::geometric_mean(&ratios),
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
