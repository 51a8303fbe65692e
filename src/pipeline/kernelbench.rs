//! `kernelbench.environment`: KernelBench's trials run again as its eval runs them, where
//! kbench's own trials cannot stand for them. kbench judges in strict fp32, on inputs of its own
//! seeds, with the reference in a worker of its own, and checks every call; KernelBench's eval
//! runs the task's source and the submission's in one namespace of one process, under PyTorch's
//! own switches (on a GPU cuDNN allows TF32, so a convolution in another layout or by another
//! algorithm moves by 1e-3) and whatever the submission sets, on inputs of its own seeds made on
//! the CPU, and compares each call's outputs and nothing else. Wherever kbench's own checks
//! ended a trial before its outputs were compared, and on every evaluation whose trials ran
//! under `--kernelbench-eval`, a fresh candidate worker runs KernelBench's eval that way
//! (`kbench_worker/checks/kernelbench.py`): its verdict is `kernelbench_correct`. It costs what
//! upstream's eval costs (inputs and weights made on the CPU: a minute on tasks with large
//! inputs), so it is asked for, not run by default. kbench's verdict is not touched.

use std::sync::Arc;
use std::time::Instant;

use crate::record::{Check, Outcome};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::{Cause, Verdict};
use crate::worker::request::KernelbenchTrial;
use crate::worker::CheckName;

use super::alone::Alone;
use super::backend::Phase;
use super::gathered::Gathered;
use super::load;
use super::pair::Pair;
use super::spawn::Spawner;
use super::stage::{ask, log_path};
use super::workspace::lend;

/// `Evaluation::kernelbench_needed` where no tolerance of KernelBench's versions passes (the
/// worker's `kernelbench.NEVER`).
pub(super) const KERNELBENCH_NEVER: f64 = 1.0;

/// How the check's evidence introduces what KernelBench's eval, run as it runs, found.
const ABOUT: &str =
    "KernelBench's eval run as it runs (one process, PyTorch's own switches, its seeds)";

/// The check that says why KernelBench's trials ran again, and what they found.
pub(super) const NAME: CheckName = CheckName::KernelbenchEnvironment;

/// The check's entry where kbench's own checks ended KernelBench's trial `index` before its
/// outputs were compared (the caller's to tell: `kernelbench_after` left KernelBench's verdict
/// empty): they run again alone. None where nothing of the submission's ended it (the
/// reference's failure, a skip).
pub(super) fn cut_short(index: u32, cause: &Cause) -> Option<Check> {
    let (verdict, reason) = cause.decide();
    (verdict != Verdict::Skipped).then(|| Check {
        name: NAME,
        outcome: Outcome::Warn,
        evidence: format!(
            "kbench's checks ended KernelBench's trial {index} before its outputs were compared ({reason}): KernelBench's eval runs again alone"
        ),
        seconds: 0.0,
        runs: 1,
    })
}

/// Whether KernelBench's verdict needs its own trials: a trial cut short (`NAME` warns), or,
/// under `--kernelbench-eval` (`asked`), wherever kbench's trials gave KernelBench's verdict (not
/// after a failed build or load, or a skip).
fn needed(eval: &Gathered, asked: bool) -> bool {
    let cut_short = eval
        .checks
        .iter()
        .any(|c| c.name == NAME && c.outcome == Outcome::Warn);
    cut_short || (asked && eval.kernelbench_correct.is_some())
}

/// What KernelBench's trials alone found: its verdict and the tolerance it needs, or None where
/// they could not say (the reference's or kbench's failure); and the evidence.
struct Found {
    verdict: Option<(bool, f64)>,
    evidence: String,
}

