//! One evaluation, (task, submission) on one device, through the Python workers: the compile
//! worker builds, the reference worker (trusted) makes the expected outputs and compares, the
//! candidate worker (untrusted) runs ModelNew. Everything that can go wrong in submission code
//! ends as a `Verdict`, never as an `Err`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::{Config, Device, Mode};
use crate::nvml::{Gpu, Nvml, RoundTag, Telemetry};
use crate::record::{Arm, Build, BuildStatus, Evaluation, Phases, RoundTelemetry, Timing, Trial};
use crate::stats;
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Verdict;
use crate::worker::{Failure, Reply, Spawn, Worker, WorkerError};

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
}

/// Two fresh workers and the logs they write until an evaluation claims them.
struct Pair {
    reference: Worker,
    candidate: Worker,
    logs: [PathBuf; 2],
}

/// Samples per block; a round is A C C A (or C A A C) in blocks, so drift cancels within a round.
const BLOCK: u32 = 10;
const BOOTSTRAP_RESAMPLES: usize = stats::DEFAULT_RESAMPLES;
const CI_LEVEL: f64 = 0.95;
/// Pause after a round discarded for slowdown, to let the GPU recover.
const SLOWDOWN_PAUSE: Duration = Duration::from_millis(50);

/// A seed for each trial derived from the run's seed (splitmix64), so trials differ but repeat.
fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & ((1 << 53) - 1)
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
        timing: None,
        logs: Vec::new(),
        phases: Phases::default(),
        seconds: 0.0,
    }
}

/// The verdict for an error the candidate's code raised.
fn candidate_verdict(error: &WorkerError) -> Verdict {
    match error.kind.as_str() {
        "syntax" | "build" => Verdict::CompileError,
        "output" => Verdict::Incorrect,
        "cheat" => Verdict::Cheat,
        _ => Verdict::RuntimeError,
    }
}

/// The verdict when the candidate worker gave no reply.
fn failure_verdict(failure: &Failure) -> Verdict {
    match failure {
        Failure::Timeout(_) => Verdict::Timeout,
        Failure::Exited(_) | Failure::Protocol(_) => Verdict::Crashed,
    }
}

/// A worker request's outcome, flattened: a body, or a verdict with its reason.
fn ask(worker: &mut Worker, body: Value, deadline: Duration) -> Result<Value, (Verdict, String)> {
    match worker.request(body, deadline) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err(e)) => Err((candidate_verdict(&e), e.message)),
        Err(f) => Err((failure_verdict(&f), f.to_string())),
    }
}

