//! One evaluation, (task, submission) on one device, through the Python workers, top to bottom.
//! The compile pool builds each submission first (`build`). Then, per evaluation: a pair of
//! fresh workers loads the task (the reference worker, trusted) and the submission (the candidate
//! worker, untrusted) (`load`); correctness trials and checks (`verify`); timing
//! (`timing::Session`: a breach of the module contract with the values right does not stop the
//! clock, so `contract` evaluations are timed too); one profiled call that shows whether a
//! kernel of the submission's own ran (`evidence`); the verdict (`decide`); and, last, what the
//! run adds from outside the workers (`annotate`), so the `Evaluation` is final when the backend
//! returns it. Files and outputs travel between the workers through `stage`.
//!
//! Everything that can go wrong in submission code ends as a `Cause`, which `verdict.rs` decides
//! into a `Verdict`, never as an `Err`. This file holds the sequence and nothing of a stage's
//! work; scheduling (which evaluation runs when and where) is `schedule`'s.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
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
use crate::worker::{Link, Spawn, Stream, Worker};

mod annotate;
mod build;
mod decide;
mod evidence;
mod kernelbench;
mod load;
mod replies;
mod reuse;
mod stage;
mod verify;
mod workspace;

#[cfg(test)]
mod tests;

pub use annotate::Annotations;

use evidence::Judged;
use load::Pair;
use reuse::{KeptSlots, Left};
use stage::{Handover, TrialTimes};

/// What a running evaluation is doing, told to its caller as it enters each phase
/// (`Backend::evaluate`) for progress only: nothing is decided from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the slot's gate: other lanes' steps, or their timings before timing alone.
    Waiting,
    /// Taking a pair of workers (starting them where none waits), loading task and submission
    /// and constructing both models.
    Loading,
    /// The correctness trials and their checks.
    Trials,
    /// Timing, with the device alone.
    Timing,
    /// After timing: the candidate's state checks and both workers' profiled calls.
    Profiling,
    /// Ending the candidate's worker and everything it started.
    Ending,
    /// KernelBench's eval as KernelBench runs it, in a fresh worker (`--kernelbench-eval`).
    Kernelbench,
}

impl Phase {
    /// The phase in words, as progress shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting for the device",
            Phase::Loading => "loading",
            Phase::Trials => "correctness trials",
            Phase::Timing => "timing",
            Phase::Profiling => "profiling",
            Phase::Ending => "ending its workers",
            Phase::Kernelbench => "KernelBench's eval",
        }
    }
}

/// Runs compile and evaluation steps; the scheduler is generic over it so it can be tested
/// with a scripted fake.
pub trait Backend: Sync {
    /// The run's evaluations, before any starts (a backend may keep what one task's
    /// evaluations share for the next).
    fn expect(&self, _work: &[(Task, Submission)]) {}
    fn compile(&self, task: &Task, submission: &Submission) -> Build;
    /// Evaluate on `slot` (an index into the configured devices), calling `enter` as the
    /// evaluation enters each `Phase`.
    fn evaluate(
        &self,
        task: &Task,
        submission: &Submission,
        build: &Build,
        slot: usize,
        enter: &dyn Fn(Phase),
    ) -> Evaluation;
    /// The evaluation `cause` decides where the backend's own stages gave no result (a stage
    /// abandoned, a service that stopped first), with the `build` where it got that far; no
    /// worker runs.
    fn gave_up(
        &self,
        task: &Task,
        submission: &Submission,
        build: Option<&Build>,
        cause: &Cause,
    ) -> Evaluation {
        let mut eval = Evaluation {
            build: build.cloned(),
            ..decide::early(task, submission)
        };
        decide::conclude(&mut eval, cause);
        eval
    }
    /// Later evaluations on `slot` share nothing with those before: one was abandoned there
    /// and may never let go of what it holds.
    fn replace_slot(&self, _slot: usize) {}
}

/// How the backend starts its workers: processes (`Processes`), or in tests scripted workers.
pub trait Spawner: Sync {
    type Worker: Link + Send;
    /// Start the worker `spec` describes.
    fn spawn(&self, spec: &Spawn) -> std::io::Result<Self::Worker>;
    /// Ask `worker` to exit, and make sure it has: whether every process it started is known to
    /// have ended (`Worker::finish`).
    fn finish(worker: Self::Worker) -> bool;
}

/// Worker processes: the real backend's workers.
pub struct Processes;

impl Spawner for Processes {
    type Worker = Worker;

    fn spawn(&self, spec: &Spawn) -> std::io::Result<Worker> {
        Worker::spawn(spec)
    }

    fn finish(worker: Worker) -> bool {
        worker.finish()
    }
}