impl<S: Spawner> Alone<'_, S> {
    /// Where `needed`, KernelBench's trials as its eval runs them, by a fresh candidate worker
    /// after the evaluation's own: `kernelbench_correct` and `kernelbench_needed` come from
    /// them, the check `NAME` says so.
    pub(super) fn kernelbench_environment(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        eval: &mut Gathered,
        enter: &dyn Fn(Phase),
    ) {
        if !needed(eval, self.workers.config.kernelbench_eval) {
            return;
        }
        enter(Phase::Kernelbench);
        let started = Instant::now();
        let found = self.kernelbench_alone(task, sub, slot, eval);
        if let Some((correct, needed)) = found.verdict {
            eval.kernelbench_correct = Some(correct);
            eval.kernelbench_needed = Some(needed);
        }
        let seconds = started.elapsed().as_secs_f64();
        eval.phases.correctness_s += seconds;
        match eval.checks.iter_mut().find(|c| c.name == NAME) {
            Some(check) => {
                check.evidence = format!("{}; {}", check.evidence, found.evidence);
                check.seconds += seconds;
            }
            None => eval.checks.push(Check {
                name: NAME,
                outcome: Outcome::Pass,
                evidence: format!("{ABOUT}: {}", found.evidence),
                seconds,
                runs: 1,
            }),
        }
    }

    /// KernelBench's trials by a candidate worker of a fresh pair, loaded for them
    /// (`Load::kernelbench`); the pair's reference worker has no part in them.
    fn kernelbench_alone(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        eval: &mut Gathered,
    ) -> Found {
        let workers = self.workers;
        let gate = Arc::clone(&self.gate.lock().expect("gate lock"));
        let _hold = gate.enter(self.alone);
        let pair = match workers.take_pair(slot) {
            Ok(pair) => pair,
            Err(e) => return ended(Cause::Unready(e)),
        };
        let lent = match lend(&workers.confinement, self.home.clone(), pair.workspace) {
            Ok(lent) => lent,
            Err(e) => return ended(Cause::Unready(e)),
        };
        let stage = match &lent {
            Some(lent) => lent.stage(&workers.confinement),
            None => Ok(pair.exchange.stage()),
        };
        let Pair {
            reference,
            mut candidate,
            logs: [reference_log, candidate_log],
            exchange,
            ..
        } = pair;
        let _ = S::finish(reference);
        let _ = std::fs::remove_file(reference_log);
        let (log, rel) = log_path(&workers.config.out, sub, "kernelbench-candidate");
        let _ = std::fs::rename(candidate_log, log);
        eval.logs.push(rel);
        let loaded = stage.map_err(Cause::Unready).and_then(|stage| {
            let stage = (&stage, &self.env[..]);
            workers.load_alone(
                (task, sub),
                slot,
                &mut candidate,
                stage,
                load::Alone::Kernelbench,
            )
        });
        let found = match loaded {
            Ok(()) => self.kernelbench_trials_alone(&mut candidate),
            Err(cause) => ended(cause),
        };
        let gone = S::finish(candidate);
        lent.into_iter().for_each(|l| l.settle(gone));
        drop(exchange);
        found
    }

    /// The run's `--trials` trials; past the first that no tolerance of KernelBench's passes
    /// they stop (what KernelBench's eval does after a failed trial cannot change its verdict).
    fn kernelbench_trials_alone(&self, candidate: &mut S::Worker) -> Found {
        let cfg = self.workers.config;
        let tolerance = cfg.kernelbench_tolerance;
        let (mut correct, mut needed, mut first_miss) = (true, 0.0_f64, None);
        for index in 0..cfg.trials {
            let trial = KernelbenchTrial { index, tolerance };
            let judged = match ask(candidate, trial, cfg.timeouts.call) {
                Ok(judged) => judged,
                Err(cause) => return ended(cause),
            };
            correct &= judged.correct;
            needed = needed.max(judged.needed);
            if !judged.correct && first_miss.is_none() {
                first_miss = Some(format!("trial {index}: {}", judged.reason));
            }
            if needed >= KERNELBENCH_NEVER {
                break;
            }
        }
        let evidence = match first_miss {
            None => format!(
                "its {} trials are correct at {tolerance:e} (they need {})",
                cfg.trials,
                short(needed)
            ),
            Some(miss) => format!("not correct at {tolerance:e}: {miss}"),
        };
        Found {
            verdict: Some((correct, needed)),
            evidence,
        }
    }
}

/// What ended KernelBench's trials before they were judged: false where the submission's (as
/// KernelBench's eval fails a kernel whose load or call raises), no verdict where nothing of
/// the submission's did (kbench's own failure, a skip).
fn ended(cause: Cause) -> Found {
    let (verdict, reason) = cause.decide();
    let failed = !matches!(verdict, Verdict::Skipped);
    Found {
        verdict: failed.then_some((false, KERNELBENCH_NEVER)),
        evidence: format!("KernelBench's eval ends: {reason}"),
    }
}

/// A tolerance as a person reads it: 0, or three digits and an exponent (3.05e-3).
fn short(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else {
        format!("{x:.2e}")
    }
}

#[cfg(test)]
mod tests {
    /// The worker's `kernelbench.NEVER` and kbench's `KERNELBENCH_NEVER` are one value: the
    /// least tolerance a trial needs reads "none passes" only where both sides agree on it.
    #[test]
    fn never_is_the_same_value_on_both_sides() {
        let source = include_str!("../worker/python/kbench_worker/checks/kernelbench.py");
        let never: f64 = source
            .lines()
            .find_map(|line| line.strip_prefix("NEVER = "))
            .expect("checks/kernelbench.py defines NEVER")
            .trim()
            .parse()
            .expect("NEVER is a number");
        assert_eq!(never, super::KERNELBENCH_NEVER);
    }
}
