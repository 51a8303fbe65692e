//! One evaluation, (task, submission) on one device, through the Python workers: the compile
//! worker builds, the reference worker (trusted) makes the expected outputs and compares, the
//! candidate worker (untrusted) runs ModelNew. Everything that can go wrong in submission code
//! ends as a `Cause`, which `verdict.rs` decides into a `Verdict`, never as an `Err`.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::config::{Config, Device, LibraryPolicy};
use crate::lanes::{Gate, Hold};
use crate::nvml::Nvml;
use crate::record::{
    merge_check, Build, BuildStatus, Check, Evaluation, Outcome, Phases, Timing, Trial,
};
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;
use crate::timing::{self, Failed};
use crate::verdict::{Cause, KernelEvidence, ReferenceStep, Verdict};
use crate::worker::request::{
    self, CheckOutputs, Command, Compile, Load, Perturb, Ping, Profile, State, TimedCheck, Variant,
    Warm,
};
use crate::worker::{ErrorKind, Failure, Link as _, Reply, Spawn, Worker};

mod replies;

use replies::{Built, Checked, Loaded, Shipped};

/// Runs compile and evaluation steps; the scheduler is generic over it so it can be tested
/// with a scripted fake.
pub trait Backend: Sync {
    fn compile(&self, task: &Task, submission: &Submission) -> Build;
    /// Evaluate on `slot` (an index into the configured devices).
    fn evaluate(
        &self,
        task: &Task,
        submission: &Submission,
        build: &Build,
        slot: usize,
    ) -> Evaluation;
}

/// The real backend: Python workers.
pub struct Python<'a> {
    config: &'a Config,
    /// Folder holding the embedded `kbench_worker` package.
    worker_path: PathBuf,
    /// torch version and GPU architectures: part of every build's cache key.
    build_key: String,
    /// Per slot, reference and candidate workers started ahead of need (Python, torch and the
    /// CUDA context take seconds), each used for one evaluation only.
    ready: Vec<Mutex<VecDeque<Pair>>>,
    started: AtomicUsize,
    /// Per slot, NVML for its GPU (read-only), when it can be opened.
    gpus: Vec<Option<Mutex<Nvml>>>,
    /// Per slot, what its lanes may share (`lanes`).
    gates: Vec<Gate>,
    /// Facts of the tasks (input-only constants, degenerate flags), where they could be derived.
    facts: &'a HashMap<TaskId, TaskFacts>,
    /// Per slot, the CPU set aside for its timed calls' submitting threads (`cpus::reserve`).
    timing_cpus: Vec<usize>,
    /// How the candidate and compile workers are confined (`--sandbox`).
    confinement: Confinement,
}

/// Two fresh workers and the logs they write until an evaluation claims them.
struct Pair {
    reference: Worker,
    candidate: Worker,
    logs: [PathBuf; 2],
    exchange: Exchange,
}

/// The folder an evaluation's two workers share, the only host folder the candidate may write:
/// its outputs handed over as files, and its copy of the submission.
struct Exchange {
    dir: tempfile::TempDir,
    /// Where the workers see it: their `/dev/shm` when confined (`Confinement::seen`).
    seen: PathBuf,
}

impl Exchange {
    /// The file `name` in the folder: where kbench finds it, and where the workers do.
    fn file(&self, name: &str) -> (PathBuf, PathBuf) {
        (self.dir.path().join(name), self.seen.join(name))
    }
}

/// Seed streams of `derive_seed`: trials use 1, 2, 3, ... (input and forward seed per trial).
const TIMING_STREAM: u64 = 0;
const PERTURB_STREAM: u64 = u64::MAX;
const PROFILE_STREAM: u64 = u64::MAX - 1;
const STATE_STREAM: u64 = u64::MAX - 3;
/// `inputs.distribution_perturbation`: the scaled variant multiplies the inputs by this.
const SCALE_FACTOR: f64 = 8.0;
/// `inputs.mean_shift`: inputs offset by this many of their standard deviations (fp32 keeps
/// about seven digits, so E[x^2] - E[x]^2 loses four of them here; two-pass and Welford lose none).
const SHIFT_SPREADS: f64 = 100.0;
/// Above this share of GPU time in library kernels a submission is `no_kernel` where the
/// `--library-policy` applies a limit.
const MAX_LIBRARY_SHARE: f64 = 0.5;
/// The longest reason a report shows; the whole message stays in the worker's log.
const REASON_CHARS: usize = 400;

/// A seed derived from the run's seed for one use (`stream`): the first 8 bytes of SHA-256 over
/// both as little-endian u64s, cut to 53 bits so JSON carries it exactly. One-way, so knowing
/// one derived seed (e.g. the forward seed a submission can read from torch) reveals no other.
/// `kbench_worker/timing.py` derives timed calls' seeds the same way.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(stream.to_le_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first) & ((1 << 53) - 1)
}

/// Whether a worker still answers (after an error that may have been fatal to it).
fn alive(worker: &mut Worker) -> bool {
    worker.request(Ping {}, Duration::from_secs(30)).is_ok()
}

/// A file-name-safe form of a submission's path, for its logs.
fn slug(submission: &Submission) -> String {
    let name: String = submission
        .file
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{}-{}",
        name.trim_end_matches(".py"),
        &submission.sha256[..8]
    )
}

