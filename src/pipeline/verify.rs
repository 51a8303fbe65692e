//! Correctness before timing: the KernelBench-compatible trials (the first with the deep
//! checks; KernelBench's own verdict is taken on them too), parameter perturbation, signed, scaled and shifted inputs, another input shape. Each
//! trial's inputs come from seeds both workers derive; the reference worker compares. Knows
//! nothing of timing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::lanes::Hold;
use crate::record::{merge_check, Check, Outcome, Trial};
use crate::taskfacts::TaskFacts;
use crate::timing::Failed;
use crate::verdict::{Cause, ReferenceStep, Verdict};
use crate::worker::request::{self, CheckOutputs, Perturb, Ping, Variant};
use crate::worker::{CheckName, Link, Reply, Stream};

use super::gathered::Gathered;
use super::kernelbench::{self, KERNELBENCH_NEVER};
use super::replies::Shipped;
use super::stage::{ask, Handover};

/// `inputs.distribution_perturbation`: the scaled variant multiplies the inputs by this.
const SCALE_FACTOR: f64 = 8.0;
/// `inputs.mean_shift`: inputs offset by this many of their standard deviations (fp32 keeps
/// about seven digits, so E[x^2] - E[x]^2 loses four of them here; two-pass and Welford lose none).
const SHIFT_SPREADS: f64 = 100.0;

/// One correctness trial as sent to both workers (`request::Trial` to the candidate,
/// `CheckOutputs` to the reference; recorded as a `record::Trial`).
struct TrialPlan {
    index: u32,
    /// None, or a distribution or shape variant of the inputs (inputs.make_inputs).
    variant: Option<Variant>,
    /// Run the expensive checks too (trial 0).
    deep: bool,
    /// One of KernelBench's trials: judged by its rule too.
    kernelbench: bool,
    /// The candidate's second calls of the deep checks (`outputs.independence`,
    /// `determinism.rerun`), which assume forward is a pure function: not on a task whose
    /// reference is nondeterministic (its facts), since one that keeps state between calls
    /// neither repeats itself nor stays in step with the reference worker's after an extra call.
    second_calls: bool,
}

/// Whether a worker still answers (after an error that may have been fatal to it).
fn alive(worker: &mut impl Link) -> bool {
    worker.request(Ping {}, Duration::from_secs(30)).is_ok()
}

/// The constant a shape perturbation changes: a batch size when the task has one, else the
/// first constant that only sizes the inputs (from the task's facts).
fn shape_constant(facts: &TaskFacts) -> Option<&str> {
    let plain = || {
        facts
            .input_only_constants
            .iter()
            .filter(|n| !n.contains('['))
    };
    plain()
        .find(|n| n.contains("batch"))
        .or_else(|| plain().next())
        .map(String::as_str)
}

/// What the trials take from the run: its settings and the task's facts, where derived.
pub(super) struct Verifier<'a> {
    pub config: &'a Config,
    pub facts: Option<&'a TaskFacts>,
}