/// The real backend: Python workers (processes, unless a test scripts them).
pub struct Python<'a, S: Spawner = Processes> {
    config: &'a Config,
    spawner: S,
    /// Folder holding the embedded `kbench_worker` package.
    worker_path: PathBuf,
    /// torch version and GPU architectures: part of every build's cache key.
    build_key: String,
    /// The key that authenticates the cache's build records.
    cache_key: CacheKey,
    /// Per slot, reference and candidate workers started ahead of need (Python, torch and the
    /// CUDA context take seconds), each candidate worker used for one evaluation only.
    ready: Vec<Mutex<VecDeque<Pair<S::Worker>>>>,
    /// Whether a task's reference worker may serve its next candidates (`reuse`): only when
    /// candidates run confined.
    reuse: bool,
    /// Per slot, reference workers kept for their tasks' next candidates (`reuse`).
    kept: KeptSlots<S::Worker>,
    /// Per task, the evaluations still to start (`reuse`).
    left: Left,
    /// The run's evaluations not yet started, as `expect` counted them: the pool starts no pair
    /// that none would take (`refill`). None where never told (a service's come as they come).
    to_start: Mutex<Option<usize>>,
    started: AtomicUsize,
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
        (build_key, cache_key): (String, CacheKey),
        facts: &'a HashMap<TaskId, TaskFacts>,
        timing_cpus: Vec<usize>,
        confinement: Confinement,
        annotations: Annotations,
    ) -> Python<'a> {
        Python {
            config,
            spawner: Processes,
            worker_path,
            build_key,
            cache_key,
            ready: (0..config.slots())
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            reuse: confinement.confines(),
            kept: (0..config.slots()).map(|_| Mutex::default()).collect(),
            left: Left::default(),
            to_start: Mutex::default(),
            started: AtomicUsize::new(0),
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
}

impl<S: Spawner> Python<'_, S> {
    /// What the run adds to each evaluation (a `serve` request's file adds its findings).
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }
}

/// How one evaluation ended: what it recorded, the cause that decides its verdict, and the
/// host-speed error its timing's label may allow (`evidence`), applied in `annotate`.
struct Ended {
    eval: Evaluation,
    cause: Cause,
    host_error: Option<f64>,
}

impl<S: Spawner> Backend for Python<'_, S> {
    fn expect(&self, work: &[(Task, Submission)]) {
        self.expect_work(work);
        *self.to_start.lock().expect("pool lock") = Some(work.len());
        if !work.is_empty() {
            (0..self.config.slots()).for_each(|slot| self.refill(slot));
        }
    }

    fn compile(&self, task: &Task, submission: &Submission) -> Build {
        self.build(task, submission)
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
        self.starting(task);
        let Ended {
            mut eval,
            cause,
            host_error,
        } = match decide::build_failure(build).or_else(|| self.too_large(task)) {
            Some(cause) => Ended {
                eval: self.fresh(task, submission, build),
                cause,
                host_error: None,
            },
            None => self.attempts(task, submission, build, slot, enter),
        };
        self.kernelbench_environment(task, submission, slot, &mut eval, enter);
        decide::conclude(&mut eval, &cause);
        eval.seconds = started.elapsed().as_secs_f64();
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
        let mut eval = Evaluation {
            sandbox: self.confinement.label.clone(),
            build: build.cloned(),
            ..decide::early(task, submission)
        };
        decide::conclude(&mut eval, cause);
        let facts = self.facts.get(&task.id);
        self.annotations.apply(&mut eval, facts, self.config, None);
        eval
    }

    fn replace_slot(&self, slot: usize) {
        *self.gates[slot].lock().expect("gate lock") = Arc::default();
    }
}

