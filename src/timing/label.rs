//! Every rule that decides or changes a timing's label once the statistics have given one:
//! charged times, a host-synchronizing forward's host error, the process effect (and when it is
//! checked), a process check that could not run, and clock parity's warning; with them the
//! interval's relative half-width, which a rule that widens the interval keeps up to date. It
//! computes on a `Timing`; it asks no worker and takes no sample, and uses no other part of
//! timing (the summary starts from `summary_label`).

use crate::record::{ProcessEffect, Timing, CHARGED};
use crate::stats;

/// The interval's half-width relative to the speedup; infinite for an unbounded interval.
pub(super) fn half_width(timing: &Timing) -> f64 {
    if timing.speedup > 0.0 && timing.speedup_ci_high.is_finite() {
        (timing.speedup_ci_high - timing.speedup_ci_low) / (2.0 * timing.speedup)
    } else {
        f64::INFINITY
    }
}

/// The label of a summary: its paired interval's decision, or INCONCLUSIVE when the samples
/// could not be paired by round (`paired` is `None`).
pub(super) fn summary_label(paired: Option<&stats::Speedup>, delta: f64) -> stats::Decision {
    match paired {
        Some(s) => s.decision(delta),
        None => stats::Decision::Inconclusive,
    }
}

/// `--mode kernelbench`'s speedup and label: the ratio of means with its Fieller interval `ci`
/// (none when it is unbounded: INCONCLUSIVE over [0, MAX]).
pub(super) fn by_ratio_of_means(timing: &mut Timing, ci: Option<stats::Interval>, delta: f64) {
    timing.speedup = timing.mean_ratio;
    match ci {
        Some(ci) => {
            (timing.speedup_ci_low, timing.speedup_ci_high) = (ci.low, ci.high);
            timing.label = stats::decide(ci.low, ci.high, delta);
        }
        None => {
            (timing.speedup_ci_low, timing.speedup_ci_high) = (0.0, f64::MAX);
            timing.label = stats::Decision::Inconclusive;
        }
    }
    timing.ci_half_width = half_width(timing);
}

/// Arms whose median SM clocks differ by more than this are "clock-confounded".
const CLOCK_PARITY: f64 = 0.02;

/// Charged times (`timing.wall_envelope`) label nothing FASTER: a forger keeps the allowance (a
/// quarter of the reference's call, or a fifth of its input refresh), and the wall time of
/// blocks that refresh gigabytes varies between processes by as much again (on an H100 a forger
/// of level1/19 hid 2.7 of its 4.27 ms). The speedup stays as charged; the label is INCONCLUSIVE.
pub(super) fn distrust_charged(timing: &mut Timing) {
    if timing.method == CHARGED && timing.label == stats::Decision::Faster {
        timing.label = stats::Decision::Inconclusive;
    }
}

/// Labels of a forward that synchronizes with the host inside: its times hold host submission,
/// whose speed drifts in ways the rounds do not average out, so the speedup's interval is judged
/// allowing for a systematic relative `error` (the intervals themselves are left as measured).
/// Timing sets the whole `HOST_SPEED_ERROR`; once both arms' busy shares are measured,
/// `host_error` narrows it. The torch.compile arm keeps the whole error (its busy share is not
/// measured).
pub fn allow_host_error(timing: &mut Timing, error: f64) {
    timing.host_error = Some(error);
    timing.label = stats::decide_within(
        timing.speedup_ci_low,
        timing.speedup_ci_high,
        timing.delta,
        error,
    );
    if let Some(c) = timing.compile.as_mut() {
        c.label = stats::decide_within(
            c.speedup_ci_low,
            c.speedup_ci_high,
            timing.delta,
            stats::HOST_SPEED_ERROR,
        );
    }
}

