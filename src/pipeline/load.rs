//! The evaluations' workers (`Workers`), and the load: per slot a queue of reference and
//! candidate worker pairs started ahead of need (`take_pair`, `refill`), a candidate worker
//! alone (`start_candidate`), the reference workers kept for a task's next candidates with the
//! candidate workers started beside them (`take_kept`, `keep`, `top_up`, `arm_next`, as
//! `reuse`'s bookkeeping says), and the load of the task in the reference worker and of the
//! submission in the candidate, at once (or of both in the candidate alone, for KernelBench's
//! eval: `load_kernelbench`). Every worker starts (through the `Launcher`) and ends here. Sizes
//! the task as the run asks (`sizing`). Runs no trial.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::config::{Config, Device};
use crate::record::merge_check;
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;
use crate::timing::Failed;
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::Load;
use crate::worker::{Link, Reply, Spawn};

use super::gathered::Gathered;
use super::pair::{Companion, Pair};
use super::replies::Loaded;
use super::reuse::{Kept, Reuse};
use super::sizing::{self, sizing};
use super::spawn::{Launcher, Spawner};
use super::stage::{ask, exchange, stage_submission, Exchange, Stage};
use super::workspace::{workspace, Workspace};

/// How a candidate worker with no reference beside it loads (`Workers::load_alone`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Alone {
    /// As KernelBench's eval loads the task and the submission, for its trials
    /// (`kernelbench.environment`).
    Kernelbench,
    /// As kbench's trials do, at the task's small size (the sanitizer's trial).
    Small,
    /// As kbench's trials do, at the size the run gives them (the kernel profiler's call).
    Sized,
}

/// The evaluations' workers: per slot a pool of pairs started ahead of need, the reference
/// workers kept for their tasks' next candidates (`Reuse`), and the loads. Every worker is
/// started and ended here.
pub(super) struct Workers<'a, S: Spawner> {
    pub config: &'a Config,
    pub launcher: Launcher<'a, S>,
    /// How the candidate workers are confined (`--sandbox`).
    pub confinement: Confinement,
    /// Per slot, reference and candidate workers started ahead of need (Python, torch and the
    /// CUDA context take seconds), each candidate worker used for one evaluation only.
    ready: Vec<Mutex<VecDeque<Pair<S::Worker>>>>,
    /// Reference workers kept for their tasks' next candidates, and what decides it (`reuse`).
    pub reuse: Reuse<S::Worker>,
    /// The run's evaluations not yet started, as `expect` counted them: the pool starts no pair
    /// that none would take (`refill`). None where never told (a service's come as they come).
    to_start: Mutex<Option<usize>>,
    started: AtomicUsize,
    /// Facts of the tasks (input-only constants, degenerate flags), where they could be derived.
    facts: &'a HashMap<TaskId, TaskFacts>,
}

impl<'a, S: Spawner> Workers<'a, S> {
    /// No worker started yet; a task's reference worker serves its next candidates where
    /// `reuse` (only when candidates run confined).
    pub(super) fn new(
        launcher: Launcher<'a, S>,
        confinement: Confinement,
        facts: &'a HashMap<TaskId, TaskFacts>,
        reuse: bool,
    ) -> Self {
        let config = launcher.config;
        Workers {
            config,
            launcher,
            confinement,
            ready: (0..config.slots())
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            reuse: Reuse::new(reuse, config.slots()),
            to_start: Mutex::default(),
            started: AtomicUsize::new(0),
            facts,
        }
    }

    /// The run's evaluations, before any starts: the pools start the pairs they will take.
    pub(super) fn expect(&self, work: &[(Task, Submission)]) {
        self.reuse.expect_work(work);
        *self.to_start.lock().expect("pool lock") = Some(work.len());
        if !work.is_empty() {
            (0..self.config.slots()).for_each(|slot| self.refill(slot));
        }
    }

    /// A service's request for `task` admitted: one more evaluation of it to come, for which a
    /// reference worker is kept (`Reuse`).
    pub(super) fn expect_one(&self, task: &Task) {
        self.reuse.expect_one(task);
    }

    /// One evaluation of `task` starts: one fewer to come.
    pub(super) fn starting(&self, task: &Task) {
        if let Some(left) = self.to_start.lock().expect("pool lock").as_mut() {
            *left = left.saturating_sub(1);
        }
        self.reuse.starting(task);
    }

    /// Whether the reference keeps its outputs for the task's other candidates (`Reuse::memo`).
    pub(super) fn memo(&self, task: &Task, reused: bool) -> bool {
        self.reuse.memo(task, reused, self.facts.get(&task.id))
    }

