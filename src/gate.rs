//! The CI gate: which evaluations fail a run. Exit code 1 when any does.

use crate::record::RunRecord;
use crate::verdict::Verdict;

#[derive(Debug, Default)]
pub struct Gate {
    /// One line per failing evaluation.
    pub failures: Vec<String>,
}

/// Fail on every failed verdict, and on correct kernels below `min_speedup` when given.
/// `no_kernel` and `skipped` do not fail the gate: they are reported.
pub fn judge(record: &RunRecord, min_speedup: Option<f64>) -> Gate {
    let mut gate = Gate::default();
    for e in &record.evaluations {
        if e.verdict.is_failure() {
            gate.failures
                .push(format!("{} {}: {}", e.label(), e.file, e.verdict));
        } else if let (Some(min), Some(t), true) =
            (min_speedup, &e.timing, e.verdict == Verdict::Pass)
        {
            if t.speedup < min {
                gate.failures.push(format!(
                    "{} {}: speedup {:.3} below {min}",
                    e.label(),
                    e.file,
                    t.speedup
                ));
            }
        }
    }
    gate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_fails_on_failures_and_slow_kernels_only() {
        let record = crate::report::tests::sample_record();
        // incorrect + timeout fail; no_kernel and skipped do not; pass at 2.0x is fine.
        assert_eq!(judge(&record, None).failures.len(), 2);
        // with a 3x floor the 2.0x pass fails too; no_kernel is not held to it.
        assert_eq!(judge(&record, Some(3.0)).failures.len(), 3);
    }
}
