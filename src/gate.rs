//! The CI gate: which evaluations fail a run. Exit code 1 when any does.

use crate::record::{ContractRule, RunRecord};
use crate::verdict::Verdict;

#[derive(Debug, Default)]
pub struct Gate {
    /// One line per failing evaluation.
    pub failures: Vec<String>,
    /// One line per `contract` verdict the run's `--contract kernelbench` let through.
    pub warnings: Vec<String>,
}

/// Fail on every failed verdict (a `contract` one only under the run's `--contract kbench`, the
/// default; a warning under `kernelbench`), on timings the speed of light rules out
/// (`Timing::invalid`, whatever the verdict: a correct result timed impossibly fast is not a
/// result), and on correct kernels below `min_speedup` when given. `no_kernel` and `skipped` do
/// not fail the gate otherwise: they are reported.
pub fn judge(record: &RunRecord, min_speedup: Option<f64>) -> Gate {
    let mut gate = Gate::default();
    let contract_warns = record.config.contract == ContractRule::Kernelbench;
    for e in &record.evaluations {
        if e.verdict == Verdict::Contract && contract_warns {
            gate.warnings.push(format!(
                "{} {}: contract (a warning under --contract kernelbench): {}",
                e.label(),
                e.file,
                e.reason
            ));
        } else if e.verdict.is_failure() {
            gate.failures
                .push(format!("{} {}: {}", e.label(), e.file, e.verdict));
        } else if let Some(t) = e.timing.as_ref().filter(|t| t.invalid) {
            gate.failures.push(format!(
                "{} {}: timing invalid ({} % SOL)",
                e.label(),
                e.file,
                t.percent_sol.map_or("?".into(), |p| format!("{p:.0}"))
            ));
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
    use crate::report::tests::sample_record;

    #[test]
    fn gate_fails_on_failures_and_slow_kernels_only() {
        let record = sample_record();
        // incorrect + timeout fail; no_kernel and skipped do not; passes at 1.25x-2.5x are fine.
        assert_eq!(judge(&record, None).failures.len(), 2);
        // with a 3x floor the four passes fail too; no_kernel is not held to it.
        assert_eq!(judge(&record, Some(3.0)).failures.len(), 6);
    }

    #[test]
    fn a_contract_verdict_fails_unless_the_run_holds_kernelbench_s_contract() {
        let mut record = sample_record();
        record.evaluations[0].verdict = Verdict::Contract;
        record.evaluations[0].reason = "inputs.integrity: forward modified its input(s) [0]".into();
        let gate = judge(&record, None);
        assert_eq!((gate.failures.len(), gate.warnings.len()), (3, 0));
        assert!(
            gate.failures[0].ends_with(": contract"),
            "{:?}",
            gate.failures
        );
        record.config.contract = ContractRule::Kernelbench;
        let gate = judge(&record, None);
        assert_eq!((gate.failures.len(), gate.warnings.len()), (2, 1));
        assert!(gate.warnings[0].contains("forward modified its input(s) [0]"));
        // the other failures stay failures
        record.evaluations[0].verdict = Verdict::Environment;
        assert_eq!(judge(&record, None).failures.len(), 3);
    }

    #[test]
    fn gate_fails_on_timings_faster_than_light() {
        let mut record = sample_record();
        let t = crate::report::tests::honest_timing(&mut record);
        t.invalid = true;
        t.percent_sol = Some(250.0);
        let gate = judge(&record, None);
        assert_eq!(gate.failures.len(), 3);
        assert_eq!(
            gate.failures[0],
            "level1/19_Task level1/19_ReLU/honest.py: timing invalid (250 % SOL)"
        );
        // a no_kernel result timed impossibly fast fails too
        let mut record = sample_record();
        record.evaluations = vec![crate::report::tests::sample_evaluation("76_Gemm.py")];
        record.evaluations[0].timing.as_mut().unwrap().invalid = true;
        assert_eq!(judge(&record, None).failures.len(), 1);
    }
}
