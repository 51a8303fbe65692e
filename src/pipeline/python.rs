//! The real backend, `Python`: one evaluation, (task, submission) on one device, through the
//! Python workers, top to bottom. The compile pool builds each submission first (`Builder`).
//! Then, per evaluation: a pair of fresh workers (`Workers`) loads the task (the reference
//! worker, trusted) and the submission (the candidate worker, untrusted); correctness trials
//! and checks (`Verifier`); timing (`timing::Session`: a breach of the module contract with the
//! values right does not stop the clock, so `contract` evaluations are timed too); one profiled
//! call that shows whether a kernel of the submission's own ran (`Evidence`); the verdict
//! (`decide`); and, last, what the run adds from outside the workers (`annotate`), so the
//! `Evaluation` is final when the backend returns it. Files and outputs travel between the
//! workers through `stage`.
//!
//! Everything that can go wrong in submission code ends as a `Cause`, which `verdict.rs` decides
//! into a `Verdict`, never as an `Err`. This file holds the sequence and nothing of a stage's
//! work; scheduling (which evaluation runs when and where) is `schedule`'s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::cache_key::CacheKey;
use crate::config::Config;
use crate::host_memory;
use crate::lanes::{Gate, Hold};
use crate::nvml::Nvml;
use crate::record::{merge_check, Build, Evaluation, Outcome, Timing};
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;
use crate::timing::{self, Failed};
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::protocol::ErrorKind;
use crate::worker::{Link, Stream};

use super::alone::Alone;
use super::annotate::Annotations;
use super::backend::{Backend, Phase};
use super::build::Builder;
use super::decide;
use super::evidence::{Evidence, Judged};
use super::gathered::Gathered;
use super::load::{self, Workers};
use super::ncu_profile::NcuRuns;
use super::pair::Pair;
use super::sanitize::Sanitize;
use super::spawn::{Launcher, Processes, Spawner};
use super::stage::{self, claim_logs, Handover, TrialTimes};
use super::verify::{self, Verifier};
use super::workspace::{build_seen, lend, Lent};

/// The real backend: Python workers (processes, unless a test scripts them).
pub struct Python<'a, S: Spawner = Processes> {
    config: &'a Config,
    /// The compile pool's builds and the build cache.
    pub(super) builder: Builder<'a>,
    /// The evaluations' workers: started ahead of need, kept for a task's next candidates.
    pub(super) workers: Workers<'a, S>,
    /// Per slot, NVML for its GPU (read-only), when it can be opened.
    gpus: Vec<Option<Mutex<Nvml>>>,
    /// Per slot, what its lanes may share (`lanes`); replaced when an evaluation there is
    /// abandoned (`replace_slot`).
    gates: Vec<Mutex<Arc<Gate>>>,
    /// Facts of the tasks (input-only constants, degenerate flags), where they could be derived.
    facts: &'a HashMap<TaskId, TaskFacts>,
    /// Per slot, the CPU set aside for its timed calls' submitting threads (`cpus::reserve`).
    timing_cpus: Vec<usize>,
    /// How the candidate and compile workers are confined (`--sandbox`).
    confinement: Confinement,
    /// What the run adds to each evaluation from outside the workers (`annotate`).
    annotations: Annotations,
}

impl<'a> Python<'a> {
    /// The backend of a run; `build_key` is torch's version and the architectures (part of every
    /// build folder's name), `cache_key` the cache's key of build records.
    pub fn new(
        config: &'a Config,
        worker_path: PathBuf,
        keys: (String, CacheKey),
        facts: &'a HashMap<TaskId, TaskFacts>,
        timing_cpus: Vec<usize>,
        confinement: Confinement,
        annotations: Annotations,
    ) -> Python<'a> {
        let launcher = Launcher {
            config,
            spawner: Processes,
            worker_path,
        };
        Python::spawning(launcher, keys, facts, timing_cpus, confinement, annotations)
    }
}