/// An evaluation that ended before any trial ran.
fn early(task: &Task, submission: &Submission, verdict: Verdict, reason: String) -> Evaluation {
    Evaluation {
        task: task.id,
        task_name: task.name.clone(),
        file: submission.file.clone(),
        sample: submission.sample,
        sha256: submission.sha256.clone(),
        verdict,
        reason,
        build: None,
        findings: Vec::new(),
        trials: Vec::new(),
        checks: Vec::new(),
        task_flags: Vec::new(),
        timing: None,
        logs: Vec::new(),
        phases: Phases::default(),
        seconds: 0.0,
        sandbox: String::new(),
    }
}

/// A candidate request's outcome, flattened: a body, or what the candidate did instead.
fn ask<C: Command>(worker: &mut Worker, body: C, deadline: Duration) -> Result<C::Reply, Failed> {
    match worker.request(body, deadline) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err(e)) => Err(Cause::Raised(e)),
        Err(f) => Err(Cause::Silent(f)),
    }
}

impl<'a> Python<'a> {
    pub fn new(
        config: &'a Config,
        worker_path: PathBuf,
        build_key: String,
        facts: &'a HashMap<TaskId, TaskFacts>,
        timing_cpus: Vec<usize>,
        confinement: Confinement,
    ) -> Python<'a> {
        let ready = (0..config.slots())
            .map(|_| Mutex::new(VecDeque::new()))
            .collect();
        let gpus = config
            .gpus
            .iter()
            .map(|g| Nvml::open(*g).ok().map(Mutex::new))
            .collect();
        Python {
            config,
            worker_path,
            build_key,
            ready,
            started: AtomicUsize::new(0),
            gpus,
            gates: (0..config.slots()).map(|_| Gate::default()).collect(),
            facts,
            timing_cpus,
            confinement,
        }
    }

    /// Start a reference and a candidate worker for `slot`, logging to provisional files.
    fn start_pair(&self, slot: usize) -> Result<Pair, String> {
        let visible = match self.config.device {
            Device::Cuda => self.config.gpus[slot].to_string(),
            Device::Cpu => String::new(),
        };
        // GPU indices are NVML's (PCI bus order), so telemetry reads the GPU the worker uses.
        let device_env = vec![
            ("CUDA_VISIBLE_DEVICES".into(), visible),
            ("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()),
        ];
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        let log = |role: &str| self.config.out.join(format!("logs/.worker-{n}.{role}.log"));
        let logs = [log("reference"), log("candidate")];
        let exchange = self.exchange()?;
        let shared = exchange.dir.path();
        let builds = [self.config.cache.join("builds")];
        let reference = self.spec("reference", &logs[0], device_env.clone());
        let candidate = self.spec("candidate", &logs[1], device_env);
        Ok(Pair {
            reference: self.start(&self.confinement.beside(&reference, shared))?,
            candidate: self.start(&self.confinement.wrap(&candidate, &builds, Some(shared)))?,
            logs,
            exchange,
        })
    }

    /// The slot's oldest waiting pair, or a new one.
    fn take_pair(&self, slot: usize) -> Result<Pair, String> {
        let waiting = self.ready[slot]
            .lock()
            .expect("worker pool lock")
            .pop_front();
        waiting.map_or_else(|| self.start_pair(slot), Ok)
    }

    /// Start the slot's next pairs now, so they warm up while this evaluation runs. Start-up
    /// (~8 s on an H100 host, torch._dynamo's import included) outlasts a short evaluation
    /// (~3 s), so on a GPU two pairs per lane and two more wait; on a CPU one, since starting
    /// workers competes with the evaluation for the same cores.
    fn refill(&self, slot: usize) {
        let depth = match self.config.device {
            Device::Cuda => 2 + 2 * self.config.lanes,
            Device::Cpu => 1,
        };
        while self.ready[slot].lock().expect("worker pool lock").len() < depth {
            match self.start_pair(slot) {
                Ok(pair) => self.ready[slot]
                    .lock()
                    .expect("worker pool lock")
                    .push_back(pair),
                Err(_) => break,
            }
        }
    }

    /// How to start a worker of `role`, before confinement (`Confinement::wrap`, `beside`).
    fn spec(&self, role: &str, log: &Path, env: Vec<(String, String)>) -> Spawn {
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

    fn start(&self, spec: &Spawn) -> Result<Worker, String> {
        Worker::spawn(spec).map_err(|e| format!("start a worker with {}: {e}", self.config.python))
    }

    /// A folder on tmpfs that confined workers may write (their uid owns it), removed when
    /// dropped.
    fn exchange(&self) -> Result<Exchange, String> {
        let dir = tempfile::Builder::new()
            .prefix("kbench-")
            .tempdir_in(exchange_root())
            .map_err(|e| format!("create an exchange folder: {e}"))?;
        self.confinement
            .give(dir.path())
            .map_err(|e| format!("hand {} to the sandbox: {e}", dir.path().display()))?;
        Ok(Exchange {
            seen: self.confinement.seen(dir.path()),
            dir,
        })
    }

    fn build_dir(&self, submission: &Submission) -> PathBuf {
        let mut h = Sha256::new();
        h.update(&submission.sha256);
        h.update(&self.build_key);
        // What the pool runs of a submission (a build folder of an older pool may lack builds).
        h.update("pool: import, construct, forward");
        h.update(self.config.overrides_json().to_string());
        self.config
            .cache
            .join("builds")
            .join(format!("{:x}", h.finalize()))
    }

    /// Environment shared by the compile and candidate workers: the build cache of this file.
    fn build_env(&self, submission: &Submission) -> Vec<(String, String)> {
        let dir = self.build_dir(submission);
        vec![
            (
                "TORCH_EXTENSIONS_DIR".into(),
                dir.join("torch_extensions").display().to_string(),
            ),
            (
                "TRITON_CACHE_DIR".into(),
                dir.join("triton").display().to_string(),
            ),
            (
                "TORCH_CUDA_ARCH_LIST".into(),
                self.config.cuda_arch_list.clone(),
            ),
        ]
    }

    /// The task's size in this run: `--scale` and `--set`, except that in a tree without a
    /// `scale.toml` the small size derived in the task's facts stands in for `--scale small`
    /// (`--set` still wins).
    fn sizing(&self, task: &Task) -> (Option<String>, Map<String, Value>) {
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
        }
    }

    /// A compile request for the submission staged at `staged`, of the task as the run sizes it.
    fn compile_request(&self, task: &Task, staged: PathBuf) -> Compile {
        let (scale, set) = self.sizing(task);
        Compile {
            task: task.path.clone(),
            scale,
            set,
            submission: staged,
            device: self.config.device.torch_name().into(),
        }
    }

    fn log_path(&self, submission: &Submission, role: &str) -> (PathBuf, String) {
        let rel = format!("logs/{}.{role}.log", slug(submission));
        (self.config.out.join(&rel), rel)
    }
}