/// Widens the speedup's interval for the process effect: the same reference ran `effect.ratio`
/// times as fast in its own worker as in the candidate's, so the speedup owed to the submission
/// lies anywhere from the one measured to the one measured over that ratio. The interval covers
/// both (each end at its bootstrap bound), and the label is decided again, with any host-speed
/// allowance; a label the effect changes says why.
pub fn allow_process_effect(timing: &mut Timing, effect: ProcessEffect) {
    let was = timing.label;
    timing.speedup_ci_low = timing
        .speedup_ci_low
        .min(timing.speedup_ci_low / effect.ci_high);
    timing.speedup_ci_high = timing
        .speedup_ci_high
        .max(timing.speedup_ci_high / effect.ci_low);
    timing.ci_half_width = half_width(timing);
    timing.label = stats::decide_within(
        timing.speedup_ci_low,
        timing.speedup_ci_high,
        timing.delta,
        timing.host_error.unwrap_or(0.0),
    );
    if timing.label != was {
        timing.warnings.push(format!(
            "the reference itself ran {:.3}x as fast in its own worker ({:.4} ms) as in the candidate's ({:.4} ms), beside the candidate's arm: cuDNN and cuBLAS choose algorithms per process, and where inputs and outputs lie can move a kernel's time, so the interval includes that effect, [{:.3}, {:.3}], and the label is {} rather than {}",
            effect.ratio,
            effect.reference_ms,
            effect.control_ms,
            timing.speedup_ci_low,
            timing.speedup_ci_high,
            timing.label.as_str().to_uppercase(),
            was.as_str().to_uppercase(),
        ));
    }
    timing.process = Some(effect);
}

/// The host-speed error of a forward that synchronizes with the host inside, from each arm's
/// busy share (GPU busy time of one profiled call over the arm's median time): only the time the
/// GPU waits for the host depends on the host's speed, so `HOST_SPEED_ERROR` is scaled by the
/// arms' mean idle share (a forward the GPU is busy for 99 % of gets a 0.25 % error).
pub fn host_error(reference_busy: f64, candidate_busy: f64) -> f64 {
    let idle = |busy: f64| (1.0 - busy).clamp(0.0, 1.0);
    stats::HOST_SPEED_ERROR * (idle(reference_busy) + idle(candidate_busy)) / 2.0
}

/// Clock parity: the median NVML SM clock of each arm; when they differ by more than 2 %, the
/// speedup in cycles (time x clock) too, and a warning.
pub(super) fn clock_parity(timing: &mut Timing, reference: &[f64], candidate: &[f64]) {
    if reference.is_empty() || candidate.is_empty() {
        return;
    }
    let (r, c) = (stats::median(reference), stats::median(candidate));
    timing.reference_sm_mhz = Some(r);
    timing.candidate_sm_mhz = Some(c);
    if r > 0.0 && c > 0.0 && (r / c - 1.0).abs() > CLOCK_PARITY {
        let cycles = timing.speedup * r / c;
        timing.cycle_speedup = Some(cycles);
        timing.warnings.push(format!(
            "clock-confounded: SM clock {r:.0} MHz (reference) vs {c:.0} MHz (candidate); speedup in cycles {cycles:.3}"
        ));
    }
}

/// The process check (`allow_process_effect`) runs for FASTER and SLOWER labels whose interval
/// lies within this factor of 1: a difference between processes explains no more (identities on
/// an H100 read 0.95-1.04 from it; a cuDNN workspace that did not fit, 0.76), and checking
/// larger speedups would only cost time.
const PROCESS_RANGE: f64 = 1.5;

/// Whether a label gets the process check: every one with `--process-check always`, else FASTER
/// and SLOWER labels whose interval lies within `PROCESS_RANGE` of 1.
pub(super) fn process_check_due(timing: &Timing, always: bool) -> bool {
    always
        || matches!(
            timing.label,
            stats::Decision::Faster | stats::Decision::Slower
        ) && timing.speedup_ci_low >= 1.0 / PROCESS_RANGE
            && timing.speedup_ci_high <= PROCESS_RANGE
}

/// The label when the process check could not time the reference in the candidate's worker
/// (`why`): a difference between the two processes is not ruled out, so it is INCONCLUSIVE.
pub(super) fn process_unchecked(timing: &mut Timing, why: &str) {
    timing.label = stats::Decision::Inconclusive;
    timing.warnings.push(format!(
        "the process check could not time the reference in the candidate's worker ({why}): a difference between the two processes is not ruled out, so the label is INCONCLUSIVE"
    ));
}

#[cfg(test)]
mod tests;