impl<'a, S: Spawner> Python<'a, S> {
    /// The backend of a run whose workers `launcher` starts (`new`'s processes, or in tests
    /// scripted workers).
    pub(super) fn spawning(
        launcher: Launcher<'a, S>,
        (build_key, cache_key): (String, CacheKey),
        facts: &'a HashMap<TaskId, TaskFacts>,
        timing_cpus: Vec<usize>,
        confinement: Confinement,
        annotations: Annotations,
    ) -> Python<'a, S> {
        let config = launcher.config;
        Python {
            config,
            builder: Builder {
                config,
                confinement: confinement.clone(),
                build_key,
                cache_key,
                facts,
            },
            workers: Workers::new(launcher, confinement.clone(), facts, confinement.confines()),
            gpus: config
                .gpus
                .iter()
                .map(|g| Nvml::open(*g).ok().map(Mutex::new))
                .collect(),
            gates: (0..config.slots()).map(|_| Mutex::default()).collect(),
            facts,
            timing_cpus,
            confinement,
            annotations,
        }
    }

    /// What the run adds to each evaluation (a `serve` request's file adds its findings).
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }

    /// A service's request for `task` admitted, its evaluation to come: a reference worker that
    /// finishes another of the task's keeps serving (`Reuse`), as in a run that knows its work.
    pub fn expect_one(&self, task: &Task) {
        self.workers.expect_one(task);
    }

    /// Start every slot's workers before the first request (a service's), as a run does before
    /// its first evaluation.
    pub fn warm_up(&self) {
        (0..self.config.slots()).for_each(|slot| self.workers.refill(slot));
    }
}

/// How one evaluation ended: what its stages gathered, the cause that decides its verdict, and
/// the host-speed error its timing's label may allow (`evidence`), applied in `annotate`.
struct Ended {
    eval: Gathered,
    cause: Cause,
    host_error: Option<f64>,
}

/// One evaluation as its stages take it: the task, the submission, the slot it runs on, and
/// how it tells its caller each `Phase` it enters.
#[derive(Clone, Copy)]
struct Job<'j> {
    task: &'j Task,
    sub: &'j Submission,
    slot: usize,
    enter: &'j dyn Fn(Phase),
}

impl<S: Spawner> Backend for Python<'_, S> {
    fn expect(&self, work: &[(Task, Submission)]) {
        self.workers.expect(work);
    }

    fn compile(&self, task: &Task, submission: &Submission) -> Build {
        self.builder.build(&self.workers.launcher, task, submission)
    }

    fn evaluate(
        &self,
        task: &Task,
        submission: &Submission,
        build: &Build,
        slot: usize,
        enter: &dyn Fn(Phase),
    ) -> Evaluation {
        let started = Instant::now();
        self.workers.starting(task);
        let job = Job {
            task,
            sub: submission,
            slot,
            enter,
        };
        let Ended {
            mut eval,
            cause,
            host_error,
        } = match decide::build_failure(build).or_else(|| self.too_large(task)) {
            Some(cause) => Ended {
                eval: Gathered::default(),
                cause,
                host_error: None,
            },
            None => self.attempts(job),
        };
        let cause = decide::with_build(cause, build);
        let cause = match &self.config.sanitizer {
            Some(tool) => Sanitize {
                on: self.alone_for(task, submission, slot),
                tool,
            }
            .sanitize((task, submission), slot, &mut eval, cause, enter),
            None => cause,
        };
        self.alone_for(task, submission, slot)
            .kernelbench_environment(task, submission, slot, &mut eval, enter);
        if let Some(tool) = &self.config.profiler {
            NcuRuns {
                on: self.alone_for(task, submission, slot),
                tool,
            }
            .profile((task, submission), slot, &mut eval, &cause, enter);
        }
        let mut eval = decide::evaluation(
            (task, submission),
            Some(build.clone()),
            self.confinement.label.clone(),
            eval,
            &cause,
            started.elapsed().as_secs_f64(),
        );
        let facts = self.facts.get(&task.id);
        self.annotations
            .apply(&mut eval, facts, self.config, host_error);
        eval
    }

    fn gave_up(
        &self,
        task: &Task,
        submission: &Submission,
        build: Option<&Build>,
        cause: &Cause,
    ) -> Evaluation {
        let sandbox = self.confinement.label.clone();
        let gathered = Gathered::default();
        let sub = (task, submission);
        let mut eval = decide::evaluation(sub, build.cloned(), sandbox, gathered, cause, 0.0);
        let facts = self.facts.get(&task.id);
        self.annotations.apply(&mut eval, facts, self.config, None);
        eval
    }

    fn replace_slot(&self, slot: usize) {
        *self.gates[slot].lock().expect("gate lock") = Arc::default();
    }
}