impl Python<'_> {
    /// The cached build in `dir`, if it may be reused: only while its artifacts hash as they did
    /// when built (a submission, or anything else, that rewrote them since gets a fresh build),
    /// and once its folder is the sandbox's again (the candidate writes there: locks, JIT caches).
    fn reusable(&self, dir: &Path) -> Option<Build> {
        std::fs::read(dir.join("build.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Build>(&b).ok())
            .filter(|b| b.artifacts_sha256 == artifacts_hash(dir))
            .filter(|_| self.confinement.give(dir).is_ok())
    }

    /// After an import that defined ModelNew: construct it and call it once on fake tensors in
    /// the same compile worker, so builds in `__init__` or the first forward happen in the pool.
    /// Only a build failure there changes the outcome; a crash or timeout of the warm-up keeps
    /// the import's reply and is noted.
    fn warm(
        &self,
        w: &mut Worker,
        request: Compile,
        imported: Built,
        build: &mut Build,
    ) -> WarmReply {
        let request = Warm::after(request, self.config.precision);
        build.warmed = "import".into();
        match w.request(request, self.config.timeouts.compile) {
            Ok(Reply::Ok(v)) => {
                build.warmed = v.reached.clone().unwrap_or_else(|| "import".into());
                build.warm_note = first_line(&v.note);
                Ok(Reply::Ok(v))
            }
            Ok(Reply::Err(e)) if e.kind == ErrorKind::Build => Ok(Reply::Err(e)),
            Ok(Reply::Err(e)) => {
                build.warm_note = first_line(&e.message);
                Ok(Reply::Ok(imported))
            }
            Err(f) => {
                build.warm_note = format!("warm-up: {f}");
                Ok(Reply::Ok(imported))
            }
        }
    }

    /// Run a compile worker (`spec`): import the submission (`request`), then warm it up where
    /// it defined ModelNew. The worker's reply, or the build's failure.
    fn import_and_warm(
        &self,
        spec: &Spawn,
        request: Compile,
        build: &mut Build,
    ) -> Result<Built, (BuildStatus, String)> {
        let mut w = self.start(spec).map_err(|e| (BuildStatus::Crashed, e))?;
        let reply = w.request(request.clone(), self.config.timeouts.compile);
        let reply = match reply {
            Ok(Reply::Ok(v)) if v.has_model_new => self.warm(&mut w, request, v, build),
            other => other,
        };
        w.finish();
        match reply {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err(e)) if e.kind == ErrorKind::Syntax || e.kind == ErrorKind::Build => {
                Err((BuildStatus::Failed, e.message))
            }
            Ok(Reply::Err(e)) => Err((BuildStatus::ImportFailed, e.message)),
            Err(f @ Failure::Timeout(_)) => Err((BuildStatus::Timeout, f.to_string())),
            Err(f) => Err((BuildStatus::Crashed, f.to_string())),
        }
    }
}

type WarmReply = Result<Reply<Built>, Failure>;

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