impl Verifier<'_> {
    /// Every correctness trial and check before timing: the KernelBench-compatible trials (the
    /// first with the deep checks), parameter perturbation, signed and scaled inputs, another
    /// input shape. A breach of the module contract found in KernelBench's trials waits for the
    /// other checks of the values: wrong values there outrank it, a later breach does not.
    /// Between steps, a lane waiting to time goes first (`Hold::step`).
    pub(super) fn verify<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        hold: &mut Hold<'_>,
        eval: &mut Gathered,
        constants: &Map<String, Value>,
    ) -> Result<(), Failed> {
        let pure = self.facts.is_none_or(|f| f.nondeterministic != Some(true));
        let breach = match self.kernelbench_trials(handover, hold, eval, pure) {
            Err(breach @ Cause::Contract(_)) => Some(breach),
            other => other.map(|()| None)?,
        };
        if !pure {
            for name in SECOND_CALL_CHECKS {
                merge_check(
                    &mut eval.checks,
                    Check {
                        name,
                        outcome: Outcome::Skip,
                        evidence: "the task's reference is nondeterministic (it draws random numbers or keeps state between calls): a second call need not repeat the first".into(),
                        seconds: 0.0,
                        runs: 1,
                    },
                );
            }
        }
        match (self.perturbations(handover, hold, eval, constants), breach) {
            (Ok(()) | Err(Cause::Contract(_)), Some(breach)) => Err(breach),
            (checked, _) => checked,
        }
    }

    /// The checks of the values beyond KernelBench's trials: parameter perturbation, signed,
    /// scaled and shifted inputs, another input shape. The parameters go back to their values
    /// as built after their own trial, so the later checks (and timing) judge the module on the
    /// parameters it was built with; a breach found there waits for them, as in `verify`.
    fn perturbations<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        hold: &mut Hold<'_>,
        eval: &mut Gathered,
        constants: &Map<String, Value>,
    ) -> Result<(), Failed> {
        let cfg = self.config;
        let mut index = cfg.trials;
        let breach = match self.params_trials(handover, hold, eval, &mut index) {
            Ok(()) => None,
            Err(breach @ Cause::Contract(_)) => Some(breach),
            Err(cause) => return Err(cause),
        };
        let mut variants = Vec::new();
        let mut push = |check, variant: Variant| {
            variants.push((check, variant_label(Some(&variant)), variant));
        };
        push(CheckName::InputsDistributionPerturbation, Variant::Signed);
        push(
            CheckName::InputsDistributionPerturbation,
            Variant::Scaled {
                factor: SCALE_FACTOR,
            },
        );
        push(
            CheckName::InputsMeanShift,
            Variant::Shifted {
                spreads: SHIFT_SPREADS,
            },
        );
        for (check, what, variant) in variants {
            hold.step();
            self.variant_trial(handover, eval, (check, &what), Some(variant), index)?;
            index += 1;
        }
        hold.step();
        self.shape_perturbation(handover, eval, constants, index)?;
        breach.map_or(Ok(()), Err)
    }

    /// `params.perturbation`'s trials, then the parameters restored in both workers, whatever
    /// they found: on plain inputs, then on inputs scaled up, where a task's output is mostly
    /// clipped on plain ones (CUDA-L1's level2/9: a ReLU after subtracting 2 leaves 99.95 % of
    /// it zero, so new weights rarely reach it). `index` counts the trials run (a task without
    /// parameters has none).
    fn params_trials<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        hold: &mut Hold<'_>,
        eval: &mut Gathered,
        index: &mut u32,
    ) -> Result<(), Failed> {
        const NAME: CheckName = CheckName::ParamsPerturbation;
        let seed = Stream::Perturb.seed(self.config.seed);
        let what = match self.perturb_params(handover, eval, seed) {
            Ok(None) => return Ok(()),
            Ok(Some(what)) => Ok(what),
            // The reference did not perturb: nothing to restore.
            Err(cause @ (Cause::ReferenceError(..) | Cause::ReferenceDied(_))) => {
                return Err(cause)
            }
            Err(cause) => Err(cause),
        };
        let scaled = Variant::Scaled {
            factor: SCALE_FACTOR,
        };
        let tried = what.and_then(|what| {
            for variant in [None, Some(scaled)] {
                hold.step();
                let label = match &variant {
                    None => what.clone(),
                    Some(v) => format!("{what}; {}", variant_label(Some(v))),
                };
                let trial = self.variant_trial(handover, eval, (NAME, &label), variant, *index);
                *index += 1;
                trial?;
            }
            Ok(())
        });
        let restored = self.restore_params(handover, seed);
        tried.and(restored)
    }

    /// Both workers put back the parameter values the perturbation with `seed` replaced. A
    /// candidate that does not is judged on what it holds: the reference's are restored, so
    /// its later trials show it.
    fn restore_params<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        seed: u64,
    ) -> Result<(), Failed> {
        let restore = Perturb {
            seed,
            built: None,
            restore: true,
        };
        let timeout = self.config.timeouts.call;
        match handover.reference.request(restore.clone(), timeout) {
            Ok(Reply::Ok(_)) => {}
            Ok(Reply::Err(e)) => return Err(Cause::ReferenceError(ReferenceStep::Perturb, e)),
            Err(f) => return Err(Cause::ReferenceDied(f)),
        }
        ask(handover.candidate, restore, timeout).map(drop)
    }

    /// KernelBench's trials: the `--trials` plain trials, each on fresh inputs from its own seed
    /// (as KernelBench's `num_correct_trials`), the first with the deep checks. Each is judged by
    /// kbench and by KernelBench's rule (`Evaluation::kernelbench_correct`); past kbench's first
    /// failure they go on, for KernelBench's verdict alone, while its rule still passes at its
    /// loosest tolerance (`KERNELBENCH_LOOSEST`: its verdict at any tolerance comes from one run), and
    /// kbench's failure stands. The first's second calls only where forward is `pure` (the
    /// task's reference is deterministic).
    fn kernelbench_trials<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        hold: &mut Hold<'_>,
        eval: &mut Gathered,
        pure: bool,
    ) -> Result<(), Failed> {
        let mut failed = None;
        let mut kernelbench = true;
        let mut needed: f64 = 0.0;
        for index in 0..self.config.trials {
            hold.step();
            let plan = TrialPlan {
                index,
                variant: None,
                deep: index == 0,
                kernelbench: true,
                second_calls: pure,
            };
            let (trial, breach) = match self.trial(handover, &plan, eval) {
                Ok(judged) => judged,
                Err(cause) => {
                    eval.kernelbench_correct = kernelbench_after(&cause);
                    eval.kernelbench_needed = eval.kernelbench_correct.map(|_| KERNELBENCH_NEVER);
                    if eval.kernelbench_correct.is_none() {
                        if let Some(check) = kernelbench::cut_short(index, &cause) {
                            merge_check(&mut eval.checks, check);
                        }
                    }
                    return Err(failed.unwrap_or(cause));
                }
            };
            kernelbench &= trial.kernelbench_correct == Some(true);
            needed = needed.max(trial.kernelbench_needed.unwrap_or(KERNELBENCH_NEVER));
            // Wrong values in a later trial outrank a breach of the module contract.
            if failed
                .as_ref()
                .is_none_or(|c| matches!(c, Cause::Contract(_)))
            {
                let at = format!("trial {index}");
                if trial.uncheckable {
                    failed = failed.or(Some(Cause::Uncheckable(format!("{at}: {}", trial.reason))));
                } else {
                    failed = match failure(&trial, breach, &at) {
                        Some(wrong @ Cause::Wrong(_)) => Some(wrong),
                        found => failed.or(found),
                    };
                    eval.trials.push(trial);
                }
            }
            // On while KernelBench's verdict at its loosest tolerance is still open.
            if failed.is_some() && !kernelbench && needed > KERNELBENCH_LOOSEST {
                break;
            }
        }
        eval.kernelbench_correct = Some(kernelbench);
        eval.kernelbench_needed = Some(needed);
        failed.map_or(Ok(()), Err)
    }

    /// `params.perturbation`: new parameter values, the same in both workers (a trial follows).
    /// The reference worker perturbs the task's model, and on a GPU says its parameters as
    /// built; the candidate pairs ModelNew's parameters with the task's by what they are, not by
    /// registration order, and gives each the values its partner got
    /// (`roles/candidate.py`'s `Candidate.perturb`: in place where they are the task's as built, with no
    /// second build of the task's model). A parameter of the task's with no
    /// partner fails; one of ModelNew's with none is left unperturbed and named. Returns what
    /// the trial checks, or None where the task has no parameters (the check skipped).
    fn perturb_params<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        eval: &mut Gathered,
        seed: u64,
    ) -> Result<Option<String>, Failed> {
        const NAME: CheckName = CheckName::ParamsPerturbation;
        let cfg = self.config;
        let perturb = Perturb {
            seed,
            built: None,
            restore: false,
        };
        let ours = match handover.reference.request(perturb, cfg.timeouts.call) {
            Ok(Reply::Ok(v)) => v,
            Ok(Reply::Err(e)) => return Err(Cause::ReferenceError(ReferenceStep::Perturb, e)),
            Err(f) => return Err(Cause::ReferenceDied(f)),
        };
        if ours.shapes.as_ref().is_none_or(Vec::is_empty) {
            merge_check(
                &mut eval.checks,
                Check {
                    name: NAME,
                    outcome: Outcome::Skip,
                    evidence: "the task's Model has no floating parameters to perturb".into(),
                    seconds: 0.0,
                    runs: 1,
                },
            );
            return Ok(None);
        }
        let perturb = Perturb {
            seed,
            built: ours.built.clone(),
            restore: false,
        };
        let theirs = ask(handover.candidate, perturb, cfg.timeouts.call)?;
        if !theirs.missing.is_empty() {
            return Err(Cause::Contract(format!(
                "{NAME}: ModelNew has no parameter that is the task's {} (by name, values or shape), so a change of it cannot reach the module",
                theirs.missing.join(", ")
            )));
        }
        if ours.shapes != theirs.shapes {
            return Err(Cause::Wrong(format!(
                "{NAME}: the task's parameters as built in the candidate's worker differ from the reference worker's"
            )));
        }
        let mut what = variant_label(None);
        if !theirs.paired.is_empty() {
            what += &format!("; paired by what they are: {}", theirs.paired.join(", "));
        }
        if !theirs.extra.is_empty() {
            what += &format!(
                "; left unperturbed (the task has no counterpart): {}",
                theirs.extra.join(", ")
            );
        }
        Ok(Some(what))
    }

    /// One trial on perturbed inputs or parameters, recorded as the check `check`. A reference
    /// that overflows or fails on these inputs says nothing about the kernel: skipped.
    fn variant_trial<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        eval: &mut Gathered,
        (check, what): (CheckName, &str),
        variant: Option<Variant>,
        index: u32,
    ) -> Result<(), Failed> {
        let started = Instant::now();
        let plan = TrialPlan {
            index,
            variant,
            deep: false,
            kernelbench: false,
            second_calls: false,
        };
        let params = check == CheckName::ParamsPerturbation;
        let (trial, breach) = self.trial(handover, &plan, eval)?;
        let outcome = if trial.uncheckable {
            Outcome::Skip
        } else if let Some(cause) = failure(&trial, breach, &format!("{check} ({what})")) {
            // Right with the parameters it was built with, wrong with new ones: the module
            // keeps what it derived from them at construction.
            let cause = match cause {
                Cause::Wrong(_) if params => Cause::Contract(format!(
                    "{check} ({what}): right with the parameters it was built with, wrong after they changed: {}",
                    trial.reason
                )),
                cause => cause,
            };
            eval.trials.push(trial);
            return Err(cause);
        } else {
            Outcome::Pass
        };
        let result = if trial.reason.is_empty() {
            "correct"
        } else {
            &trial.reason
        };
        merge_check(
            &mut eval.checks,
            Check {
                name: check,
                outcome,
                evidence: format!("{what}: {result}"),
                seconds: started.elapsed().as_secs_f64(),
                runs: 1,
            },
        );
        eval.trials.push(trial);
        Ok(())
    }

    /// `inputs.shape_perturbation`: one more trial with a size constant that only shapes the
    /// inputs grown by one (an odd size). Wrong results there are `incorrect`; a clean refusal
    /// (an exception) is the softer `shape_specialized` warning.
    fn shape_perturbation<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        eval: &mut Gathered,
        constants: &Map<String, Value>,
        index: u32,
    ) -> Result<(), Failed> {
        const NAME: CheckName = CheckName::InputsShapePerturbation;
        let started = Instant::now();
        let chosen = self
            .facts
            .and_then(shape_constant)
            .and_then(|name| Some((name, constants.get(name)?.as_i64()?)));
        let Some((name, value)) = chosen else {
            merge_check(
                &mut eval.checks,
                Check {
                    name: NAME,
                    outcome: Outcome::Skip,
                    evidence: "no constant that only sizes the inputs".into(),
                    seconds: 0.0,
                    runs: 1,
                },
            );
            return Ok(());
        };
        let what = format!("{name}={}", value + 1);
        let plan = TrialPlan {
            index,
            variant: Some(Variant::Shape {
                set: [(name.to_string(), value + 1)].into(),
            }),
            deep: false,
            kernelbench: false,
            second_calls: false,
        };
        let (outcome, evidence) = match self.trial(handover, &plan, eval) {
            Ok((trial, _)) if trial.uncheckable => {
                (Outcome::Skip, format!("{what}: {}", trial.reason))
            }
            Ok((trial, breach)) => match failure(&trial, breach, &format!("{NAME} ({what})")) {
                None => (Outcome::Pass, format!("{what}: correct")),
                Some(cause) => {
                    eval.trials.push(trial);
                    return Err(cause);
                }
            },
            Err(cause @ Cause::ReferenceError(..)) => {
                (Outcome::Skip, format!("{what}: {}", cause.reason()))
            }
            Err(cause) if cause.is_refusal() && alive(handover.candidate) => (
                Outcome::Warn,
                format!(
                    "shape_specialized: at {what} the kernel refused: {}",
                    cause.reason()
                ),
            ),
            Err(cause) => return Err(Cause::Within(format!("{NAME} ({what})"), Box::new(cause))),
        };
        merge_check(
            &mut eval.checks,
            Check {
                name: NAME,
                outcome,
                evidence,
                seconds: started.elapsed().as_secs_f64(),
                runs: 1,
            },
        );
        Ok(())
    }

    /// One correctness trial: fresh inputs from the trial's seed in both workers, the candidate's
    /// outputs and inputs handed to the reference worker, compared there. The workers' check
    /// entries go into `eval`. Returns the trial, and the breach of the module contract either
    /// worker found in the call, if any (the reference's, which saw the inputs written, first).
    fn trial<W: Link>(
        &self,
        handover: &mut Handover<'_, W>,
        plan: &TrialPlan,
        eval: &mut Gathered,
    ) -> Result<(Trial, Option<String>), Failed> {
        let cfg = self.config;
        let (seed, forward_seed) = trial_seeds(cfg.seed, plan.index);
        let request = |out, transport| request::Trial {
            seed,
            forward_seed,
            variant: plan.variant.clone(),
            deep: plan.deep && plan.second_calls,
            out,
            transport,
        };
        let check = |_: &Shipped| {
            Some(CheckOutputs {
                seed,
                forward_seed,
                variant: plan.variant.clone(),
                deep: plan.deep,
                candidate_out: PathBuf::new(),
                ipc: None,
                kernelbench_tolerance: plan.kernelbench.then_some(cfg.kernelbench_tolerance),
            })
        };
        let file = format!("trial{}.pt", plan.index);
        let (ran, checked) = handover.exchange(request, check, cfg.timeouts.call, &file)?;
        let checked = checked.unwrap_or_default();
        eval.slot_compiled(ran.compiled);
        for c in ran.checks.into_iter().chain(checked.checks) {
            merge_check(&mut eval.checks, c);
        }
        let trial = Trial {
            index: plan.index,
            correct: checked.correct,
            uncheckable: checked.uncheckable,
            reason: checked.reason.unwrap_or_default(),
            max_abs_diff: checked.max_abs_diff,
            max_rel_diff: checked.max_rel_diff,
            kernelbench_correct: checked.kernelbench_correct,
            kernelbench_needed: checked.kernelbench_needed,
        };
        Ok((trial, checked.contract.or(ran.contract)))
    }
}

