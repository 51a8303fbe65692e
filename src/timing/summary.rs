//! The statistics of one comparison, as a `Timing`: the paired bootstrap's speedup and
//! interval, the rank cross-checks, outlier counts and sample warnings, the torch.compile
//! baseline's comparison, and the method's name. Pure: it takes no sample and asks no worker;
//! the label it starts from is `label::summary_label`, and later changes to it are `label`'s.

use super::label::{half_width, summary_label};
use crate::config::{Config, Device, Mode};
use crate::record::{Arm, CompileBaseline, Timing};
use crate::stats;

/// Resamples of the reported bootstrap, and the level of every interval reported.
pub(super) const BOOTSTRAP_RESAMPLES: usize = stats::DEFAULT_RESAMPLES;
pub(super) const CI_LEVEL: f64 = 0.95;

/// The candidate against arm B: the same statistics as against the eager reference, over the
/// rounds all three arms shared.
pub(super) fn compile_baseline(
    compiled: Arm,
    eager: &Arm,
    candidate: &Arm,
    compile_s: f64,
    seed: u64,
    delta: f64,
) -> CompileBaseline {
    let compile_gain = eager.median_ms / compiled.median_ms;
    let vs = summarize(String::new(), compiled, candidate.clone(), seed, delta);
    CompileBaseline {
        reference: vs.reference,
        compile_s,
        speedup: vs.speedup,
        speedup_ci_low: vs.speedup_ci_low,
        speedup_ci_high: vs.speedup_ci_high,
        label: vs.label,
        compile_gain,
    }
}

/// The median, or 0 for no values (an arm that has none of a kind of reading).
pub(super) fn median_or_zero(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        stats::median(values)
    }
}

/// How the times were taken, by mode and device (`Timing::method`).
pub(super) fn method(cfg: &Config) -> String {
    match (cfg.mode, cfg.device) {
        (Mode::Offline, Device::Cuda) => "cuda_events_flush_blocker".into(),
        (Mode::KernelBench, Device::Cuda) => "kernelbench_events_write_flush".into(),
        (Mode::Offline, Device::Cpu) => "cpu_perf_counter".into(),
        (Mode::KernelBench, Device::Cpu) => "kernelbench_cpu_perf_counter".into(),
        (Mode::Server, _) => "server_request_latency".into(),
    }
}

/// The rank statistics of two arms (Hodges-Lehmann speedup, the one-sided Mann-Whitney p of
/// "faster"), each arm's outlier counts, and the samples' warnings.
fn rank_statistics(
    reference: &mut Arm,
    candidate: &mut Arm,
    warnings: &mut Vec<String>,
) -> (Option<stats::Speedup>, Option<f64>) {
    let arms = stats::Samples::new(reference.samples_ms.clone())
        .and_then(|r| Ok((r, stats::Samples::new(candidate.samples_ms.clone())?)));
    match &arms {
        Ok((r, c)) => {
            reference.outliers = stats::OutlierCounts::from_labels(&stats::tukey_labels(r));
            candidate.outliers = stats::OutlierCounts::from_labels(&stats::tukey_labels(c));
            for (name, arm) in [("reference", r), ("candidate", c)] {
                let text = |w| {
                    serde_json::to_value(w)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                };
                warnings.extend(
                    stats::sample_warnings(arm)
                        .into_iter()
                        .filter_map(text)
                        .map(|w| format!("{name}: {w}")),
                );
            }
            (
                Some(stats::hodges_lehmann(r, c, CI_LEVEL)),
                Some(stats::mann_whitney(r, c).p_faster),
            )
        }
        Err(e) => {
            warnings.push(format!("samples not usable for rank statistics: {e}"));
            (None, None)
        }
    }
}

/// The statistics of one comparison: paired bootstrap over rounds for the speedup and its
/// interval, Hodges-Lehmann and Mann-Whitney as cross-checks, the decision label. Samples the
/// checked types reject (e.g. a 0 ms event time) fall back to an unpaired bootstrap with no
/// cross-checks and an INCONCLUSIVE label.
pub fn summarize(
    method: String,
    mut reference: Arm,
    mut candidate: Arm,
    seed: u64,
    delta: f64,
) -> Timing {
    let paired = stats::Rounds::from_tagged(
        &reference.samples_ms,
        &reference.rounds,
        &candidate.samples_ms,
        &candidate.rounds,
    )
    .map(|rounds| stats::paired_speedup(&rounds, BOOTSTRAP_RESAMPLES, CI_LEVEL, seed).speedup);
    let s = match &paired {
        Ok(s) => *s,
        Err(_) => stats::speedup(
            &reference.samples_ms,
            &candidate.samples_ms,
            BOOTSTRAP_RESAMPLES,
            CI_LEVEL,
            seed,
        ),
    };
    let label = summary_label(paired.as_ref().ok(), delta);
    let mut warnings = Vec::new();
    let (hodges_lehmann, p_faster) = rank_statistics(&mut reference, &mut candidate, &mut warnings);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut timing = Timing {
        method,
        mean_ratio: mean(&reference.samples_ms) / mean(&candidate.samples_ms),
        reference,
        candidate,
        speedup: s.ratio,
        speedup_ci_low: s.ci_low,
        speedup_ci_high: s.ci_high,
        ci_level: CI_LEVEL,
        label,
        delta,
        hodges_lehmann,
        p_faster,
        warnings,
        rounds_discarded: 0,
        telemetry: Vec::new(),
        stopped: String::new(),
        ci_half_width: 0.0,
        blocker_us: 0.0,
        blocker_overflows: 0,
        reference_sm_mhz: None,
        candidate_sm_mhz: None,
        cycle_speedup: None,
        audit: None,
        server: None,
        burst: None,
        host_error: None,
        cpu: None,
        compile: None,
        process: None,
        sol_ms: None,
        percent_sol: None,
        reference_percent_sol: None,
        invalid: false,
    };
    timing.ci_half_width = half_width(&timing);
    timing
}

#[cfg(test)]
pub(super) mod tests;
