//! `kernelbench.environment`: KernelBench's trials run again as its eval runs them, where
//! kbench's own trials cannot stand for them. kbench judges in strict fp32 and checks every
//! call; KernelBench's eval runs the reference and the candidate in one process under PyTorch's
//! own switches (on a GPU cuDNN allows TF32, so a candidate's convolution in another layout or by
//! another algorithm moves by 1e-3) and whatever the candidate sets, and compares each call's
//! outputs and nothing else. On a GPU, and wherever kbench's own checks ended a trial before its
//! outputs were compared, a fresh pair of workers loads the task and the submission in
//! KernelBench's environment and runs its trials alone, on the same inputs: their verdict is
//! `kernelbench_correct`. kbench's verdict is not touched.

use std::time::Instant;

use crate::config::Device;
use crate::record::{Check, Evaluation, Outcome};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::{Cause, Verdict};
use crate::worker::request::{self, CheckOutputs};

use super::load::Pair;
use super::stage::{first_transport, Handover};
use super::verify::{trial_seeds, KERNELBENCH_NEVER};
use super::{Python, Spawner};

/// The check that says why KernelBench's trials ran again, and what they found.
pub(super) const NAME: &str = "kernelbench.environment";

/// The check's entry where kbench's own checks ended KernelBench's trial `index` before its
/// outputs were compared (the caller's to tell: `kernelbench_after` left KernelBench's verdict
/// empty): they run again alone. None where nothing of the submission's ended it (the
/// reference's failure, a skip).
pub(super) fn cut_short(index: u32, cause: &Cause) -> Option<Check> {
    let (verdict, reason) = cause.decide();
    (verdict != Verdict::Skipped).then(|| Check {
        name: NAME.into(),
        outcome: Outcome::Warn,
        evidence: format!(
            "kbench's checks ended KernelBench's trial {index} before its outputs were compared ({reason}): its trials run again alone"
        ),
        seconds: 0.0,
        runs: 1,
    })
}

/// Whether KernelBench's verdict needs its own trials: a trial cut short (`NAME` warns), or on a
/// GPU wherever kbench's trials gave KernelBench's verdict (not after a failed build or load, or
/// a skip).
fn needed(eval: &Evaluation, device: Device) -> bool {
    let cut_short = eval
        .checks
        .iter()
        .any(|c| c.name == NAME && c.outcome == Outcome::Warn);
    cut_short || (device == Device::Cuda && eval.kernelbench_correct.is_some())
}

/// What KernelBench's trials alone found: its verdict and the tolerance it needs, or None where
/// they could not say (the reference's or kbench's failure); and the evidence.
struct Found {
    verdict: Option<(bool, f64)>,
    evidence: String,
}

impl<S: Spawner> Python<'_, S> {
    /// Where `needed`, KernelBench's trials in KernelBench's environment, by a fresh pair of
    /// workers after the evaluation's own: `kernelbench_correct` and `kernelbench_needed` come
    /// from them, the check `NAME` says so.
    pub(super) fn kernelbench_environment(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        eval: &mut Evaluation,
    ) {
        if !needed(eval, self.config.device) {
            return;
        }
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
                name: NAME.into(),
                outcome: Outcome::Pass,
                evidence: format!(
                    "on a GPU KernelBench's eval runs under PyTorch's own switches (cuDNN TF32): {}",
                    found.evidence
                ),
                seconds,
                runs: 1,
            }),
        }
    }

    /// KernelBench's trials by a fresh pair of workers loaded for them (`Load::kernelbench`):
    /// the run's `--trials` plain trials on kbench's trials' inputs, each call's outputs judged
    /// by KernelBench's rule with the reference under the switches the candidate's process had.
    fn kernelbench_alone(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        eval: &mut Evaluation,
    ) -> Found {
        let cfg = self.config;
        let _hold = self.gates[slot].enter(self.alone(task));
        let ended = |cause: Cause| {
            let (verdict, reason) = cause.decide();
            let failed = !matches!(verdict, Verdict::Skipped);
            Found {
                verdict: failed.then_some((false, KERNELBENCH_NEVER)),
                evidence: format!("in KernelBench's environment: {reason}"),
            }
        };
        let mut pair = match self.take_pair(slot) {
            Ok(pair) => pair,
            Err(e) => return ended(Cause::Unready(e)),
        };
        let _lent = match self.lend(sub, pair.workspace.take()) {
            Ok(lent) => lent,
            Err(e) => return ended(Cause::Unready(e)),
        };
        let Pair {
            mut reference,
            mut candidate,
            mut logs,
            exchange,
            ..
        } = pair;
        eval.logs
            .extend(self.claim_logs(sub, &mut logs, false, "kernelbench-"));
        let workers = (&mut reference, &mut candidate);
        let found = match self.load(task, sub, slot, workers, &exchange, true) {
            Ok(_) => {
                let mut transport = first_transport(cfg.device);
                let mut handover = Handover {
                    reference: &mut reference,
                    candidate: &mut candidate,
                    transport: &mut transport,
                    exchange: &exchange,
                };
                match self.kernelbench_trials_alone(&mut handover) {
                    Ok(found) => found,
                    Err(cause) => ended(cause),
                }
            }
            Err(cause) => ended(cause),
        };
        S::finish(reference);
        S::finish(candidate);
        found
    }

    /// The trials themselves, on the inputs and forward seeds of kbench's first `--trials`
    /// trials; past the first that no tolerance of KernelBench's passes they stop.
    fn kernelbench_trials_alone(
        &self,
        handover: &mut Handover<'_, S::Worker>,
    ) -> Result<Found, Cause> {
        let cfg = self.config;
        let tolerance = cfg.kernelbench_tolerance;
        let (mut correct, mut needed, mut first_miss) = (true, 0.0_f64, None);
        for index in 0..cfg.trials {
            let (seed, forward_seed) = trial_seeds(cfg.seed, index);
            let request = |out, transport| request::Trial {
                seed,
                forward_seed,
                variant: None,
                deep: false,
                out,
                transport,
            };
            let check = |ran: &super::replies::Shipped| {
                Some(CheckOutputs {
                    seed,
                    forward_seed,
                    variant: None,
                    deep: false,
                    candidate_out: Default::default(),
                    ipc: None,
                    kernelbench_tolerance: Some(tolerance),
                    switches: ran.switches.clone(),
                })
            };
            let file = format!("kernelbench{index}.pt");
            let (_, checked) = handover.exchange(request, check, cfg.timeouts.call, &file)?;
            let checked = checked.unwrap_or_default();
            let passed = checked.kernelbench_correct == Some(true);
            correct &= passed;
            needed = needed.max(checked.kernelbench_needed.unwrap_or(KERNELBENCH_NEVER));
            if !passed && first_miss.is_none() {
                first_miss = Some(format!(
                    "trial {index}: {}",
                    checked.reason.unwrap_or_default()
                ));
            }
            if needed >= KERNELBENCH_NEVER {
                break;
            }
        }
        let evidence = match first_miss {
            None => format!(
                "in KernelBench's environment its {} trials are correct at {tolerance:e} (they need {})",
                cfg.trials,
                short(needed)
            ),
            Some(miss) => format!(
                "in KernelBench's environment not correct at {tolerance:e}: {miss}"
            ),
        };
        Ok(Found {
            verdict: Some((correct, needed)),
            evidence,
        })
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
