//! Tests of the summary: outlier counts, a clear speedup, the same samples, unusable samples.

use super::*;

/// An arm of these samples, four to a round (the label's tests use it too).
pub(in crate::timing) fn arm(samples_ms: Vec<f64>) -> Arm {
    let rounds = (0..samples_ms.len() as u32).map(|i| i / 4).collect();
    Arm {
        median_ms: stats::median(&samples_ms),
        samples_ms,
        rounds,
        ..Arm::default()
    }
}

#[test]
fn each_arm_carries_its_tukey_outlier_counts() {
    let reference: Vec<f64> = (0..40).map(|i| 2.0 + f64::from(i % 5) * 0.002).collect();
    let mut candidate: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 3) * 0.001).collect();
    candidate[7] = 3.0; // a stall: labelled, never dropped
    let t = summarize("test".into(), arm(reference), arm(candidate), 1, 0.03);
    assert_eq!(t.reference.outliers.severe(), 0);
    assert_eq!(t.candidate.outliers.high_severe, 1);
    assert_eq!(t.candidate.samples_ms.len(), 40);
}

#[test]
fn a_twice_as_fast_candidate_is_labeled_faster() {
    let reference: Vec<f64> = (0..40).map(|i| 2.0 + f64::from(i % 5) * 0.002).collect();
    let candidate: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 3) * 0.001).collect();
    let t = summarize(
        "test".into(),
        arm(reference),
        arm(candidate),
        1,
        stats::DELTA_DEDICATED,
    );
    assert!((t.speedup - 2.004 / 1.001).abs() < 1e-9, "{t:?}");
    assert_eq!(t.label, stats::Decision::Faster);
    let hl = t.hodges_lehmann.unwrap();
    assert!((hl.ratio - 2.0).abs() < 0.02, "{hl:?}");
    assert!(t.p_faster.unwrap() < 1e-6);
    // The same samples on both arms are SAME, never FASTER or SLOWER.
    let same: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 7) * 0.0005).collect();
    let t = summarize(
        "test".into(),
        arm(same.clone()),
        arm(same),
        1,
        stats::DELTA_DEDICATED,
    );
    assert_eq!(t.label, stats::Decision::Same, "{t:?}");
}

/// The timing of a candidate `speedup` times as fast as `reference`, sample for sample.
#[test]
fn unusable_samples_give_an_inconclusive_label() {
    let t = summarize(
        "test".into(),
        arm(vec![1.0; 8]),
        arm(vec![0.0; 8]),
        1,
        stats::DELTA_DEDICATED,
    );
    assert_eq!(t.label, stats::Decision::Inconclusive);
    assert!(t.hodges_lehmann.is_none() && t.p_faster.is_none());
    assert_eq!(t.warnings.len(), 1);
}