impl Backend for Python<'_> {
    fn compile(&self, task: &Task, submission: &Submission) -> Build {
        let started = Instant::now();
        let dir = self.build_dir(submission);
        let cached = dir.join("build.json");
        let (log, log_rel) = self.log_path(submission, "build");
        if let Some(mut build) = self.reusable(&dir) {
            build.cache_hit = true;
            build.seconds = started.elapsed().as_secs_f64();
            return build;
        }
        let mut build = Build {
            status: BuildStatus::Ok,
            message: String::new(),
            log: log_rel,
            seconds: 0.0,
            cache_hit: false,
            kernels: Vec::new(),
            artifacts_sha256: String::new(),
            warmed: String::new(),
            warm_note: String::new(),
            pool_compiled: Vec::new(),
            slot_compiled: None,
        };
        let builds = builds_anything(&submission.path);
        if builds {
            let _ = std::fs::remove_dir_all(&dir);
        }
        // The submission's build folder, handed to the sandbox: its import builds here, and so
        // do JIT compilers (Triton, inductor) that a file which builds nothing at import runs
        // later, in the slot.
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| self.confinement.give(&dir))
            .map_err(|e| format!("create build folder {}: {e}", dir.display()));
        if made.is_ok() && !builds {
            build.seconds = started.elapsed().as_secs_f64();
            return build;
        }
        let mut env = self.build_env(submission);
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
        let prepared = made
            .and_then(|()| self.exchange())
            .and_then(|stage| Ok((stage_submission(submission, &stage)?, stage)));
        let (staged, stage) = match prepared {
            Ok(p) => p,
            Err(e) => {
                build.status = BuildStatus::Crashed;
                build.message = e;
                return build;
            }
        };
        let request = self.compile_request(task, staged);
        let spec = self.spec("compile", &log, env);
        let spec = self
            .confinement
            .wrap(&spec, std::slice::from_ref(&dir), Some(stage.dir.path()));
        match self.import_and_warm(&spec, request, &mut build) {
            Ok(v) => {
                build.kernels = v.kernels;
                build.pool_compiled = v.compiled;
            }
            Err((status, message)) => {
                build.status = status;
                build.message = message;
            }
        }
        drop(stage);
        build.seconds = started.elapsed().as_secs_f64();
        build.artifacts_sha256 = artifacts_hash(&dir);
        // Only outcomes that the same source always gives are cached.
        if matches!(build.status, BuildStatus::Ok | BuildStatus::Failed) {
            if let Ok(bytes) = serde_json::to_vec_pretty(&build) {
                let _ = std::fs::write(&cached, bytes);
            }
        }
        build
    }

    fn evaluate(
        &self,
        task: &Task,
        submission: &Submission,
        build: &Build,
        slot: usize,
    ) -> Evaluation {
        let started = Instant::now();
        let fresh = || Evaluation {
            sandbox: self.confinement.label.clone(),
            build: Some(build.clone()),
            ..early(task, submission, Verdict::Pass, String::new())
        };
        let mut eval = fresh();
        let cause = match build.status {
            BuildStatus::Failed => Cause::BuildFailed(build.message.clone()),
            BuildStatus::Timeout => Cause::BuildTimedOut(build.message.clone()),
            BuildStatus::Crashed => Cause::BuildCrashed(build.message.clone()),
            BuildStatus::Ok | BuildStatus::ImportFailed => {
                // One attempt, beside the other lanes or alone: what ended or decided it.
                let attempt = |alone, eval: &mut Evaluation| match self
                    .run_workers(task, submission, slot, alone, eval)
                {
                    Ok(evidence) => Cause::Kernels(Box::new(evidence)),
                    Err(cause) => cause,
                };
                let bytes = self.facts.get(&task.id).and_then(|f| f.min_bytes);
                let alone = self.config.alone(bytes);
                let mut cause = attempt(alone, &mut eval);
                // Out of GPU memory beside another lane: not the submission's fault until
                // it runs out alone.
                if self.config.lanes > 1 && !alone && cause.out_of_memory() {
                    let waited = eval.phases.gpu_wait_s;
                    eval = fresh();
                    cause = attempt(true, &mut eval);
                    eval.phases.gpu_wait_s += waited;
                    merge_check(&mut eval.checks, alone_check());
                }
                cause
            }
        };
        let (verdict, reason) = cause.decide();
        eval.verdict = verdict;
        eval.reason = one_line(&reason);
        eval.seconds = started.elapsed().as_secs_f64();
        eval
    }
}

/// `harness.alone`: the evaluation ran out of GPU memory beside another lane and was run again
/// with the GPU to itself.
fn alone_check() -> Check {
    Check {
        name: "harness.alone".into(),
        outcome: Outcome::Warn,
        evidence: "out of GPU memory beside another evaluation: evaluated again with the GPU \
                   to itself"
            .into(),
        seconds: 0.0,
        runs: 1,
    }
}