impl<'a> Python<'a> {
    pub fn new(config: &'a Config, worker_path: PathBuf, build_key: String) -> Python<'a> {
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
        Ok(Pair {
            reference: self.spawn("reference", &logs[0], device_env.clone())?,
            candidate: self.spawn("candidate", &logs[1], device_env)?,
            logs,
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
    /// (~5 s on an H100 host) outlasts a short evaluation, so on a GPU two pairs wait; on a CPU
    /// one, since starting workers competes with the evaluation for the same cores.
    fn refill(&self, slot: usize) {
        let depth = match self.config.device {
            Device::Cuda => 2,
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

    fn spawn(&self, role: &str, log: &Path, env: Vec<(String, String)>) -> Result<Worker, String> {
        let mut spec = Spawn::role(
            &self.config.python,
            &self.worker_path,
            role,
            log.to_path_buf(),
            self.config.out.clone(),
        );
        spec.env.extend(env);
        Worker::spawn(&spec)
            .map_err(|e| format!("start {role} worker with {}: {e}", self.config.python))
    }

    fn build_dir(&self, submission: &Submission) -> PathBuf {
        let mut h = Sha256::new();
        h.update(&submission.sha256);
        h.update(&self.build_key);
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

    fn request_base(&self, task: &Task, cmd: &str) -> Value {
        json!({
            "cmd": cmd,
            "task": task.path,
            "scale": self.config.scale,
            "set": self.config.sets,
        })
    }

    fn log_path(&self, submission: &Submission, role: &str) -> (PathBuf, String) {
        let rel = format!("logs/{}.{role}.log", slug(submission));
        (self.config.out.join(&rel), rel)
    }
}

impl Backend for Python<'_> {
    fn compile(&self, task: &Task, submission: &Submission) -> Build {
        let started = Instant::now();
        let dir = self.build_dir(submission);
        let cached = dir.join("build.json");
        let (log, log_rel) = self.log_path(submission, "build");
        if let Some(mut build) = std::fs::read(&cached)
            .ok()
            .and_then(|b| serde_json::from_slice::<Build>(&b).ok())
        {
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
        };
        if !builds_anything(&submission.path) {
            build.seconds = started.elapsed().as_secs_f64();
            return build;
        }
        let mut env = self.build_env(submission);
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            build.status = BuildStatus::Crashed;
            build.message = format!("create build folder {}: {e}", dir.display());
            return build;
        }
        let mut request = self.request_base(task, "compile");
        request["submission"] = json!(submission.path);
        let outcome = self
            .spawn("compile", &log, env)
            .map_err(|e| (BuildStatus::Crashed, e))
            .and_then(|mut w| {
                let reply = w.request(request, self.config.timeouts.compile);
                w.finish();
                match reply {
                    Ok(Reply::Ok(v)) => Ok(v),
                    Ok(Reply::Err(e)) if e.kind == "syntax" || e.kind == "build" => {
                        Err((BuildStatus::Failed, e.message))
                    }
                    Ok(Reply::Err(e)) => Err((BuildStatus::ImportFailed, e.message)),
                    Err(f @ Failure::Timeout(_)) => Err((BuildStatus::Timeout, f.to_string())),
                    Err(f) => Err((BuildStatus::Crashed, f.to_string())),
                }
            });
        match outcome {
            Ok(v) => {
                build.kernels = serde_json::from_value(v["kernels"].clone()).unwrap_or_default();
            }
            Err((status, message)) => {
                build.status = status;
                build.message = message;
            }
        }
        build.seconds = started.elapsed().as_secs_f64();
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
        let mut eval = early(task, submission, Verdict::Pass, String::new());
        eval.build = Some(build.clone());
        match build.status {
            BuildStatus::Failed => {
                eval.verdict = Verdict::CompileError;
                eval.reason = build.message.clone();
            }
            BuildStatus::Timeout => {
                eval.verdict = Verdict::Timeout;
                eval.reason = format!("build: {}", build.message);
            }
            BuildStatus::Crashed => {
                eval.verdict = Verdict::Crashed;
                eval.reason = format!("build: {}", build.message);
            }
            BuildStatus::Ok | BuildStatus::ImportFailed => {
                if let Err((verdict, reason)) = self.run_workers(task, submission, slot, &mut eval)
                {
                    eval.verdict = verdict;
                    eval.reason = reason;
                }
            }
        }
        eval.seconds = started.elapsed().as_secs_f64();
        eval
    }
}

impl Python<'_> {
    /// Load both workers, run the trials, then time; fills `eval` or returns the verdict that ends it.
    fn run_workers(
        &self,
        task: &Task,
        sub: &Submission,
        slot: usize,
        eval: &mut Evaluation,
    ) -> Result<(), (Verdict, String)> {
        let cfg = self.config;
        let skipped = |why: String| (Verdict::Skipped, why);
        let Pair {
            mut reference,
            mut candidate,
            logs,
        } = self.take_pair(slot).map_err(skipped)?;
        let (ref_log, ref_rel) = self.log_path(sub, "reference");
        let (cand_log, cand_rel) = self.log_path(sub, "candidate");
        // The workers keep writing to the renamed files.
        let _ = std::fs::rename(&logs[0], &ref_log);
        let _ = std::fs::rename(&logs[1], &cand_log);
        eval.logs = vec![ref_rel, cand_rel];
        let started = Instant::now();

        let device = cfg.device.torch_name();
        let mut load = self.request_base(task, "load");
        load["device"] = json!(device);
        load["precision"] = json!(cfg.precision);
        load["atol"] = json!(cfg.atol);
        load["rtol"] = json!(cfg.rtol);
        let mut cand_load = load.clone();
        cand_load["submission"] = json!(sub.path);
        cand_load["env"] = self
            .build_env(sub)
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();

        // Both load at once; the reference's failure decides first (it is not the submission's fault).
        let loads = std::thread::scope(|s| {
            let r = s.spawn(|| reference.request(load, cfg.timeouts.load));
            let c = candidate.request(cand_load, cfg.timeouts.load + cfg.timeouts.compile);
            (r.join().expect("reference load thread"), c)
        });
        self.refill(slot);
        match loads.0 {
            Ok(Reply::Ok(_)) => {}
            Ok(Reply::Err(e)) if e.kind == "oom" => {
                return Err(skipped(format!(
                    "the reference does not fit: {}",
                    e.message
                )))
            }
            Ok(Reply::Err(e)) => {
                return Err(skipped(format!(
                    "the reference failed to load: {}",
                    e.message
                )))
            }
            Err(f) => return Err(skipped(format!("the reference worker failed: {f}"))),
        }
        let loaded = match loads.1 {
            Ok(Reply::Ok(v)) => v,
            Ok(Reply::Err(e)) => return Err((candidate_verdict(&e), e.message)),
            Err(f) => return Err((failure_verdict(&f), f.to_string())),
        };
        eval.phases.worker_startup_s = loaded["startup_s"].as_f64();
        eval.phases.load_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let kernels: Vec<String> =
            serde_json::from_value(loaded["kernels"].clone()).unwrap_or_default();

        let exchange = tempfile::Builder::new()
            .prefix("kbench-")
            .tempdir_in(exchange_root())
            .map_err(|e| skipped(format!("create an exchange folder: {e}")))?;
        // CUDA IPC for outputs on the GPU; files if IPC fails once (then for this whole evaluation).
        let mut transport = if cfg.device == Device::Cuda {
            "ipc"
        } else {
            "file"
        };
        for index in 0..cfg.trials {
            let trial = self.trial(
                &mut reference,
                &mut candidate,
                index,
                &mut transport,
                exchange.path(),
            )?;
            if trial.uncheckable {
                return Err(skipped(format!("trial {index}: {}", trial.reason)));
            }
            let failed = (!trial.correct).then(|| format!("trial {index}: {}", trial.reason));
            eval.trials.push(trial);
            if let Some(reason) = failed {
                return Err((Verdict::Incorrect, reason));
            }
        }
        // params.perturbation: new parameter values, the same in both workers, and one more trial.
        let perturb = json!({"cmd": "perturb", "seed": derive_seed(cfg.seed, u64::MAX)});
        let ours =
            ask(&mut reference, perturb.clone(), cfg.timeouts.call).map_err(|(_, why)| {
                skipped(format!(
                    "the reference failed to perturb its parameters: {why}"
                ))
            })?;
        let theirs = ask(&mut candidate, perturb, cfg.timeouts.call)?;
        if ours["shapes"] != theirs["shapes"] {
            return Err((
                Verdict::Incorrect,
                "params.perturbation: ModelNew's parameters differ from the task's in order or shape".into(),
            ));
        }
        if ours["shapes"].as_array().is_some_and(|s| !s.is_empty()) {
            let index = cfg.trials;
            let trial = self.trial(
                &mut reference,
                &mut candidate,
                index,
                &mut transport,
                exchange.path(),
            )?;
            // A reference that overflows with the new values says nothing about the kernel.
            let failed = (!trial.correct && !trial.uncheckable).then(|| {
                format!(
                    "params.perturbation: with new parameter values, {}",
                    trial.reason
                )
            });
            eval.trials.push(trial);
            if let Some(reason) = failed {
                return Err((Verdict::Incorrect, reason));
            }
        }

        eval.phases.correctness_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        eval.timing = Some(self.time(&mut reference, &mut candidate, slot)?);
        eval.phases.timing_s = started.elapsed().as_secs_f64();
        reference.finish();
        candidate.finish();
        eval.verdict = if kernels.is_empty() {
            Verdict::NoKernel
        } else {
            Verdict::Pass
        };
        if eval.verdict == Verdict::NoKernel {
            eval.reason = "correct, but no custom kernel (pure PyTorch)".into();
        }
        Ok(())
    }

    /// One correctness trial: fresh inputs from the trial's seed in both workers, the candidate's
    /// outputs and inputs handed to the reference worker, compared there.
    fn trial(
        &self,
        reference: &mut Worker,
        candidate: &mut Worker,
        index: u32,
        transport: &mut &'static str,
        exchange: &Path,
    ) -> Result<Trial, (Verdict, String)> {
        let cfg = self.config;
        let seed = derive_seed(cfg.seed, 2 * u64::from(index) + 1);
        let forward_seed = derive_seed(cfg.seed, 2 * u64::from(index) + 2);
        let out = exchange.join(format!("trial{index}.pt"));
        let checked = loop {
            let trial = json!({"cmd": "trial", "seed": seed, "forward_seed": forward_seed, "out": out, "transport": *transport});
            let ran = ask(candidate, trial, cfg.timeouts.call)?;
            let check = json!({
                "cmd": "check", "seed": seed, "forward_seed": forward_seed, "candidate_out": out, "ipc": ran.get("ipc"),
            });
            match reference.request(check, cfg.timeouts.call) {
                Ok(Reply::Ok(v)) => break v,
                Ok(Reply::Err(e)) if e.kind == "transfer" && *transport == "ipc" => {
                    *transport = "file"
                }
                Ok(Reply::Err(e)) if e.kind == "output" => {
                    return Err((Verdict::Incorrect, e.message))
                }
                Ok(Reply::Err(e)) => {
                    return Err((
                        Verdict::Skipped,
                        format!("the reference failed: {}", e.message),
                    ))
                }
                Err(f) => {
                    return Err((
                        Verdict::Skipped,
                        format!("the reference worker failed: {f}"),
                    ))
                }
            }
        };
        let _ = std::fs::remove_file(&out);
        Ok(Trial {
            index,
            correct: checked["correct"] == true,
            uncheckable: checked["uncheckable"] == true,
            reason: checked["reason"].as_str().unwrap_or_default().to_string(),
            max_abs_diff: checked["max_abs_diff"].as_f64(),
            max_rel_diff: checked["max_rel_diff"].as_f64(),
        })
    }

    /// Interleaved rounds of reference (A) and candidate (C) blocks: A C C A, then C A A C.
    fn time(
        &self,
        reference: &mut Worker,
        candidate: &mut Worker,
        slot: usize,
    ) -> Result<Timing, (Verdict, String)> {
        let cfg = self.config;
        let seed = derive_seed(cfg.seed, 0);
        if cfg.mode == Mode::KernelBench {
            return self.time_kernelbench(reference, candidate, seed);
        }
        let mut arms = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
        let mut telemetry = Vec::new();
        // At least two rounds: rounds are the bootstrap's unit.
        let block = (cfg.samples / 4).clamp(1, BLOCK);
        let rounds = cfg.samples.div_ceil(2 * block).max(2);
        // Rounds under hardware or thermal slowdown are discarded and taken again, up to a point.
        let (mut kept, mut attempts) = (0, 0);
        while kept < rounds && attempts < 3 * rounds {
            let round = kept;
            attempts += 1;
            let order: [usize; 4] = if round % 2 == 0 {
                [0, 1, 1, 0]
            } else {
                [1, 0, 0, 1]
            };
            let mut taken: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            for arm in order {
                let request = json!({"cmd": "time", "n": block, "seed": seed, "mode": "offline"});
                let reply = if arm == 0 {
                    ask(reference, request, cfg.timeouts.call).map_err(|(_, why)| {
                        (
                            Verdict::Skipped,
                            format!("the reference failed while timed: {why}"),
                        )
                    })?
                } else {
                    ask(candidate, request, cfg.timeouts.call)?
                };
                taken[arm].extend(samples_of(&reply)?);
            }
            let reading = self.read_gpu(slot);
            let tag = reading.map(|(t, max)| t.tag(max));
            if let Some((t, _)) = reading {
                telemetry.push(RoundTelemetry {
                    round,
                    reading: t,
                    tag: tag.unwrap_or(RoundTag::Clean),
                });
            }
            if tag == Some(RoundTag::Slowdown) {
                std::thread::sleep(SLOWDOWN_PAUSE);
                continue;
            }
            for (arm, samples) in taken.into_iter().enumerate() {
                arms[arm]
                    .1
                    .extend(std::iter::repeat_n(round, samples.len()));
                arms[arm].0.extend(samples);
            }
            kept += 1;
        }
        if kept < 2 {
            return Err((
                Verdict::Skipped,
                "the GPU stayed in hardware or thermal slowdown: no clean rounds".into(),
            ));
        }
        let arm = |(samples_ms, rounds): (Vec<f64>, Vec<u32>)| Arm {
            median_ms: stats::median(&samples_ms),
            samples_ms,
            rounds,
        };
        let [a, c] = arms;
        let (reference, candidate) = (arm(a), arm(c));
        let mut timing = summarize_timing(method(cfg), reference, candidate, seed, cfg.delta);
        timing.rounds_discarded = attempts - kept;
        timing.telemetry = telemetry;
        Ok(timing)
    }

    /// Upstream KernelBench's loop: all candidate samples, then all reference samples (its
    /// order), each after a write flush with no blocker; the speedup is the ratio of means with
    /// a Fieller interval. For comparison with published numbers, not for decisions.
    fn time_kernelbench(
        &self,
        reference: &mut Worker,
        candidate: &mut Worker,
        seed: u64,
    ) -> Result<Timing, (Verdict, String)> {
        let cfg = self.config;
        let request = json!({"cmd": "time", "n": cfg.samples, "seed": seed, "mode": "kernelbench"});

        let cand = samples_of(&ask(candidate, request.clone(), cfg.timeouts.call)?)?;
        let refs = samples_of(&ask(reference, request, cfg.timeouts.call).map_err(
            |(_, why)| {
                (
                    Verdict::Skipped,
                    format!("the reference failed while timed: {why}"),
                )
            },
        )?)?;
        let arm = |samples_ms: Vec<f64>| Arm {
            median_ms: stats::median(&samples_ms),
            rounds: vec![0; samples_ms.len()],
            samples_ms,
        };
        let mut timing = summarize_timing(method(cfg), arm(refs), arm(cand), seed, cfg.delta);
        let means = stats::Samples::new(timing.reference.samples_ms.clone()).and_then(|r| {
            Ok(stats::ratio_of_means(
                &r,
                &stats::Samples::new(timing.candidate.samples_ms.clone())?,
                CI_LEVEL,
            ))
        });
        timing.speedup = timing.mean_ratio;
        match means.ok().and_then(|m| m.ci) {
            Some(ci) => {
                (timing.speedup_ci_low, timing.speedup_ci_high) = (ci.low, ci.high);
                timing.label = stats::decide(ci.low, ci.high, cfg.delta);
            }
            None => {
                (timing.speedup_ci_low, timing.speedup_ci_high) = (0.0, f64::MAX);
                timing.label = stats::Decision::Inconclusive;
            }
        }
        Ok(timing)
    }

    /// This slot's GPU telemetry and maximum SM clock, when NVML can be read.
    fn read_gpu(&self, slot: usize) -> Option<(Telemetry, Option<u32>)> {
        let mut gpu = self.gpus.get(slot)?.as_ref()?.lock().ok()?;
        let max = gpu.max_sm_mhz().ok();
        gpu.read().ok().map(|t| (t, max))
    }
}

/// The samples of a timing reply: finite, non-negative milliseconds, or the worker is broken.
fn samples_of(reply: &Value) -> Result<Vec<f64>, (Verdict, String)> {
    let samples: Vec<f64> = serde_json::from_value(reply["samples_ms"].clone())
        .map_err(|e| (Verdict::Crashed, format!("malformed timing reply: {e}")))?;
    if samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
        return Err((
            Verdict::Crashed,
            "timing reply holds a negative or non-finite time".into(),
        ));
    }
    Ok(samples)
}

fn method(cfg: &Config) -> String {
    match (cfg.mode, cfg.device) {
        (Mode::Offline, Device::Cuda) => "cuda_events_flush_blocker".into(),
        (Mode::KernelBench, Device::Cuda) => "kernelbench_events_write_flush".into(),
        (Mode::Offline, Device::Cpu) => "cpu_perf_counter".into(),
        (Mode::KernelBench, Device::Cpu) => "kernelbench_cpu_perf_counter".into(),
    }
}

/// The statistics of one comparison: paired bootstrap over rounds for the speedup and its
/// interval, Hodges-Lehmann and Mann-Whitney as cross-checks, the decision label. Samples the
/// checked types reject (e.g. a 0 ms event time) fall back to an unpaired bootstrap with no
/// cross-checks and an INCONCLUSIVE label.
fn summarize_timing(
    method: String,
    reference: Arm,
    candidate: Arm,
    seed: u64,
    delta: f64,
) -> Timing {
    let paired = stats::Rounds::from_tagged(
        &reference.samples_ms,
        &reference.rounds,
        &candidate.samples_ms,
        &candidate.rounds,
    )
    .map(|rounds| stats::paired_speedup(&rounds, BOOTSTRAP_RESAMPLES, CI_LEVEL, seed).speedup);
    let arms = stats::Samples::new(reference.samples_ms.clone())
        .and_then(|r| Ok((r, stats::Samples::new(candidate.samples_ms.clone())?)));
    let (s, label) = match &paired {
        Ok(s) => (*s, s.decision(delta)),
        Err(_) => {
            let s = stats::speedup(
                &reference.samples_ms,
                &candidate.samples_ms,
                BOOTSTRAP_RESAMPLES,
                CI_LEVEL,
                seed,
            );
            (s, stats::Decision::Inconclusive)
        }
    };
    let mut warnings = Vec::new();
    let (hodges_lehmann, p_faster) = match &arms {
        Ok((r, c)) => {
            for (name, arm) in [("reference", r), ("candidate", c)] {
                let text = |w| {
                    serde_json::to_value(w)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                };
                warnings.extend(
                    stats::sample_warnings(arm)
                        .into_iter()
                        .filter_map(text)
                        .map(|w| format!("{name}: {w}")),
                );
            }
            (
                Some(stats::hodges_lehmann(r, c, CI_LEVEL)),
                Some(stats::mann_whitney(r, c).p_faster),
            )
        }
        Err(e) => {
            warnings.push(format!("samples not usable for rank statistics: {e}"));
            (None, None)
        }
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Timing {
        method,
        mean_ratio: mean(&reference.samples_ms) / mean(&candidate.samples_ms),
        reference,
        candidate,
        speedup: s.ratio,
        speedup_ci_low: s.ci_low,
        speedup_ci_high: s.ci_high,
        ci_level: CI_LEVEL,
        label,
        delta,
        hodges_lehmann,
        p_faster,
        warnings,
        rounds_discarded: 0,
        telemetry: Vec::new(),
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
    }

    fn arm(samples_ms: Vec<f64>) -> Arm {
        let rounds = (0..samples_ms.len() as u32).map(|i| i / 4).collect();
        Arm {
            median_ms: stats::median(&samples_ms),
            samples_ms,
            rounds,
        }
    }

    #[test]
    fn a_twice_as_fast_candidate_is_labeled_faster() {
        let reference: Vec<f64> = (0..40).map(|i| 2.0 + f64::from(i % 5) * 0.002).collect();
        let candidate: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 3) * 0.001).collect();
        let t = summarize_timing(
            "test".into(),
            arm(reference),
            arm(candidate),
            1,
            stats::DELTA_DEDICATED,
        );
        assert!((t.speedup - 2.004 / 1.001).abs() < 1e-9, "{t:?}");
        assert_eq!(t.label, stats::Decision::Faster);
        let hl = t.hodges_lehmann.unwrap();
        assert!((hl.ratio - 2.0).abs() < 0.02, "{hl:?}");
        assert!(t.p_faster.unwrap() < 1e-6);
        // The same samples on both arms are SAME, never FASTER or SLOWER.
        let same: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 7) * 0.0005).collect();
        let t = summarize_timing(
            "test".into(),
            arm(same.clone()),
            arm(same),
            1,
            stats::DELTA_DEDICATED,
        );
        assert_eq!(t.label, stats::Decision::Same, "{t:?}");
    }

