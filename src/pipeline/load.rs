//! Workers for evaluations, and the load: per slot a queue of reference and candidate worker
//! pairs started ahead of need (`take_pair`, `refill`), a candidate worker alone
//! (`start_candidate`), and the load of the task in the reference worker and of the submission
//! in the candidate, at once (or of both in the candidate alone, for KernelBench's eval:
//! `load_kernelbench`). Sizes the task as the run asks (`sizing`). Runs no trial.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use crate::config::Device;
use crate::record::{merge_check, Evaluation};
use crate::submission::Submission;
use crate::task::Task;
use crate::timing::Failed;
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::Load;
use crate::worker::{Link, Reply, Spawn};

use super::replies::Loaded;
use super::stage::{ask, stage_submission, Exchange, Stage};
use super::workspace::Workspace;
use super::{Python, Spawner};

/// A reference and a candidate worker and the logs they write until an evaluation claims them.
pub(super) struct Pair<W> {
    pub reference: W,
    pub candidate: W,
    pub logs: [PathBuf; 2],
    pub exchange: Exchange,
    /// The candidate's workspace, where the evaluation lends its build (`lend`); none when
    /// unconfined.
    pub workspace: Option<Workspace>,
    /// The reference served an earlier candidate of the task (`reuse`).
    pub reused: bool,
    /// Candidate workers started beside the reference for the task's later candidates
    /// (`reuse`); none in a fresh pair.
    pub companions: VecDeque<Companion<W>>,
}

/// A candidate worker started for a later evaluation, with its log and workspace.
pub(super) struct Companion<W> {
    pub worker: W,
    pub log: PathBuf,
    pub workspace: Option<Workspace>,
}

impl<S: Spawner> Python<'_, S> {
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
        let exchange = self.exchange()?;
        let shared = exchange.dir.path();
        let reference = self.spec("reference", &log, self.device_env(slot));
        let reference = self.start(&self.confinement.beside(&reference, shared))?;
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
        let log = self.provisional_log("candidate");
        let workspace = self.workspace()?;
        let writable: Vec<_> = workspace.iter().map(Workspace::bind).collect();
        let spec = self.spec("candidate", &log, self.device_env(slot));
        let wrapped = self
            .confinement
            .wrap(&spec, &writable, Some(exchange.dir.path()));
        Ok(Companion {
            worker: self.start(&wrapped)?,
            log,
            workspace,
        })
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

    /// How to start a worker of `role`, before confinement (`Confinement::wrap`, `beside`).
    pub(super) fn spec(&self, role: &str, log: &Path, env: Vec<(String, String)>) -> Spawn {
        let mut spec = Spawn::role(
            &self.config.python,
            &self.worker_path,
            role,
            log.to_path_buf(),
            self.config.out.clone(),
        );
        spec.env.extend(env);
        spec
    }

    pub(super) fn start(&self, spec: &Spawn) -> Result<S::Worker, String> {
        self.spawner
            .spawn(spec)
            .map_err(|e| format!("start a worker with {}: {e}", self.config.python))
    }

    /// The task's size in this run: `--scale` and `--set`, except that in a tree without a
    /// `scale.toml` the small size derived in the task's facts stands in for `--scale small`
    /// (`--set` still wins).
    pub(super) fn sizing(&self, task: &Task) -> (Option<String>, Map<String, Value>) {
        let cfg = self.config;
        match self.facts.get(&task.id) {
            Some(f)
                if cfg.scale.as_deref() == Some("small")
                    && f.small_size.as_deref() == Some("derived") =>
            {
                let mut set = f.small_overrides.clone();
                set.extend(cfg.sets.clone());
                (None, set)
            }
            _ => (cfg.scale.clone(), cfg.sets.clone()),
        }
    }

    /// A load request for the task, as the run sizes and judges it (the reference's: no submission).
    fn load_request(&self, task: &Task) -> Load {
        let cfg = self.config;
        let (scale, set) = self.sizing(task);
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
    /// build environment.
    fn candidate_load(&self, task: &Task, sub: &Submission, stage: &Stage) -> Result<Load, Failed> {
        let staged =
            stage_submission(sub, stage, self.config.staged_rewrite()).map_err(Cause::Unready)?;
        Ok(Load {
            submission: Some(staged.0),
            env: Some(self.build_env(&self.build_dir(sub)).into_iter().collect()),
            ..self.load_request(task)
        })
    }

    /// Load the task in the reference worker (keeping its outputs for the task's other
    /// candidates where `memo`) and the submission in the candidate, at once; the reference's
    /// failure decides first (it is not the submission's fault). Returns the task's constants
    /// and the candidate's reply.
    pub(super) fn load(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        (reference, candidate): (&mut S::Worker, &mut S::Worker),
        stage: &Stage,
        memo: bool,
    ) -> Result<(Map<String, Value>, Loaded), Failed> {
        let cfg = self.config;
        let load = Load {
            memo,
            ..self.load_request(task)
        };
        let cand_load = self.candidate_load(task, sub, stage)?;
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

    /// Load the task and the submission in `candidate` as KernelBench's eval loads them, for
    /// its trials alone (`kernelbench.environment`); no reference worker takes part.
    pub(super) fn load_kernelbench(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        candidate: &mut S::Worker,
        stage: &Stage,
    ) -> Result<(), Failed> {
        let cfg = self.config;
        let load = Load {
            kernelbench: true,
            ..self.candidate_load(task, sub, stage)?
        };
        let loaded = ask(candidate, load, cfg.timeouts.load + cfg.timeouts.compile);
        self.refill(slot);
        loaded.map(|_| ())
    }
}

/// What the candidate's load tells the record (its start-up, what it compiled itself, its
/// checks); the kernels it reports, for the evidence after timing.
pub(super) fn record(eval: &mut Evaluation, loaded: Loaded) -> Vec<String> {
    eval.phases.worker_startup_s = loaded.startup_s;
    slot_compiled(eval, loaded.compiled);
    for check in loaded.checks {
        merge_check(&mut eval.checks, check);
    }
    loaded.kernels
}

/// What the candidate compiled itself so far (`compiled` in its load and trial replies): a
/// build the pool missed; empty when the slot only loaded.
pub(super) fn slot_compiled(eval: &mut Evaluation, compiled: Option<Vec<String>>) {
    if let (Some(build), Some(names)) = (eval.build.as_mut(), compiled) {
        build.slot_compiled = Some(names);
    }
}
