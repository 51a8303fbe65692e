//! The CI gate: which evaluations fail a run, and whether the run evaluated anything. Exit code
//! 1 when it fails.

use crate::cli::GateArgs;
use crate::record::{ContractRule, Evaluation, RunRecord};
use crate::verdict::Verdict;

#[derive(Debug, Default)]
pub struct Gate {
    /// One line per way the run as a whole fails: nothing evaluated, files that matched no task.
    pub run: Vec<String>,
    /// One line per failing evaluation.
    pub failures: Vec<String>,
    /// One line per `contract` verdict the run's `--contract kernelbench` let through.
    pub warnings: Vec<String>,
}

impl Gate {
    pub fn passed(&self) -> bool {
        self.run.is_empty() && self.failures.is_empty()
    }
}

/// The gate on `record` under `rules`. A run fails when nothing was evaluated (every evaluation
/// `skipped`, or none; not a shard whose share of the run is empty) unless `--allow-empty`, and
/// when a file matched no task unless `--allow-unmatched`. An evaluation fails on its verdict
/// (`failure`).
pub fn judge(record: &RunRecord, rules: &GateArgs) -> Gate {
    let mut gate = Gate::default();
    let evaluated = record
        .evaluations
        .iter()
        .filter(|e| e.verdict != Verdict::Skipped)
        .count();
    let empty_share = record.shard.is_some_and(|s| s.selected == 0 && s.total > 0);
    if evaluated == 0 && !rules.allow_empty && !empty_share {
        gate.run.push(format!(
            "nothing was evaluated: {}; pass --allow-empty if that is expected",
            match record.evaluations.len() {
                0 => "no submission of a selected task (an empty folder, files that match no \
                      task, or --level/--only leaving none)"
                    .to_string(),
                n => format!("all {n} evaluation(s) skipped (results.csv says why)"),
            }
        ));
    }
    if !record.unmatched.is_empty() && !rules.allow_unmatched {
        gate.run.push(format!(
            "{} file(s) matched no task (listed above); pass --allow-unmatched if they are not \
             submissions",
            record.unmatched.len()
        ));
    }
    let contract_warns = record.config.contract == ContractRule::Kernelbench;
    for e in &record.evaluations {
        let warned = e.verdict == Verdict::Contract && contract_warns;
        if warned {
            gate.warnings.push(format!(
                "{} {}: contract (a warning under --contract kernelbench): {}",
                e.label(),
                e.file,
                e.reason
            ));
        }
        if let Some(why) = failure(e, warned, rules) {
            gate.failures
                .push(format!("{} {}: {why}", e.label(), e.file));
        }
    }
    gate
}