    #[test]
    fn unusable_samples_give_an_inconclusive_label() {
        let t = summarize_timing(
            "test".into(),
            arm(vec![1.0; 8]),
            arm(vec![0.0; 8]),
            1,
            stats::DELTA_DEDICATED,
        );
        assert_eq!(t.label, stats::Decision::Inconclusive);
        assert!(t.hodges_lehmann.is_none() && t.p_faster.is_none());
        assert_eq!(t.warnings.len(), 1);
    }

    #[test]
    fn worker_errors_map_to_verdicts() {
        let e = |kind: &str| WorkerError {
            kind: kind.into(),
            message: String::new(),
            fatal: false,
            traceback: None,
        };
        assert_eq!(candidate_verdict(&e("syntax")), Verdict::CompileError);
        assert_eq!(candidate_verdict(&e("build")), Verdict::CompileError);
        assert_eq!(candidate_verdict(&e("output")), Verdict::Incorrect);
        assert_eq!(candidate_verdict(&e("cheat")), Verdict::Cheat);
        assert_eq!(candidate_verdict(&e("cuda")), Verdict::RuntimeError);
        assert_eq!(
            failure_verdict(&Failure::Timeout(Duration::from_secs(1))),
            Verdict::Timeout
        );
        assert_eq!(
            failure_verdict(&Failure::Exited("signal 11".into())),
            Verdict::Crashed
        );
    }
}