impl<S: Spawner> Python<'_, S> {
    /// An evaluation of a built submission before any worker ran.
    fn fresh(&self, task: &Task, submission: &Submission, build: &Build) -> Evaluation {
        Evaluation {
            sandbox: self.confinement.label.clone(),
            build: Some(build.clone()),
            ..decide::early(task, submission)
        }
    }

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

    /// The workers' evaluation, beside the other lanes or alone; out of GPU memory beside another
    /// lane is not the submission's fault until it runs out alone, so it runs once more alone.
    fn attempts(
        &self,
        task: &Task,
        sub: &Submission,
        build: &Build,
        slot: usize,
        enter: &dyn Fn(Phase),
    ) -> Ended {
        let attempt = |alone| {
            let mut eval = self.fresh(task, sub, build);
            let (cause, host_error) =
                match self.run_workers(task, sub, slot, alone, enter, &mut eval) {
                    Ok(judged) => (judged.cause, judged.host_error),
                    Err(cause) => (cause, None),
                };
            Ended {
                eval,
                cause,
                host_error,
            }
        };
        let alone = self.alone(task);
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
        task: &Task,
        sub: &Submission,
        slot: usize,
        alone: bool,
        enter: &dyn Fn(Phase),
        eval: &mut Evaluation,
    ) -> Result<Judged, Failed> {
        // Before the workers: dropped after them, once their GPU memory is freed.
        let gate = self.gate(slot);
        enter(Phase::Waiting);
        let mut hold = gate.enter(alone);
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        let mut reuse = true;
        loop {
            enter(Phase::Loading);
            let mut pair = match reuse.then(|| self.take_kept(task, slot)).flatten() {
                Some(kept) => kept,
                None => self.take_pair(slot).map_err(Cause::Unready)?,
            };
            // Settled once the candidate has ended: the build folder goes back only then.
            let lent = self
                .lend(sub, pair.workspace.take())
                .map_err(Cause::Unready)?;
            // The submission's copy: in the candidate's own workspace where it has one (fresh,
            // out of every other candidate's sight), else in the exchange.
            let stage = match &lent {
                Some(lent) => lent.stage(self).map_err(Cause::Unready)?,
                None => pair.exchange.stage(),
            };
            eval.logs = self.claim_logs(sub, &mut pair.logs, pair.reused);
            let started = Instant::now();
            let loads = self.load(
                (task, sub),
                slot,
                (&mut pair.reference, &mut pair.candidate),
                &stage,
                self.memo(task, pair.reused),
            );
            // A load that fails counts here too.
            eval.phases.load_s = started.elapsed().as_secs_f64();
            if pair.reused
                && matches!(
                    loads,
                    Err(Cause::ReferenceError(ReferenceStep::Load, _) | Cause::ReferenceDied(_))
                )
            {
                let gone = S::finish(pair.candidate);
                lent.into_iter().for_each(|l| l.settle(gone));
                S::finish(pair.reference);
                pair.companions.into_iter().for_each(|c| {
                    S::finish(c.worker);
                });
                reuse = false;
                continue;
            }
            if pair.reference.clean() {
                self.top_up(task, slot, &pair.exchange, &mut pair.companions);
            }
            let judged = loads.and_then(|(constants, loaded)| {
                let kernels = load::record(eval, loaded);
                self.verify_and_time(
                    task, sub, slot, &mut hold, enter, &mut pair, &constants, kernels, eval,
                )
            });
            let Pair {
                reference,
                candidate,
                logs: [log, _],
                exchange,
                companions,
                ..
            } = pair;
            // Nothing the candidate could touch serves again until all of it has ended.
            enter(Phase::Ending);
            let ending = Instant::now();
            let gone = S::finish(candidate);
            eval.phases.candidate_end_s = ending.elapsed().as_secs_f64();
            lent.into_iter().for_each(|l| l.settle(gone));
            self.keep(task, slot, (reference, log, exchange), companions, gone);
            return judged;
        }
    }

    /// After the load: verify, time with the GPU alone, then the profiled call's evidence; a
    /// breach of the module contract found in verifying decides the verdict after them.
    #[allow(clippy::too_many_arguments)]
    fn verify_and_time(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        hold: &mut Hold<'_>,
        enter: &dyn Fn(Phase),
        pair: &mut Pair<S::Worker>,
        constants: &serde_json::Map<String, serde_json::Value>,
        kernels: Vec<String>,
        eval: &mut Evaluation,
    ) -> Result<Judged, Failed> {
        let cfg = self.config;
        enter(Phase::Trials);
        let started = Instant::now();
        let waited = hold.waited;
        let mut transport = stage::first_transport(cfg.device);
        let mut handover = Handover {
            reference: &mut pair.reference,
            candidate: &mut pair.candidate,
            transport: &mut transport,
            exchange: &pair.exchange,
            spent: TrialTimes::default(),
        };
        let verified = self.verify(task, &mut handover, hold, eval, constants);
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
        // A breach of the module contract with the values right stops no clock: KernelBench's
        // contract allows it, so the evaluation is timed and profiled as a correct one is, and
        // the breach decides the verdict after.
        let mut breach = match verified {
            Ok(()) => None,
            Err(Cause::Contract(why)) => Some(why),
            Err(cause) => return Err(cause),
        };

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
            let judged = self.judge_profiled(
                task,
                sub,
                &mut pair.reference,
                &mut pair.candidate,
                kernels,
                eval,
            );
            eval.phases.after_timing_s = started.elapsed().as_secs_f64();
            judged
        });
        match breach {
            None => judged,
            Some(why) => Ok(decide::after_breach(why, judged)),
        }
    }

    /// Timing with the GPU alone (`timing::Session`), one call per sample where the candidate
    /// hands out one static output (`single_calls`). The arms keep their timed outputs as the
    /// trials handed theirs over: on the GPU by CUDA IPC, else as files in the exchange.
    fn time(
        &self,
        slot: usize,
        handover: &mut Handover<'_, S::Worker>,
        eval: &mut Evaluation,
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