/// Trial `index`'s input seed and forward seed.
fn trial_seeds(run_seed: u64, index: u32) -> (u64, u64) {
    let seed = |forward| Stream::Trial { index, forward }.seed(run_seed);
    (seed(false), seed(true))
}

/// What a compared trial decides, its reason after `at`: wrong values (`incorrect`, whatever
/// else the call broke), else a breach of the module contract found in the call (`contract`),
/// else nothing. An uncheckable trial is its caller's to judge.
fn failure(trial: &Trial, breach: Option<String>, at: &str) -> Option<Cause> {
    if !trial.correct {
        return Some(Cause::Wrong(format!("{at}: {}", trial.reason)));
    }
    breach.map(|b| Cause::Contract(format!("{at}: {b}")))
}

/// The first trial's checks that call forward again (`TrialPlan::second_calls`); KernelBench
/// makes no second call.
const SECOND_CALL_CHECKS: [CheckName; 2] = [INDEPENDENCE, CheckName::DeterminismRerun];

/// The check that a call returns memory of its own, which a static output breaks.
pub(super) const INDEPENDENCE: CheckName = CheckName::OutputsIndependence;

/// `outputs.independence`'s failure as timing met it: a timed call handed out the output
/// storage of an earlier one (`why`, the worker's message).
pub(super) fn independence_breach(why: &str) -> Check {
    Check {
        name: INDEPENDENCE,
        outcome: Outcome::Fail,
        evidence: format!("while timed: {why}"),
        seconds: 0.0,
        runs: 1,
    }
}