    /// The environment that shows a worker of `slot` its GPU. GPU indices are NVML's (PCI bus
    /// order), so telemetry reads the GPU the worker uses.
    fn device_env(&self, slot: usize) -> Vec<(String, String)> {
        let visible = match self.config.device {
            Device::Cuda => self.config.gpus[slot].to_string(),
            Device::Cpu => String::new(),
        };
        vec![
            ("CUDA_VISIBLE_DEVICES".into(), visible),
            ("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()),
        ]
    }

    /// A provisional log file for a worker of `role`.
    fn provisional_log(&self, role: &str) -> PathBuf {
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        self.config.out.join(format!("logs/.worker-{n}.{role}.log"))
    }

    /// Start a reference and a candidate worker for `slot`, logging to provisional files.
    fn start_pair(&self, slot: usize) -> Result<Pair<S::Worker>, String> {
        let log = self.provisional_log("reference");
        let exchange = exchange(&self.confinement)?;
        let shared = exchange.dir.path();
        let reference = self.launcher.spec("reference", &log, self.device_env(slot));
        let reference = self
            .launcher
            .start(&self.confinement.beside(&reference, shared))?;
        let candidate = self.start_candidate(slot, &exchange)?;
        Ok(Pair {
            reference,
            candidate: candidate.worker,
            logs: [log, candidate.log],
            exchange,
            workspace: candidate.workspace,
            reused: false,
            companions: VecDeque::new(),
        })
    }

    /// Start a candidate worker for `slot` that shares `exchange` with its reference, in a
    /// workspace of its own (the only other folder it writes: not the builds folder).
    pub(super) fn start_candidate(
        &self,
        slot: usize,
        exchange: &Exchange,
    ) -> Result<Companion<S::Worker>, String> {
        self.start_wrapped(slot, exchange, |spec| spec)
    }

    /// `start_candidate`, its command line made by `wrap` from the plain one (a tool that runs
    /// the worker: the sanitizer), confined as any candidate.
    pub(super) fn start_wrapped(
        &self,
        slot: usize,
        exchange: &Exchange,
        wrap: impl FnOnce(Spawn) -> Spawn,
    ) -> Result<Companion<S::Worker>, String> {
        let log = self.provisional_log("candidate");
        let workspace = workspace(&self.config.cache, &self.confinement)?;
        let writable: Vec<_> = workspace.iter().map(Workspace::bind).collect();
        let spec = wrap(self.launcher.spec("candidate", &log, self.device_env(slot)));
        let wrapped = self
            .confinement
            .wrap(&spec, &writable, Some(exchange.dir.path()));
        Ok(Companion {
            worker: self.launcher.start(&wrapped)?,
            log,
            workspace,
        })
    }

    /// A reference worker's command line for `slot`, logging to `log`, for a tool to run it
    /// (the kernel profiler); started by the caller, unconfined as every reference worker's own
    /// process is when no candidate shares its /dev/shm.
    pub(super) fn reference_spec(&self, slot: usize, log: &Path) -> Spawn {
        self.launcher.spec("reference", log, self.device_env(slot))
    }

    /// Load the task, as the run sizes it, in `reference` alone (no memo: nothing it computes is
    /// kept for another candidate).
    pub(super) fn load_reference(
        &self,
        task: &Task,
        reference: &mut S::Worker,
    ) -> Result<(), Failed> {
        let loaded = ask(
            reference,
            self.load_request(task),
            self.config.timeouts.load,
        );
        loaded.map(drop)
    }

    /// The slot's oldest waiting pair, or a new one; the next waiting pair gets its candidate
    /// workers (`arm_next`).
    pub(super) fn take_pair(&self, slot: usize) -> Result<Pair<S::Worker>, String> {
        let waiting = self.ready[slot]
            .lock()
            .expect("worker pool lock")
            .pop_front();
        self.arm_next(slot);
        waiting.map_or_else(|| self.start_pair(slot), Ok)
    }

    /// Start the slot's next pairs now, so they warm up while this evaluation runs (and before
    /// the run's first: `Backend::expect`). Start-up (~8 s on an H100 host, torch._dynamo's
    /// import included) outlasts a short evaluation (~3 s), so on a GPU two pairs per lane and
    /// two more wait; on a CPU one, since starting workers competes with the evaluation for the
    /// same cores. Never more than the run has evaluations left to start: a pair none takes
    /// costs two start-ups' CPU. The next pair gets its candidate workers (`arm_next`).
    pub(super) fn refill(&self, slot: usize) {
        let wanted = match *self.to_start.lock().expect("pool lock") {
            Some(left) => left.min(self.pairs_ahead()),
            None => self.pairs_ahead(),
        };
        while self.ready[slot].lock().expect("worker pool lock").len() < wanted {
            match self.start_pair(slot) {
                Ok(pair) => self.ready[slot]
                    .lock()
                    .expect("worker pool lock")
                    .push_back(pair),
                Err(_) => break,
            }
        }
        self.arm_next(slot);
    }

    /// How many pairs the slot's pool holds (`refill`).
    pub(super) fn pairs_ahead(&self) -> usize {
        match self.config.device {
            Device::Cuda => 2 + 2 * self.config.lanes,
            Device::Cpu => 1,
        }
    }

    /// A load request for the task, as the run sizes and judges it (the reference's: no submission).
    fn load_request(&self, task: &Task) -> Load {
        let cfg = self.config;
        let (scale, set) = sizing(cfg, self.facts.get(&task.id));
        Load {
            task: task.path.clone(),
            scale,
            set,
            device: cfg.device.torch_name().into(),
            precision: cfg.precision.into(),
            atol: cfg.atol,
            rtol: cfg.rtol,
            submission: None,
            env: None,
            kernelbench: false,
            memo: false,
        }
    }

    /// The candidate's load request: the task, and the submission staged in `stage` with its
    /// build environment `env`.
    fn candidate_load(
        &self,
        task: &Task,
        sub: &Submission,
        stage: &Stage,
        env: &[(String, String)],
    ) -> Result<Load, Failed> {
        let staged =
            stage_submission(sub, stage, self.config.staged_rewrite()).map_err(Cause::Unready)?;
        Ok(Load {
            submission: Some(staged.0),
            env: Some(env.iter().cloned().collect()),
            ..self.load_request(task)
        })
    }

    /// Load the task in the reference worker (keeping its outputs for the task's other
    /// candidates where `memo`) and the submission in the candidate, at once; the reference's
    /// failure decides first (it is not the submission's fault). The submission's build
    /// environment is `env`. Returns the task's constants and the candidate's reply.
    pub(super) fn load(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        (reference, candidate): (&mut S::Worker, &mut S::Worker),
        (stage, env): (&Stage, &[(String, String)]),
        memo: bool,
    ) -> Result<(Map<String, Value>, Loaded), Failed> {
        let cfg = self.config;
        let load = Load {
            memo,
            ..self.load_request(task)
        };
        let cand_load = self.candidate_load(task, sub, stage, env)?;
        let loads = std::thread::scope(|s| {
            let r = s.spawn(|| reference.request(load, cfg.timeouts.load));
            let c = candidate.request(cand_load, cfg.timeouts.load + cfg.timeouts.compile);
            (r.join().expect("reference load thread"), c)
        });
        self.refill(slot);
        let constants = match loads.0 {
            Ok(Reply::Ok(v)) => v.constants,
            Ok(Reply::Err(e)) => return Err(Cause::ReferenceError(ReferenceStep::Load, e)),
            Err(f) => return Err(Cause::ReferenceDied(f)),
        };
        match loads.1 {
            Ok(Reply::Ok(v)) => Ok((constants, v)),
            Ok(Reply::Err(e)) => Err(Cause::Raised(e)),
            Err(f) => Err(Cause::Silent(f)),
        }
    }

    /// Load the task and the submission in `candidate` alone, no reference worker taking part,
    /// as `alone` says. The submission's build environment is `env`.
    pub(super) fn load_alone(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        candidate: &mut S::Worker,
        (stage, env): (&Stage, &[(String, String)]),
        alone: Alone,
    ) -> Result<(), Failed> {
        let cfg = self.config;
        let load = self.candidate_load(task, sub, stage, env)?;
        let load = match alone {
            Alone::Kernelbench => Load {
                kernelbench: true,
                ..load
            },
            Alone::Small => {
                let (scale, set) = sizing::small(cfg, self.facts.get(&task.id));
                Load { scale, set, ..load }
            }
            Alone::Sized => load,
        };
        let loaded = ask(candidate, load, cfg.timeouts.load + cfg.timeouts.compile);
        self.refill(slot);
        loaded.map(|_| ())
    }

    /// Whether the task's small size (`Alone::Small`) is another than the run's (`Alone::Sized`).
    pub(super) fn small_is_another(&self, task: &Task) -> bool {
        let facts = self.facts.get(&task.id);
        sizing::small(self.config, facts) != sizing(self.config, facts)
    }

    /// The slot's kept reference for `task`, as a pair with a fresh candidate worker beside it
    /// (the oldest companion, else one started now) and the other companions, its exchange
    /// emptied of what earlier candidates left there. Before that, the slot's other kept
    /// references beyond what its other lanes may still use (one each), and those whose task
    /// has no evaluation to come, are ended: they hold GPU memory.
    pub(super) fn take_kept(&self, task: &Task, slot: usize) -> Option<Pair<S::Worker>> {
        let (mine, retired) = self.reuse.take(task, slot, self.config.lanes);
        retired.into_iter().for_each(|k| self.end_kept(k));
        let mine = mine?;
        if mine.exchange.clear().is_err() {
            self.end_kept(mine);
            return None;
        }
        let Kept {
            reference,
            log,
            exchange,
            mut companions,
            ..
        } = mine;
        let first = match companions.pop_front() {
            Some(c) => c,
            None => match self.start_candidate(slot, &exchange) {
                Ok(c) => c,
                Err(_) => {
                    let _ = S::finish(reference);
                    return None;
                }
            },
        };
        Some(Pair {
            reference,
            candidate: first.worker,
            logs: [log, first.log],
            exchange,
            workspace: first.workspace,
            reused: true,
            companions,
        })
    }

    /// After an evaluation: keep its reference worker (with the `companions` started beside it)
    /// for the task's next candidate on the slot where `Reuse::keep` keeps it (`gone`: every
    /// process of the candidate is known to have ended); else end them all.
    pub(super) fn keep(
        &self,
        task: &Task,
        slot: usize,
        (reference, log, exchange): (S::Worker, PathBuf, Exchange),
        companions: VecDeque<Companion<S::Worker>>,
        gone: bool,
    ) {
        let kept = Kept {
            task: task.path.clone(),
            reference,
            log,
            exchange,
            companions,
        };
        if let Some(unkept) = self.reuse.keep(kept, slot, gone) {
            self.end_kept(unkept);
        }
    }

    /// Start candidate workers beside the reference that `exchange` belongs to, while this
    /// evaluation runs (start-up takes seconds), until `companions` holds one for each of the
    /// task's evaluations still to start, at most as many as `ahead` allows.
    pub(super) fn top_up(
        &self,
        task: &Task,
        slot: usize,
        exchange: &Exchange,
        companions: &mut VecDeque<Companion<S::Worker>>,
    ) {
        let left = self.reuse.left(task);
        while companions.len() < left.min(self.ahead()) {
            match self.start_candidate(slot, exchange) {
                Ok(c) => companions.push_back(c),
                Err(_) => break,
            }
        }
    }

    /// Start candidate workers beside the slot's next pool pair (the one `take_pair` gives out
    /// next), as many as `Reuse::armed` says: the task that takes that pair has its second
    /// candidate one evaluation (~3 s) after its first, before a worker started then is up
    /// (~8 s).
    pub(super) fn arm_next(&self, slot: usize) {
        let want = self.reuse.armed(self.ahead());
        let mut ready = self.ready[slot].lock().expect("worker pool lock");
        let Some(next) = ready.front_mut() else {
            return;
        };
        while next.companions.len() < want {
            match self.start_candidate(slot, &next.exchange) {
                Ok(c) => next.companions.push_back(c),
                Err(_) => break,
            }
        }
    }

    /// How many candidate workers wait beside a kept reference: as many as the slot's pool
    /// holds pairs on a GPU (`refill`), where start-up (~8 s) outlasts a short evaluation
    /// (~3 s); two on a CPU, the processes of the one pair its pool holds.
    fn ahead(&self) -> usize {
        match self.config.device {
            Device::Cuda => self.pairs_ahead(),
            Device::Cpu => 2,
        }
    }

    fn end_kept(&self, kept: Kept<S::Worker>) {
        let _ = S::finish(kept.reference);
        kept.companions.into_iter().for_each(|c| {
            let _ = S::finish(c.worker);
        });
    }
}

/// What the candidate's load tells the record (its start-up, what it compiled itself, its
/// checks); the kernels it reports, for the evidence after timing.
pub(super) fn record(eval: &mut Gathered, loaded: Loaded) -> Vec<String> {
    eval.phases.worker_startup_s = loaded.startup_s;
    eval.slot_compiled(loaded.compiled);
    for check in loaded.checks {
        merge_check(&mut eval.checks, check);
    }
    loaded.kernels
}