/// Why one evaluation fails the gate, if it does: a failed verdict (a `contract` one only when
/// not `warned`, under the run's `--contract kbench`, the default), `no_kernel` under
/// `--require-kernel`, a timing the speed of light rules out (`Timing::invalid`, whatever the
/// verdict: a correct result timed impossibly fast is not a result), and a timed speedup below
/// `--min-speedup` (every timed evaluation the gate lets through is held to it: `no_kernel`
/// too, since a floor asked for is a floor). `no_kernel` is otherwise not a failure (a
/// pure-PyTorch file is reported as such), and `skipped` never is.
fn failure(e: &Evaluation, warned: bool, rules: &GateArgs) -> Option<String> {
    if e.verdict.is_failure() && !warned {
        return Some(e.verdict.to_string());
    }
    if e.verdict == Verdict::NoKernel && rules.require_kernel {
        return Some(format!("no_kernel under --require-kernel: {}", e.reason));
    }
    let t = e.timing.as_ref()?;
    if t.invalid {
        return Some(format!(
            "timing invalid ({} % SOL)",
            t.percent_sol.map_or("?".into(), |p| format!("{p:.0}"))
        ));
    }
    match rules.min_speedup {
        Some(min) if t.speedup < min => Some(format!(
            "speedup {:.3} below --min-speedup {min}",
            t.speedup
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::{sample_evaluation, sample_record};
    use crate::shard::Shard;

    fn rules(min_speedup: Option<f64>, require_kernel: bool) -> GateArgs {
        GateArgs {
            min_speedup,
            require_kernel,
            // The sample record lists a file that matched no task.
            allow_unmatched: true,
            ..GateArgs::default()
        }
    }

    /// Each evaluation of the sample record (by the end of its file name) under each rule, and
    /// the start of its failure (None: it passes).
    #[test]
    fn each_evaluation_against_each_rule() {
        for (end, min_speedup, require_kernel, expected) in [
            // failed verdicts fail whatever the rules
            ("wrong, \"quoted\".py", None, false, Some("incorrect")),
            ("23_Softmax.py", None, false, Some("timeout")),
            // skipped never fails; untimed, no floor applies
            ("77_X.py", Some(3.0), true, None),
            // a pass: only a floor above its speedup (2.0) fails it
            ("honest.py", None, false, None),
            ("honest.py", Some(1.5), false, None),
            (
                "honest.py",
                Some(3.0),
                false,
                Some("speedup 2.000 below --min-speedup 3"),
            ),
            ("honest.py", None, true, None),
            // no_kernel (timed at 1.0): reported, unless a kernel is required or a floor asked for
            ("76_Gemm.py", None, false, None),
            ("76_Gemm.py", Some(0.5), false, None),
            (
                "76_Gemm.py",
                Some(1.5),
                false,
                Some("speedup 1.000 below --min-speedup 1.5"),
            ),
            (
                "76_Gemm.py",
                None,
                true,
                Some("no_kernel under --require-kernel: pure PyTorch"),
            ),
        ] {
            let e = sample_evaluation(end);
            let got = failure(&e, false, &rules(min_speedup, require_kernel));
            match expected {
                None => assert_eq!(got, None, "{end} {min_speedup:?} {require_kernel}"),
                Some(start) => assert!(
                    got.as_deref().is_some_and(|g| g.starts_with(start)),
                    "{end} {min_speedup:?} {require_kernel}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn gate_fails_on_failures_and_slow_kernels_only() {
        let record = sample_record();
        // incorrect + timeout fail; no_kernel and skipped do not; passes at 1.25x-2.5x are fine.
        assert_eq!(judge(&record, &rules(None, false)).failures.len(), 2);
        // with a 3x floor the four passes fail too, and the no_kernel row timed at 1.0x.
        assert_eq!(judge(&record, &rules(Some(3.0), false)).failures.len(), 7);
        assert_eq!(judge(&record, &rules(None, true)).failures.len(), 3);
    }

    #[test]
    fn a_contract_verdict_fails_unless_the_run_holds_kernelbench_s_contract() {
        let mut record = sample_record();
        record.evaluations[0].verdict = Verdict::Contract;
        record.evaluations[0].reason = "inputs.integrity: forward modified its input(s) [0]".into();
        let gate = judge(&record, &rules(None, false));
        assert_eq!((gate.failures.len(), gate.warnings.len()), (3, 0));
        assert!(
            gate.failures[0].ends_with(": contract"),
            "{:?}",
            gate.failures
        );
        record.config.contract = ContractRule::Kernelbench;
        let gate = judge(&record, &rules(None, false));
        assert_eq!((gate.failures.len(), gate.warnings.len()), (2, 1));
        assert!(gate.warnings[0].contains("forward modified its input(s) [0]"));
        // a warned contract row (timed at 2.5x) is held to a floor as any row let through
        assert_eq!(judge(&record, &rules(Some(3.0), false)).failures.len(), 7);
        // the other failures stay failures
        record.evaluations[0].verdict = Verdict::Environment;
        assert_eq!(judge(&record, &rules(None, false)).failures.len(), 3);
    }

    #[test]
    fn gate_fails_on_timings_faster_than_light() {
        let mut record = sample_record();
        let t = crate::record::fixtures::honest_timing(&mut record);
        t.invalid = true;
        t.percent_sol = Some(250.0);
        let gate = judge(&record, &rules(None, false));
        assert_eq!(gate.failures.len(), 3);
        assert_eq!(
            gate.failures[0],
            "level1/19_Task level1/19_ReLU/honest.py: timing invalid (250 % SOL)"
        );
        // a no_kernel result timed impossibly fast fails too
        let mut record = sample_record();
        record.evaluations = vec![sample_evaluation("76_Gemm.py")];
        record.evaluations[0].timing.as_mut().unwrap().invalid = true;
        assert_eq!(judge(&record, &rules(None, false)).failures.len(), 1);
    }

    /// The run as a whole: (evaluations kept, by the end of their file names; unmatched files
    /// kept; shard; --allow-empty; --allow-unmatched) and the starts of its run failures.
    #[test]
    fn a_run_that_evaluated_nothing_or_left_files_unmatched_fails_unless_allowed() {
        let shard = |selected| Shard {
            index: 1,
            count: 2,
            total: 1,
            selected,
        };
        for (kept, unmatched, shard, allow_empty, allow_unmatched, expected) in [
            (vec!["honest.py"], false, None, false, false, vec![]),
            (
                vec![],
                false,
                None,
                false,
                false,
                vec!["nothing was evaluated: no submission"],
            ),
            (vec![], false, None, true, false, vec![]),
            (
                vec!["77_X.py"],
                false,
                None,
                false,
                false,
                vec!["nothing was evaluated: all 1"],
            ),
            (vec!["77_X.py"], false, None, true, false, vec![]),
            // a shard the split left empty: the merge judges the run
            (vec![], false, Some(shard(0)), false, false, vec![]),
            (
                vec!["77_X.py"],
                false,
                Some(shard(1)),
                false,
                false,
                vec!["nothing"],
            ),
            (
                vec!["honest.py"],
                true,
                None,
                false,
                false,
                vec!["1 file(s) matched no task"],
            ),
            (vec!["honest.py"], true, None, false, true, vec![]),
            (
                vec![],
                true,
                None,
                false,
                false,
                vec!["nothing", "1 file(s)"],
            ),
            (vec![], true, None, true, true, vec![]),
        ] {
            let mut record = sample_record();
            record
                .evaluations
                .retain(|e| kept.iter().any(|end| e.file.ends_with(end)));
            if !unmatched {
                record.unmatched.clear();
            }
            record.shard = shard;
            let rules = GateArgs {
                allow_empty,
                allow_unmatched,
                ..GateArgs::default()
            };
            let gate = judge(&record, &rules);
            let case = format!("{kept:?} {unmatched} {shard:?} {allow_empty} {allow_unmatched}");
            assert_eq!(gate.run.len(), expected.len(), "{case}: {:?}", gate.run);
            for (line, start) in gate.run.iter().zip(&expected) {
                assert!(line.starts_with(start), "{case}: {line}");
            }
            assert_eq!(gate.passed(), expected.is_empty(), "{case}");
        }
    }
}
