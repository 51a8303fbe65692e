//! Tests of the label rules: clock parity, the host-speed error and the process effect.

use super::*;
use crate::record::Arm;
use crate::timing::offline::PROCESS_ROUNDS;
use crate::timing::summary::summarize;
use crate::timing::summary::tests::arm;

#[test]
fn clock_parity_reports_cycles_only_when_clocks_differ() {
    let arm = |ms: f64| Arm {
        samples_ms: vec![ms; 4],
        rounds: vec![0, 0, 1, 1],
        median_ms: ms,
        ..Arm::default()
    };
    let mut t = summarize("test".into(), arm(2.0), arm(1.0), 1, 0.03);
    clock_parity(&mut t, &[1980.0, 1980.0], &[1975.0]);
    assert_eq!(t.cycle_speedup, None);
    clock_parity(&mut t, &[1980.0], &[1500.0]);
    let cycles = t.cycle_speedup.unwrap();
    assert!((cycles - 2.0 * 1980.0 / 1500.0).abs() < 1e-9);
    assert!(t.warnings.iter().any(|w| w.starts_with("clock-confounded")));
}

fn scaled(reference: &[f64], speedup: f64) -> Timing {
    let candidate = reference.iter().map(|r| r / speedup).collect();
    summarize(
        "test".into(),
        arm(reference.to_vec()),
        arm(candidate),
        1,
        stats::DELTA_SHARED,
    )
}

#[test]
fn host_synchronizing_forwards_are_labeled_allowing_for_the_host_speed_error() {
    // An identity of a host-synchronizing network read 1.24 with a tight interval: FASTER
    // without the allowance, INCONCLUSIVE with it (never SAME: the error exceeds the band);
    // 1.5x and 0.6x still clear it.
    let reference: Vec<f64> = (0..40).map(|i| 17.0 + f64::from(i % 5) * 0.1).collect();
    let label = |speedup: f64, error: Option<f64>| {
        let mut t = scaled(&reference, speedup);
        if let Some(error) = error {
            allow_host_error(&mut t, error);
        }
        t.label
    };
    let whole = Some(stats::HOST_SPEED_ERROR);
    assert_eq!(label(1.24, None), stats::Decision::Faster);
    assert_eq!(label(1.24, whole), stats::Decision::Inconclusive);
    assert_eq!(label(1.0, None), stats::Decision::Same);
    assert_eq!(label(1.0, whole), stats::Decision::Inconclusive);
    assert_eq!(label(1.5, whole), stats::Decision::Faster);
    assert_eq!(label(0.6, whole), stats::Decision::Slower);
    // A convolution that synchronizes early but keeps the GPU busy 99 % of the time: its
    // error is a quarter of a percent, and an identity is SAME again.
    let device_bound = host_error(0.99, 0.99);
    assert!((device_bound - 0.0025).abs() < 1e-12);
    assert_eq!(label(1.0, Some(device_bound)), stats::Decision::Same);
    // Fully host-bound arms keep the whole error; busy shares over 1 (concurrent work
    // measured against a median) count as no idle time.
    assert_eq!(host_error(0.0, 0.0), stats::HOST_SPEED_ERROR);
    assert_eq!(host_error(1.3, 0.0), stats::HOST_SPEED_ERROR / 2.0);
}

#[test]
fn the_process_effect_widens_the_interval_to_the_corrected_speedup() {
    // level1/71's identity read 0.952 [0.949, 0.958] in one process pair: the reference
    // itself ran as much slower in the candidate's process, so the corrected speedup is ~1
    // and the label is INCONCLUSIVE, not SLOWER. A 1.2x candidate in processes that run the
    // reference alike stays FASTER; a 1.3x one whose process runs the reference 5 % faster
    // (only part of its speedup is its own) is still FASTER, with the wider interval.
    let effect = |ratio: f64, half: f64| ProcessEffect {
        ratio,
        ci_low: ratio * (1.0 - half),
        ci_high: ratio * (1.0 + half),
        reference_ms: 1.0,
        control_ms: 1.0 / ratio,
        rounds: PROCESS_ROUNDS,
        measured_ci_low: 0.0,
        measured_ci_high: 0.0,
    };
    let judged = |speedup: f64, process: ProcessEffect| {
        let reference: Vec<f64> = (0..40).map(|i| 3.0 + f64::from(i % 5) * 0.001).collect();
        let mut t = scaled(&reference, speedup);
        let before = (t.label, t.speedup_ci_low, t.speedup_ci_high);
        allow_process_effect(&mut t, process);
        (before, t)
    };
    let ((was, low, high), t) = judged(0.952, effect(0.952, 0.002));
    assert_eq!(was, stats::Decision::Slower);
    assert_eq!(t.label, stats::Decision::Inconclusive);
    assert!(t.speedup_ci_low <= low && t.speedup_ci_high > 0.99 && t.speedup_ci_high > high);
    assert!(t
        .warnings
        .iter()
        .any(|w| w.contains("per process") && w.contains("INCONCLUSIVE rather than SLOWER")));
    let ((was, ..), t) = judged(1.2, effect(1.0, 0.003));
    assert_eq!(
        (was, t.label),
        (stats::Decision::Faster, stats::Decision::Faster)
    );
    assert!(t.warnings.iter().all(|w| !w.contains("per process")));
    let ((_, low, high), t) = judged(1.3, effect(1.05, 0.003));
    assert_eq!(t.label, stats::Decision::Faster);
    assert!(t.speedup_ci_low < 0.97 * low && t.speedup_ci_high == high);
    assert_eq!(t.process.as_ref().map(|p| p.ratio), Some(1.05));
    // The label is decided again with the host-speed allowance: 1.2x is within it.
    let (_, mut t) = judged(1.2, effect(1.0, 0.001));
    t.host_error = Some(stats::HOST_SPEED_ERROR);
    allow_process_effect(&mut t, effect(1.0, 0.001));
    assert_eq!(t.label, stats::Decision::Inconclusive);
}