impl<S: Spawner> Python<'_, S> {
    /// On the CPU, a task that cannot fit the host's memory (`host_memory`): skipped before its
    /// workers start.
    fn too_large(&self, task: &Task) -> Option<Cause> {
        host_memory::refusal(
            self.config,
            self.facts.get(&task.id),
            host_memory::available(),
        )
        .map(Cause::DoesNotFit)
    }

    /// The gate of `slot`'s lanes (`lanes`), as it is now.
    fn gate(&self, slot: usize) -> Arc<Gate> {
        Arc::clone(&self.gates[slot].lock().expect("gate lock"))
    }

    /// Whether `task`'s evaluations take the GPU alone (`Config::alone`, by its facts' memory).
    fn alone(&self, task: &Task) -> bool {
        self.config
            .alone(self.facts.get(&task.id).and_then(|f| f.min_bytes))
    }

    /// What the stages alone take (KernelBench's trials, the sanitizer's and the profiler's
    /// runs): the workers, the slot's gate, and the submission's build folder with its workers'
    /// environment.
    fn alone_for(&self, task: &Task, sub: &Submission, slot: usize) -> Alone<'_, S> {
        let home = self.builder.build_dir(sub);
        Alone {
            workers: &self.workers,
            gate: &self.gates[slot],
            alone: self.alone(task),
            env: self.builder.build_env(&home),
            home,
        }
    }

    /// The workers' evaluation, beside the other lanes or alone; out of GPU memory beside another
    /// lane is not the submission's fault until it runs out alone, so it runs once more alone.
    fn attempts(&self, job: Job<'_>) -> Ended {
        let attempt = |alone| {
            let mut eval = Gathered::default();
            let (cause, host_error) = match self.run_workers(job, alone, &mut eval) {
                Ok(judged) => (judged.cause, judged.host_error),
                Err(cause) => (cause, None),
            };
            Ended {
                eval,
                cause,
                host_error,
            }
        };
        let alone = self.alone(job.task);
        let first = attempt(alone);
        if !(self.config.lanes > 1 && !alone && first.cause.out_of_memory()) {
            return first;
        }
        let mut again = attempt(true);
        again.eval.phases.gpu_wait_s += first.eval.phases.gpu_wait_s;
        merge_check(&mut again.eval.checks, decide::alone_check());
        again
    }

    /// One evaluation by a pair of workers: load, verify, time with the GPU alone, then the
    /// profiled call's evidence; fills `eval` (phases, logs, trials, checks, timing) and returns
    /// what decides the verdict (`Judged`), or the cause that ends it. The candidate worker ends
    /// with it; the reference worker is kept for the task's next candidate if it stayed clean
    /// (`reuse`). A kept reference that fails to load the task again is not the candidate's
    /// fault: it is retired and the evaluation starts over on a fresh pair.
    fn run_workers(
        &self,
        job: Job<'_>,
        alone: bool,
        eval: &mut Gathered,
    ) -> Result<Judged, Failed> {
        let Job {
            task,
            sub,
            slot,
            enter,
        } = job;
        // Before the workers: dropped after them, once their GPU memory is freed.
        let gate = self.gate(slot);
        enter(Phase::Waiting);
        let mut hold = gate.enter(alone);
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        let mut reuse = true;
        loop {
            enter(Phase::Loading);
            let workers = &self.workers;
            let mut pair = match reuse.then(|| workers.take_kept(task, slot)).flatten() {
                Some(kept) => kept,
                None => workers.take_pair(slot).map_err(Cause::Unready)?,
            };
            // Settled once the candidate has ended: the build folder goes back only then.
            let home = self.builder.build_dir(sub);
            let lent = lend(&self.confinement, home.clone(), pair.workspace.take())
                .map_err(Cause::Unready)?;
            // The submission's copy: in the candidate's own workspace where it has one (fresh,
            // out of every other candidate's sight), else in the exchange.
            let stage = match &lent {
                Some(lent) => lent.stage(&self.confinement).map_err(Cause::Unready)?,
                None => pair.exchange.stage(),
            };
            eval.logs = claim_logs(&self.config.out, sub, &mut pair.logs, pair.reused);
            let started = Instant::now();
            let env = self.builder.build_env(&home);
            let loads = workers.load(
                (task, sub),
                slot,
                (&mut pair.reference, &mut pair.candidate),
                (&stage, &env),
                workers.memo(task, pair.reused),
            );
            // A load that fails counts here too.
            eval.phases.load_s = started.elapsed().as_secs_f64();
            if pair.reused
                && matches!(
                    loads,
                    Err(Cause::ReferenceError(ReferenceStep::Load, _) | Cause::ReferenceDied(_))
                )
            {
                retire::<S>(pair, lent);
                reuse = false;
                continue;
            }
            if pair.reference.clean() {
                workers.top_up(task, slot, &pair.exchange, &mut pair.companions);
            }
            let judged = loads.and_then(|(constants, loaded)| {
                let kernels = load::record(eval, loaded);
                self.verify_and_time(job, &mut hold, &mut pair, &constants, kernels, eval)
            });
            self.end(job, pair, lent, eval);
            return judged;
        }
    }

    /// The evaluation's workers end: nothing the candidate could touch serves again until all
    /// of it has ended; then the build folder goes home and the reference is kept or ended
    /// (`Workers::keep`).
    fn end(&self, job: Job<'_>, pair: Pair<S::Worker>, lent: Option<Lent>, eval: &mut Gathered) {
        let Pair {
            reference,
            candidate,
            logs: [log, _],
            exchange,
            companions,
            ..
        } = pair;
        (job.enter)(Phase::Ending);
        let ending = Instant::now();
        let gone = S::finish(candidate);
        eval.phases.candidate_end_s = ending.elapsed().as_secs_f64();
        lent.into_iter().for_each(|l| l.settle(gone));
        let kept = (reference, log, exchange);
        self.workers
            .keep(job.task, job.slot, kept, companions, gone);
    }

    /// After the load: verify, time with the GPU alone, then the profiled call's evidence; a
    /// breach of the module contract found in verifying decides the verdict after them.
    fn verify_and_time(
        &self,
        job: Job<'_>,
        hold: &mut Hold<'_>,
        pair: &mut Pair<S::Worker>,
        constants: &serde_json::Map<String, serde_json::Value>,
        kernels: Vec<String>,
        eval: &mut Gathered,
    ) -> Result<Judged, Failed> {
        let Job {
            task,
            sub,
            slot,
            enter,
        } = job;
        let mut transport = stage::first_transport(self.config.device);
        let mut handover = Handover {
            reference: &mut pair.reference,
            candidate: &mut pair.candidate,
            transport: &mut transport,
            exchange: &pair.exchange,
            spent: TrialTimes::default(),
        };
        let mut breach = self.trials(task, hold, &mut handover, constants, eval, enter)?;

        enter(Phase::Waiting);
        hold.alone();
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        enter(Phase::Timing);
        let started = Instant::now();
        let static_output = eval
            .checks
            .iter()
            .any(|c| c.name == verify::INDEPENDENCE && c.outcome == Outcome::Fail);
        let mut timed = self.time(slot, &mut handover, eval, static_output);
        // A module that hands out one static output only once warm meets it in a burst (the
        // worker's one breach of the contract while timed): timed again one call per sample.
        if let (Err(Cause::Raised(e)), false) = (&timed, static_output) {
            if e.kind == ErrorKind::Contract {
                merge_check(&mut eval.checks, verify::independence_breach(&e.message));
                breach = breach.or(Some(e.message.clone()));
                timed = self.time(slot, &mut handover, eval, true);
            }
        }
        eval.phases.timing_s = started.elapsed().as_secs_f64();
        let judged = timed.and_then(|timing| {
            eval.timing = Some(timing);
            enter(Phase::Profiling);
            let started = Instant::now();
            let seen = build_seen(&self.confinement, &self.builder.build_dir(sub));
            let evidence = Evidence {
                config: self.config,
            };
            let (reference, candidate) = (&mut pair.reference, &mut pair.candidate);
            let judged = evidence.judge_profiled(task, &seen, reference, candidate, kernels, eval);
            eval.phases.after_timing_s = started.elapsed().as_secs_f64();
            judged
        });
        match breach {
            None => judged,
            Some(why) => Ok(decide::after_breach(why, judged)),
        }
    }

    /// The correctness trials and checks (`Verifier`), their time, and how outputs crossed
    /// (`harness.transfer`). A breach of the module contract with the values right stops no
    /// clock: KernelBench's contract allows it, so the evaluation is timed and profiled as a
    /// correct one is, and the breach (returned) decides the verdict after.
    fn trials(
        &self,
        task: &Task,
        hold: &mut Hold<'_>,
        handover: &mut Handover<'_, S::Worker>,
        constants: &serde_json::Map<String, serde_json::Value>,
        eval: &mut Gathered,
        enter: &dyn Fn(Phase),
    ) -> Result<Option<String>, Failed> {
        let cfg = self.config;
        enter(Phase::Trials);
        let started = Instant::now();
        let waited = hold.waited;
        let verifier = Verifier {
            config: cfg,
            facts: self.facts.get(&task.id),
        };
        let verified = verifier.verify(handover, hold, eval, constants);
        eval.phases.trials_candidate_s = handover.spent.candidate_s;
        eval.phases.trials_reference_s = handover.spent.reference_s;
        merge_check(
            &mut eval.checks,
            stage::transfer_check(cfg.device, handover.transport),
        );
        // Failed or not (a failing trial ends it); waits between steps count in `gpu_wait_s`,
        // not here: the phases do not overlap.
        eval.phases.correctness_s = started
            .elapsed()
            .saturating_sub(hold.waited - waited)
            .as_secs_f64();
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        match verified {
            Ok(()) => Ok(None),
            Err(Cause::Contract(why)) => Ok(Some(why)),
            Err(cause) => Err(cause),
        }
    }

    /// Timing with the GPU alone (`timing::Session`), one call per sample where the candidate
    /// hands out one static output (`single_calls`). The arms keep their timed outputs as the
    /// trials handed theirs over: on the GPU by CUDA IPC, else as files in the exchange.
    fn time(
        &self,
        slot: usize,
        handover: &mut Handover<'_, S::Worker>,
        eval: &mut Gathered,
        single_calls: bool,
    ) -> Result<Timing, Failed> {
        let cfg = self.config;
        let kept_files = (*handover.transport == "file").then(|| handover.exchange.seen());
        let mut session = timing::Session {
            config: cfg,
            reference: &mut *handover.reference,
            candidate: &mut *handover.candidate,
            gpu: self.gpus.get(slot).and_then(Option::as_ref),
            cpu: self.timing_cpus.get(slot).copied(),
            seed_base: Stream::Timing.seed(cfg.seed),
            kept_files,
            single_calls,
            spent: timing::Spent::default(),
        };
        let timed = session.run(&mut eval.checks);
        eval.phases.warmup_s = session.spent.warmup_s;
        eval.phases.output_checks_s = session.spent.output_checks_s;
        eval.phases.process_check_s = session.spent.process_check_s;
        eval.phases.pause_s = session.spent.pause_s;
        timed
    }
}

/// A kept reference that failed to load the task again: the pair's workers all end (the
/// candidate's first, then its build folder goes home) and the evaluation starts over.
fn retire<S: Spawner>(pair: Pair<S::Worker>, lent: Option<Lent>) {
    let gone = S::finish(pair.candidate);
    lent.into_iter().for_each(|l| l.settle(gone));
    S::finish(pair.reference);
    pair.companions.into_iter().for_each(|c| {
        S::finish(c.worker);
    });
}