/// A reason as reports show it: one line (worker messages are made so; this holds it for any
/// text that reaches here), at most `REASON_CHARS` characters.
fn one_line(reason: &str) -> String {
    let line = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(REASON_CHARS) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// One correctness trial as sent to both workers.
struct Probe {
    index: u32,
    /// None, or a distribution or shape variant of the inputs (harness.make_inputs).
    variant: Option<Variant>,
    /// Run the expensive checks too (trial 0).
    deep: bool,
}

/// What the candidate compiled itself so far (`compiled` in its load and trial replies): a
/// build the pool missed; empty when the slot only loaded.
fn slot_compiled(eval: &mut Evaluation, compiled: Option<Vec<String>>) {
    if let (Some(build), Some(names)) = (eval.build.as_mut(), compiled) {
        build.slot_compiled = Some(names);
    }
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

impl Python<'_> {
    /// Load both workers, run the trials, then time with the GPU alone; fills `eval` and
    /// returns the kernels' evidence, or the cause that ends it.
    fn run_workers(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        alone: bool,
        eval: &mut Evaluation,
    ) -> Result<KernelEvidence, Failed> {
        let cfg = self.config;
        // Before the workers: dropped after them, once their GPU memory is freed.
        let mut hold = self.gates[slot].enter(alone);
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        let Pair {
            mut reference,
            mut candidate,
            logs,
            exchange,
        } = self.take_pair(slot).map_err(Cause::Unready)?;
        let (ref_log, ref_rel) = self.log_path(sub, "reference");
        let (cand_log, cand_rel) = self.log_path(sub, "candidate");
        // The workers keep writing to the renamed files.
        let _ = std::fs::rename(&logs[0], &ref_log);
        let _ = std::fs::rename(&logs[1], &cand_log);
        eval.logs = vec![ref_rel, cand_rel];
        let started = Instant::now();
        let loads = self.load(task, sub, slot, &mut reference, &mut candidate, &exchange);
        // A load that fails counts here too.
        eval.phases.load_s = started.elapsed().as_secs_f64();
        let (constants, loaded) = loads?;
        eval.phases.worker_startup_s = loaded.startup_s;
        slot_compiled(eval, loaded.compiled);
        for check in loaded.checks {
            merge_check(&mut eval.checks, check);
        }
        let started = Instant::now();
        let kernels = loaded.kernels;

        // CUDA IPC for outputs on the GPU; files if IPC fails once (then for this whole evaluation).
        let mut transport = if cfg.device == Device::Cuda {
            "ipc"
        } else {
            "file"
        };
        let mut link = Link {
            reference: &mut reference,
            candidate: &mut candidate,
            transport: &mut transport,
            exchange: &exchange,
        };
        let waited = hold.waited;
        let verified = self.verify(task, &mut link, &mut hold, eval, &constants);
        merge_check(&mut eval.checks, transfer_check(cfg.device, link.transport));
        // Failed or not (a failing trial ends it); waits between steps count in `gpu_wait_s`,
        // not here: the phases do not overlap.
        eval.phases.correctness_s = started
            .elapsed()
            .saturating_sub(hold.waited - waited)
            .as_secs_f64();
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        verified?;

        hold.alone();
        eval.phases.gpu_wait_s = hold.waited.as_secs_f64();
        let started = Instant::now();
        let mut session = timing::Session {
            config: cfg,
            reference: link.reference,
            candidate: link.candidate,
            gpu: self.gpus.get(slot).and_then(Option::as_ref),
            cpu: self.timing_cpus.get(slot).copied(),
            seed_base: derive_seed(cfg.seed, TIMING_STREAM),
        };
        let (transport, exchange) = (link.transport, link.exchange);
        eval.timing = Some(session.run(&mut eval.checks, |r, c, base| {
            self.timed_check(r, c, base, transport, exchange)
        })?);
        eval.phases.timing_s = started.elapsed().as_secs_f64();
        self.judge_profiled(task, sub, reference, candidate, kernels, eval)
    }

    /// Load the task in the reference worker and the submission in the candidate, at once; the
    /// reference's failure decides first (it is not the submission's fault). Returns the task's
    /// constants and the candidate's reply.
    fn load(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        reference: &mut Worker,
        candidate: &mut Worker,
        exchange: &Exchange,
    ) -> Result<(Map<String, Value>, Loaded), Failed> {
        let cfg = self.config;
        let load = self.load_request(task);
        let cand_load = Load {
            submission: Some(stage_submission(sub, exchange).map_err(Cause::Unready)?),
            env: Some(self.build_env(sub).into_iter().collect()),
            ..load.clone()
        };
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

    /// After timing: the candidate's checks (`State`), one profiled call (`profile.library_share`
    /// last, since profiling leaves state behind in the process it ran in), whether the reported
    /// kernels ran (`kernels.mapped`), and the kernels' evidence that decides the verdict. Ends
    /// both workers.
    fn judge_profiled(
        &self,
        task: &Task,
        sub: &Submission,
        mut reference: Worker,
        mut candidate: Worker,
        kernels: Vec<String>,
        eval: &mut Evaluation,
    ) -> Result<KernelEvidence, Failed> {
        let cfg = self.config;
        // The candidate's state checks, outside every timed request (the wall envelope compares
        // them with the reference's), and its outputs' independence once it has warmed up.
        let state = State {
            seed: derive_seed(cfg.seed, STATE_STREAM),
            forward_seed: derive_seed(cfg.seed, STATE_STREAM - 1),
        };
        for check in ask(&mut candidate, state, cfg.timeouts.call)?.checks {
            merge_check(&mut eval.checks, check);
        }
        let profiled = ask(&mut candidate, self.profile_request(), cfg.timeouts.call)?;
        for check in profiled.checks {
            merge_check(&mut eval.checks, check);
        }
        let figures = profiled.profile;
        if let Some(t) = eval.timing.as_mut().filter(|t| t.host_error.is_some()) {
            self.narrow_host_error(&mut reference, t, figures.busy_ms);
        }
        let kernels = profiled.kernels.unwrap_or(kernels);
        let mapped = mapped_kernel_check(&kernels, candidate.python_pid(), &self.build_dir(sub));
        reference.finish();
        candidate.finish();
        let evidence = KernelEvidence {
            kernels,
            build_failures: profiled.build_failures,
            defined: profiled.defined,
            custom_ms: figures.custom_ms,
            total_ms: figures.total_ms,
            library_share: figures.library_share,
            library_limit: self.library_share_limit(task),
            policy: cfg.library_policy.as_str(),
            unmapped: (mapped.outcome == Outcome::Fail).then(|| mapped.evidence.clone()),
        };
        merge_check(&mut eval.checks, mapped);
        Ok(evidence)
    }

    /// One profiled call after timing, the same inputs for either worker.
    fn profile_request(&self) -> Profile {
        Profile {
            seed: derive_seed(self.config.seed, PROFILE_STREAM),
            forward_seed: derive_seed(self.config.seed, PROFILE_STREAM - 1),
        }
    }

    /// A forward that synchronizes with the host inside: profile one reference call too, and
    /// scale the labels' host-speed error by the share of each arm's time the GPU was idle.
    /// Without both busy times the whole error stays.
    fn narrow_host_error(
        &self,
        reference: &mut Worker,
        timing: &mut Timing,
        candidate_busy_ms: Option<f64>,
    ) {
        let reference_busy_ms = ask(reference, self.profile_request(), self.config.timeouts.call)
            .ok()
            .and_then(|reply| reply.busy_ms);
        if let (Some(r), Some(c)) = (reference_busy_ms, candidate_busy_ms) {
            let error = timing::host_error(
                r / timing.reference.median_ms,
                c / timing.candidate.median_ms,
            );
            timing::allow_host_error(timing, error);
        }
    }

    /// The largest share of GPU time library kernels may take in a submission to this task
    /// before it counts as `no_kernel`, under the run's `--library-policy`.
    fn library_share_limit(&self, task: &Task) -> Option<f64> {
        match self.config.library_policy {
            LibraryPolicy::Strict => Some(MAX_LIBRARY_SHARE),
            LibraryPolicy::Partial => (task.id.level == 1).then_some(MAX_LIBRARY_SHARE),
            LibraryPolicy::Any => None,
        }
    }

    /// Every correctness trial and check before timing: the KernelBench-compatible trials (the
    /// first with the deep checks), parameter perturbation, signed and scaled inputs, another
    /// input shape.
    /// Between steps, a lane waiting to time goes first (`Hold::step`).
    fn verify(
        &self,
        task: &Task,
        link: &mut Link<'_>,
        hold: &mut Hold<'_>,
        eval: &mut Evaluation,
        constants: &Map<String, Value>,
    ) -> Result<(), Failed> {
        let cfg = self.config;
        for index in 0..cfg.trials {
            hold.step();
            let probe = Probe {
                index,
                variant: None,
                deep: index == 0,
            };
            let trial = self.trial(link, &probe, eval)?;
            if trial.uncheckable {
                return Err(Cause::Uncheckable(format!(
                    "trial {index}: {}",
                    trial.reason
                )));
            }
            let failed = (!trial.correct).then(|| format!("trial {index}: {}", trial.reason));
            eval.trials.push(trial);
            if let Some(reason) = failed {
                return Err(Cause::Wrong(reason));
            }
        }
        let mut variants = Vec::new();
        if self.perturb_params(link)? {
            variants.push(("params.perturbation", None));
        }
        variants.push(("inputs.distribution_perturbation", Some(Variant::Signed)));
        variants.push((
            "inputs.distribution_perturbation",
            Some(Variant::Scaled {
                factor: SCALE_FACTOR,
            }),
        ));
        variants.push((
            "inputs.mean_shift",
            Some(Variant::Shifted {
                spreads: SHIFT_SPREADS,
            }),
        ));
        let mut index = cfg.trials;
        for (check, variant) in variants {
            hold.step();
            self.variant_trial(link, eval, check, variant, index)?;
            index += 1;
        }
        hold.step();
        self.shape_perturbation(task, link, eval, constants, index)
    }

    /// `params.perturbation`: new parameter values, the same in both workers (a trial follows).
    /// Whether the task has parameters to perturb.
    fn perturb_params(&self, link: &mut Link<'_>) -> Result<bool, Failed> {
        let cfg = self.config;
        let perturb = Perturb {
            seed: derive_seed(cfg.seed, PERTURB_STREAM),
        };
        let ours = match link.reference.request(perturb.clone(), cfg.timeouts.call) {
            Ok(Reply::Ok(v)) => v,
            Ok(Reply::Err(e)) => return Err(Cause::ReferenceError(ReferenceStep::Perturb, e)),
            Err(f) => return Err(Cause::ReferenceDied(f)),
        };
        let theirs = ask(link.candidate, perturb, cfg.timeouts.call)?;
        if ours.shapes != theirs.shapes {
            return Err(Cause::Wrong(
                "params.perturbation: ModelNew's parameters differ from the task's in order or shape".into(),
            ));
        }
        Ok(ours.shapes.is_some_and(|s| !s.is_empty()))
    }

    /// One trial on perturbed inputs or parameters, recorded as the check `check`. A reference
    /// that overflows or fails on these inputs says nothing about the kernel: skipped.
    fn variant_trial(
        &self,
        link: &mut Link<'_>,
        eval: &mut Evaluation,
        check: &str,
        variant: Option<Variant>,
        index: u32,
    ) -> Result<(), Failed> {
        let started = Instant::now();
        let what = variant_label(variant.as_ref());
        let probe = Probe {
            index,
            variant,
            deep: false,
        };
        let trial = self.trial(link, &probe, eval)?;
        let outcome = match (trial.correct, trial.uncheckable) {
            (true, _) => Outcome::Pass,
            (false, true) => Outcome::Skip,
            (false, false) => {
                let reason = format!("{check} ({what}): {}", trial.reason);
                eval.trials.push(trial);
                return Err(Cause::Wrong(reason));
            }
        };
        let result = if trial.reason.is_empty() {
            "correct"
        } else {
            &trial.reason
        };
        merge_check(
            &mut eval.checks,
            Check {
                name: check.into(),
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
    fn shape_perturbation(
        &self,
        task: &Task,
        link: &mut Link<'_>,
        eval: &mut Evaluation,
        constants: &Map<String, Value>,
        index: u32,
    ) -> Result<(), Failed> {
        const NAME: &str = "inputs.shape_perturbation";
        let started = Instant::now();
        let chosen = self
            .facts
            .get(&task.id)
            .and_then(shape_constant)
            .and_then(|name| Some((name, constants.get(name)?.as_i64()?)));
        let Some((name, value)) = chosen else {
            merge_check(
                &mut eval.checks,
                Check {
                    name: NAME.into(),
                    outcome: Outcome::Skip,
                    evidence: "no constant that only sizes the inputs".into(),
                    seconds: 0.0,
                    runs: 1,
                },
            );
            return Ok(());
        };
        let what = format!("{name}={}", value + 1);
        let probe = Probe {
            index,
            variant: Some(Variant::Shape {
                set: [(name.to_string(), value + 1)].into(),
            }),
            deep: false,
        };
        let (outcome, evidence) = match self.trial(link, &probe, eval) {
            Ok(trial) if trial.correct => (Outcome::Pass, format!("{what}: correct")),
            Ok(trial) if trial.uncheckable => (Outcome::Skip, format!("{what}: {}", trial.reason)),
            Ok(trial) => {
                let reason = format!("{NAME} ({what}): {}", trial.reason);
                eval.trials.push(trial);
                return Err(Cause::Wrong(reason));
            }
            Err(cause @ Cause::ReferenceError(..)) => {
                (Outcome::Skip, format!("{what}: {}", cause.reason()))
            }
            Err(cause) if cause.is_refusal() && alive(link.candidate) => (
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
                name: NAME.into(),
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
    /// entries go into `eval`.
    fn trial(
        &self,
        link: &mut Link<'_>,
        probe: &Probe,
        eval: &mut Evaluation,
    ) -> Result<Trial, Failed> {
        let cfg = self.config;
        let seed = derive_seed(cfg.seed, 2 * u64::from(probe.index) + 1);
        let forward_seed = derive_seed(cfg.seed, 2 * u64::from(probe.index) + 2);
        let request = |out, transport| request::Trial {
            seed,
            forward_seed,
            variant: probe.variant.clone(),
            deep: probe.deep,
            out,
            transport,
        };
        let check = |_: &Shipped| {
            Some(CheckOutputs {
                seed,
                forward_seed,
                variant: probe.variant.clone(),
                deep: probe.deep,
                candidate_out: PathBuf::new(),
                ipc: None,
            })
        };
        let file = format!("trial{}.pt", probe.index);
        let (ran, checked) = link.exchange(request, check, cfg.timeouts.call, &file)?;
        let checked = checked.unwrap_or_default();
        slot_compiled(eval, ran.compiled);
        for c in ran.checks.into_iter().chain(checked.checks) {
            merge_check(&mut eval.checks, c);
        }
        Ok(Trial {
            index: probe.index,
            correct: checked.correct,
            uncheckable: checked.uncheckable,
            reason: checked.reason.unwrap_or_default(),
            max_abs_diff: checked.max_abs_diff,
            max_rel_diff: checked.max_rel_diff,
        })
    }

    /// `timing.timed_output_check`: the candidate's kept output of its last timed block, checked
    /// by the reference worker against the inputs kbench derives for that sample itself.
    fn timed_check(
        &self,
        reference: &mut Worker,
        candidate: &mut Worker,
        base: u64,
        transport: &mut &'static str,
        exchange: &Exchange,
    ) -> Result<Check, Failed> {
        const NAME: &str = "timing.timed_output_check";
        let started = Instant::now();
        let mut link = Link {
            reference,
            candidate,
            transport,
            exchange,
        };
        let mut sample = None;
        let outcome = link.exchange(
            |out, transport| TimedCheck { out, transport },
            |ran| {
                // Set on every attempt: a retry after an IPC failure finds nothing kept.
                sample = ran.index;
                let seed = derive_seed(base, sample?);
                Some(CheckOutputs {
                    seed,
                    forward_seed: derive_seed(seed, 0),
                    variant: None,
                    deep: false,
                    candidate_out: PathBuf::new(),
                    ipc: None,
                })
            },
            self.config.timeouts.call,
            "timed.pt",
        );
        let check = |outcome, evidence| Check {
            name: NAME.into(),
            outcome,
            evidence,
            seconds: started.elapsed().as_secs_f64(),
            runs: 1,
        };
        let Some(k) = sample else {
            outcome?;
            return Ok(check(Outcome::Skip, "no output kept".into()));
        };
        let differs = |why: &str| Cause::TimedOutputWrong(format!("{NAME}: timed call {k}: {why}"));
        match outcome.map(|(_, v)| v.unwrap_or_default()) {
            Ok(v) if v.correct => Ok(check(Outcome::Pass, format!("timed call {k}: correct"))),
            Ok(v) if v.uncheckable => Ok(check(
                Outcome::Skip,
                format!("timed call {k}: the reference's output is not finite"),
            )),
            Ok(v) => Err(differs(v.reason.as_deref().unwrap_or("wrong output"))),
            Err(Cause::Wrong(why)) => Err(differs(&why)),
            Err(Cause::Raised(e)) if e.kind == ErrorKind::Output => Err(differs(&e.message)),
            Err(e) => Err(e),
        }
    }
}

/// The two workers of an evaluation and how outputs travel between them.
struct Link<'l> {
    reference: &'l mut Worker,
    candidate: &'l mut Worker,
    /// "ipc" (CUDA IPC) or "file"; IPC that fails once falls back to files for the evaluation.
    transport: &'l mut &'static str,
    exchange: &'l Exchange,
}

impl Link<'_> {
    /// Ask the candidate for outputs (the request `request` makes from the file name the
    /// candidate sees and the transport), then have the reference check them with the request
    /// `check` makes from the candidate's reply (None: nothing to check; its file and IPC
    /// handles are set here). Returns both replies.
    fn exchange<C: Command<Reply = Shipped>>(
        &mut self,
        request: impl Fn(PathBuf, String) -> C,
        mut check: impl FnMut(&Shipped) -> Option<CheckOutputs>,
        deadline: Duration,
        file: &str,
    ) -> Result<(Shipped, Option<Checked>), Failed> {
        let (out, seen) = self.exchange.file(file);
        loop {
            let asked = request(seen.clone(), (*self.transport).into());
            let ran = ask(self.candidate, asked, deadline)?;
            let Some(mut body) = check(&ran) else {
                return Ok((ran, None));
            };
            body.candidate_out = seen.clone();
            body.ipc = ran.ipc.clone();
            let result = match self.reference.request(body, deadline) {
                Ok(Reply::Ok(v)) => Ok((ran, Some(v))),
                Ok(Reply::Err(e)) if e.kind == ErrorKind::Transfer && *self.transport == "ipc" => {
                    *self.transport = "file";
                    continue;
                }
                Ok(Reply::Err(e)) if e.kind == ErrorKind::Output => Err(Cause::Wrong(e.message)),
                Ok(Reply::Err(e)) => Err(Cause::ReferenceError(ReferenceStep::Check, e)),
                Err(f) => Err(Cause::ReferenceDied(f)),
            };
            let _ = std::fs::remove_file(&out);
            return result;
        }
    }
}

/// `harness.transfer`: how outputs crossed from the (confined) candidate to the reference
/// worker; files on a GPU mean CUDA IPC failed.
fn transfer_check(device: Device, transport: &str) -> Check {
    Check {
        name: "harness.transfer".into(),
        outcome: if device == Device::Cuda && transport == "file" {
            Outcome::Warn
        } else {
            Outcome::Pass
        },
        evidence: match transport {
            "ipc" => "CUDA IPC".into(),
            _ if device == Device::Cuda => "a tensors-only file (CUDA IPC failed)".into(),
            _ => "a tensors-only file".into(),
        },
        seconds: 0.0,
        runs: 1,
    }
}

/// A copy of the submission in the exchange (a folder the confined worker can read, whatever
/// the permissions of the submission's own folders), under its own file name; where the
/// candidate sees it.
fn stage_submission(submission: &Submission, exchange: &Exchange) -> Result<PathBuf, String> {
    let name = submission.path.file_name().map_or_else(
        || "submission.py".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (staged, seen) = exchange.file(&name);
    std::fs::copy(&submission.path, &staged).map_err(|e| {
        format!(
            "copy {} to {}: {e}",
            submission.path.display(),
            staged.display()
        )
    })?;
    Ok(seen)
}

/// `kernels.mapped`: whether a kernel the candidate worker reports really ran, seen from outside
/// its interpreter (which the submission controls): a shared object of the submission's own build
/// folder (its extension, or Triton's launcher) must be mapped into the worker's process. CuPy
/// kernels load through the driver, not as files: reported, not verified.
fn mapped_kernel_check(kernels: &[String], pid: u32, build_dir: &Path) -> Check {
    let check = |outcome, evidence| Check {
        name: "kernels.mapped".into(),
        outcome,
        evidence,
        seconds: 0.0,
        runs: 1,
    };
    if kernels.is_empty() {
        return check(Outcome::Skip, "no kernel reported".into());
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let prefix = build_dir.display().to_string();
    let mut mapped: Vec<&str> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.starts_with(&prefix) && path.contains(".so"))
        .collect();
    mapped.dedup();
    if let Some(first) = mapped.first() {
        let name = Path::new(first)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        check(
            Outcome::Pass,
            format!(
                "{} file(s) of the build mapped into the worker, e.g. {name}",
                mapped.len()
            ),
        )
    } else if kernels.iter().all(|k| k.starts_with("cupy:")) {
        check(
            Outcome::Skip,
            "CuPy kernels load through the driver: not verified".into(),
        )
    } else {
        check(
            Outcome::Fail,
            format!(
                "the worker reports {} but no shared object of the submission's build is mapped into it",
                kernels.join(", ")
            ),
        )
    }
}

/// SHA-256 over a build folder's files (paths and contents, in path order), leaving out the
/// bookkeeping that loading a build rewrites (ninja's logs, torch's lock, build.json itself).
fn artifacts_hash(dir: &Path) -> String {
    const BOOKKEEPING: [&str; 4] = ["build.json", ".ninja_log", ".ninja_deps", "lock"];
    let mut h = Sha256::new();
    for entry in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter(|e| !BOOKKEEPING.contains(&e.file_name().to_string_lossy().as_ref()))
    {
        h.update(
            entry
                .path()
                .strip_prefix(dir)
                .unwrap_or(entry.path())
                .to_string_lossy()
                .as_bytes(),
        );
        h.update([0]);
        match std::fs::read(entry.path()) {
            Ok(bytes) => h.update(&bytes),
            Err(_) => h.update(b"unreadable"),
        }
    }
    format!("{:x}", h.finalize())
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

/// Whether importing the file may build something (an extension or a JIT kernel). Files that
/// name none of the build machinery skip the compile pool: their import happens once, in the
/// candidate worker, which reports its kernels either way, so this only saves a process.
fn builds_anything(path: &Path) -> bool {
    const MARKERS: [&str; 5] = ["cpp_extension", "load_inline", "triton", "cupy", "ctypes"];
    std::fs::read_to_string(path).map_or(true, |source| MARKERS.iter().any(|m| source.contains(m)))
}

/// Outputs travel through tmpfs where there is one: no disk writes for multi-GB tensors.
fn exchange_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_one_line() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        let long = "é".repeat(REASON_CHARS + 5);
        assert_eq!(one_line(&long).chars().count(), REASON_CHARS + 3);
    }

    #[test]
    fn derived_seeds_differ_and_repeat() {
        let seeds: Vec<u64> = (0..10).map(|i| derive_seed(42, i)).collect();
        let mut unique = seeds.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10);
        assert_eq!(seeds[3], derive_seed(42, 3));
        assert!(
            seeds.iter().all(|s| *s < 1 << 53),
            "seeds must survive JSON as exact numbers"
        );
        // The worker derives timed calls' seeds the same way (timing.py derive_seed(42, 3)).
        assert_eq!(derive_seed(42, 3), 542_934_981_142_619);
    }

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