/// The loosest tolerance of KernelBench's versions (v0 and v0.1's 1e-2): its trials go on past
/// kbench's failure until the verdict at this tolerance is known (`Evaluation::kernelbench_needed`).
const KERNELBENCH_LOOSEST: f64 = 1e-2;

/// KernelBench's verdict when one of its trials ended in `cause`: false where the kernel failed
/// there (it raised, died, hung, handed over what cannot be compared); None where the trial
/// cannot say (the reference's or kbench's failure, a cheat caught before the comparison, a
/// breach of the module contract or a failed second call: checks KernelBench does not make,
/// which end the trial before its first call's outputs are compared).
fn kernelbench_after(cause: &Cause) -> Option<bool> {
    match (cause.decide().0, cause) {
        (Verdict::Skipped | Verdict::Cheat | Verdict::Contract, _) => None,
        (_, Cause::Raised(e))
            if e.check
                .as_ref()
                .is_some_and(|c| SECOND_CALL_CHECKS.contains(c)) =>
        {
            None
        }
        _ => Some(false),
    }
}

/// How a trial's inputs differ, as its check's evidence says (numbers as JSON writes them).
fn variant_label(variant: Option<&Variant>) -> String {
    match variant {
        None => "new parameter values".into(),
        Some(Variant::Scaled { factor }) => format!("inputs scaled by {}", json!(factor)),
        Some(Variant::Shifted { spreads }) => format!(
            "inputs offset by {} standard deviations, judged against float64",
            json!(spreads)
        ),
        Some(Variant::Signed) => "signed inputs (2x - 1 where the inputs are non-negative)".into(),
        Some(Variant::Shape { .. }) => "shape".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_perturbation_prefers_a_batch_size() {
        let facts = |names: &[&str]| TaskFacts {
            input_only_constants: names.iter().map(|n| n.to_string()).collect(),
            ..TaskFacts::default()
        };
        assert_eq!(
            shape_constant(&facts(&["dim", "batch_size"])),
            Some("batch_size")
        );
        assert_eq!(shape_constant(&facts(&["shape[0]", "dim"])), Some("dim"));
        assert_eq!(shape_constant(&facts(&["shape[1]"])), None);
    }
}
