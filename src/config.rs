//! Flags resolved into one `Config`: defaults applied, values checked, paths made absolute.
//! Needs the environment probe for `--device auto` and the GPU list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::{
    BaselineArg, DeviceArg, EvalArgs, LibraryPolicyArg, ModeArg, PrecisionArg, ProcessCheckArg,
    ProfilerArg, SandboxArg,
};
use crate::error::{Error, Result};
use crate::probe::Probe;
use crate::record::RecordedConfig;
use crate::record_mac::RecordKey;
use crate::sandbox;
use crate::shard::Shard;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cuda,
    Cpu,
}

impl Device {
    /// The device string the workers pass to torch (each worker sees one GPU).
    pub fn torch_name(self) -> &'static str {
        match self {
            Device::Cuda => "cuda",
            Device::Cpu => "cpu",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Offline,
    KernelBench,
    Server,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Offline => "offline",
            Mode::KernelBench => "kernelbench",
            Mode::Server => "server",
        }
    }
}

/// `--library-policy`: how much of a submission's GPU time may be in library kernels (cuBLAS,
/// cuDNN, ATen) before it counts as `no_kernel` (the profile of one call measures the share).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibraryPolicy {
    /// At most half, on every level.
    Strict,
    /// At most half on level 1 (single operators); levels 2 and 3 may keep library GEMMs and
    /// convolutions and fuse the rest (partial replacement), unless the submission ran every
    /// kernel launch of the reference's (`profile.reference_ops`): then nothing was replaced.
    Partial,
    /// No limit (the share is still reported).
    Any,
}

impl LibraryPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            LibraryPolicy::Strict => "strict",
            LibraryPolicy::Partial => "partial",
            LibraryPolicy::Any => "any",
        }
    }
}

/// `--dedicated`: whether the run has its GPUs to itself (checked through NVML before it
/// starts), and so judges speedups against the narrower band (`Config::delta`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuUse {
    Dedicated,
    Shared,
}

#[derive(Clone, Debug)]
pub struct Timeouts {
    pub compile: Duration,
    pub load: Duration,
    pub call: Duration,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub python: String,
    pub tasks_root: PathBuf,
    /// How the run names its task tree in records: "bundled" or the path as given.
    pub tasks_label: String,
    pub cache: PathBuf,
    pub out: PathBuf,
    pub run_id: String,
    pub device: Device,
    /// GPU indices, one evaluation slot each; empty on the CPU.
    pub gpus: Vec<u32>,
    /// Evaluations sharing each GPU (`lanes`).
    pub lanes: usize,
    /// The smallest GPU's memory: a task too large to share it runs alone (`Config::alone`).
    pub gpu_memory: Option<u64>,
    pub jobs: usize,
    pub precision: &'static str,
    pub atol: f64,
    pub rtol: f64,
    pub trials: u32,
    /// `--kernelbench-tolerance`: atol and rtol of KernelBench's own verdict beside kbench's.
    pub kernelbench_tolerance: f64,
    /// `--kernelbench-eval`: KernelBench's eval runs again as it runs on every evaluation
    /// whose trials ran, not only where kbench's checks cut one short (`kernelbench.environment`).
    pub kernelbench_eval: bool,
    /// `--sanitize`: compute-sanitizer's path, which runs each correct candidate's kernels once
    /// more (`pipeline/sanitize.rs`).
    pub sanitizer: Option<PathBuf>,
    /// `--profile ncu`: Nsight Compute's path, which profiles each passing or timed
    /// candidate's kernels and the reference's once (`pipeline/ncu_profile.rs`).
    pub profiler: Option<PathBuf>,
    /// Timing stops at this 95 % CI half-width of the speedup, or at the sample or time budget.
    pub ci_target: f64,
    pub max_samples: u32,
    pub budget: Duration,
    pub mode: Mode,
    /// `--baseline eager,compile`: torch.compile of the reference is timed too (offline mode).
    pub compile_baseline: bool,
    /// `--process-check always`: every timing has the process check, not only FASTER and
    /// SLOWER labels near 1 (`timing::allow_process_effect`).
    pub process_check_always: bool,
    /// The run's seed: `--seed`, else secret (drawn from the OS, never written anywhere).
    pub seed: u64,
    pub seed_given: bool,
    /// `--seed-file`: the seed's SHA-256, recorded instead of the seed.
    pub seed_sha256: Option<String>,
    /// `--seed-file`: the key derived from the seed that results.json is sealed with
    /// (`record_mac`), so `kbench merge --seed-file` can authenticate it.
    pub record_key: Option<RecordKey>,
    pub scale: Option<String>,
    pub sets: Map<String, Value>,
    pub timeouts: Timeouts,
    /// What fails the gate beyond a failed verdict (`gate::judge`).
    pub gate: crate::cli::GateArgs,
    pub resume: bool,
    /// TORCH_CUDA_ARCH_LIST for the compile pool and the candidate, e.g. "9.0".
    pub cuda_arch_list: String,
    /// The practical band of the decision labels: 1 % on a GPU known to be dedicated, else 3 %.
    pub delta: f64,
    /// `--lock-clocks`: None = leave the clocks alone; Some(None) = base clock; Some(Some(MHz)).
    pub lock_clocks: Option<Option<u32>>,
    pub library_policy: LibraryPolicy,
    /// `--dedicated`: refuse GPUs on which other processes compute.
    pub gpu_use: GpuUse,
    /// `--sandbox`: how the processes that run submission code are confined.
    pub sandbox: sandbox::Mode,
    /// `--shard I/N`: the share of the selected submissions this run evaluates, as given (the
    /// split fills in its sizes).
    pub shard: Option<Shard>,
    /// `--compat`: known toolchain drift rewritten in the staged submissions (`rewrite`).
    pub compat: bool,
    /// The rewrite of known toolchain drift for this machine's nvcc: applied to every staged
    /// submission under `--compat`, and else to a build that failed for drift, tried again to
    /// tell whether the drift is the cause.
    pub rewrite: crate::compat::Compat,
    /// `--contract`: whether a `contract` verdict fails the gate or warns.
    pub contract: crate::record::ContractRule,
}

/// `--python`, else $KBENCH_PYTHON, else `.venv/bin/python` in the current folder, else python3.
/// A path with a slash is made absolute, since workers run in other folders; a bare name is
/// looked up on PATH.
pub fn python(flag: Option<&str>) -> String {
    let chosen = flag
        .map(String::from)
        .or_else(|| std::env::var("KBENCH_PYTHON").ok())
        .or_else(|| {
            Path::new(".venv/bin/python")
                .exists()
                .then(|| ".venv/bin/python".into())
        })
        .unwrap_or_else(|| "python3".into());
    if chosen.contains('/') {
        if let Ok(abs) = std::path::absolute(&chosen) {
            return abs.display().to_string();
        }
    }
    chosen
}

/// kbench's cache: $KBENCH_CACHE, else $XDG_CACHE_HOME/kbench, else ~/.cache/kbench.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("KBENCH_CACHE") {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("kbench")
}

/// The device (`--device`, CUDA where torch sees a GPU) and the GPUs to use (`--gpus`, else all).
fn devices(args: &EvalArgs, probe: &Probe, python: &str) -> Result<(Device, Vec<u32>)> {
    let device = match args.device {
        DeviceArg::Cpu => Device::Cpu,
        DeviceArg::Cuda if !probe.cuda_available() => {
            return Err(Error::Usage(format!(
                "use --device cuda: torch at {python} sees no GPU (run `kbench doctor`)"
            )))
        }
        DeviceArg::Cuda => Device::Cuda,
        DeviceArg::Auto if probe.cuda_available() => Device::Cuda,
        DeviceArg::Auto => Device::Cpu,
    };
    let visible = probe.gpu_count();
    let gpus = match device {
        Device::Cpu => Vec::new(),
        Device::Cuda if args.gpus.is_empty() => (0..visible as u32).collect(),
        Device::Cuda => {
            if let Some(g) = args.gpus.iter().find(|g| **g as usize >= visible) {
                return Err(Error::Usage(format!(
                    "use GPU {g}: torch sees {visible} GPU(s)"
                )));
            }
            args.gpus.clone()
        }
    };
    Ok((device, gpus))
}

/// Tolerances, trials, samples, interval target and budget within their ranges.
fn check_numbers(args: &EvalArgs) -> Result<()> {
    for (name, value) in [
        ("--atol", args.atol),
        ("--rtol", args.rtol),
        ("--kernelbench-tolerance", args.kernelbench_tolerance),
    ] {
        if let Some(v) = value.filter(|v| !(*v >= 0.0 && v.is_finite())) {
            return Err(Error::Usage(format!(
                "use {name} {v}: it must be a finite number >= 0"
            )));
        }
    }
    if args.trials == 0 {
        return Err(Error::Usage("use --trials 0: it must be at least 1".into()));
    }
    if args.max_samples < 2 {
        return Err(Error::Usage(format!(
            "use --max-samples {}: it must be at least 2",
            args.max_samples
        )));
    }
    if !(args.ci_target > 0.0 && args.ci_target < 1.0) {
        return Err(Error::Usage(format!(
            "use --ci-target {}: it must be in (0, 1), e.g. 0.01",
            args.ci_target
        )));
    }
    if !(args.budget.is_finite() && args.budget > 0.0) {
        return Err(Error::Usage(format!(
            "use --budget {}: it must be a positive number of seconds",
            args.budget
        )));
    }
    Ok(())
}

/// Parallel builds: `--jobs`, else one per CPU core.
fn jobs(args: &EvalArgs) -> usize {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

fn timeouts(args: &EvalArgs) -> Result<Timeouts> {
    let seconds = |name: &str, s: f64| {
        if s > 0.0 && s.is_finite() {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(Error::Usage(format!(
                "use {name} {s}: it must be a positive number of seconds"
            )))
        }
    };
    Ok(Timeouts {
        compile: seconds("--timeout-compile", args.timeout_compile)?,
        load: seconds("--timeout-load", args.timeout_load)?,
        call: seconds("--timeout-call", args.timeout_call)?,
    })
}

/// `--lock-clocks`: None, the base clock (Some(None)) or a frequency in MHz, on a GPU only.
fn lock_clocks(args: &EvalArgs, device: Device) -> Result<Option<Option<u32>>> {
    Ok(match args.lock_clocks.as_deref() {
        None => None,
        Some(_) if device != Device::Cuda => {
            return Err(Error::Usage(
                "use --lock-clocks without a GPU: it needs --device cuda".into(),
            ))
        }
        Some("base") => Some(None),
        Some(mhz) => Some(Some(mhz.parse().map_err(|_| {
            Error::Usage(format!(
                "use --lock-clocks {mhz}: expected base or a frequency in MHz"
            ))
        })?)),
    })
}

/// The run's folder: `--out`, else `reports/<run id>`; `--resume` needs `--out`.
fn out_dir(args: &EvalArgs, run_id: &str) -> Result<PathBuf> {
    if args.resume && args.out.is_none() {
        return Err(Error::Usage(
            "use --resume without --out DIR: it needs the folder of the run to continue".into(),
        ));
    }
    absolute(
        &args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("reports").join(run_id)),
    )
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Mode {
        match mode {
            ModeArg::Offline => Mode::Offline,
            ModeArg::Kernelbench => Mode::KernelBench,
            ModeArg::Server => Mode::Server,
        }
    }
}

impl From<LibraryPolicyArg> for LibraryPolicy {
    fn from(policy: LibraryPolicyArg) -> LibraryPolicy {
        match policy {
            LibraryPolicyArg::Strict => LibraryPolicy::Strict,
            LibraryPolicyArg::Partial => LibraryPolicy::Partial,
            LibraryPolicyArg::Any => LibraryPolicy::Any,
        }
    }
}

/// Whether torch.compile is timed too (`--baseline eager,compile`; eager always, offline only).
fn compile_baseline(args: &EvalArgs) -> Result<bool> {
    if !args.baseline.contains(&BaselineArg::Eager) {
        return Err(Error::Usage(
            "use --baseline without eager: every speedup is first against the eager reference"
                .into(),
        ));
    }
    let compile = args.baseline.contains(&BaselineArg::Compile);
    if compile && args.mode != ModeArg::Offline {
        return Err(Error::Usage(
            "time --baseline compile outside the offline mode: kernelbench and server time eager only"
                .into(),
        ));
    }
    Ok(compile)
}

/// `NAME=VALUE` with VALUE a JSON value (numbers, lists for tuples, "strings"); bare words are strings.
fn parse_set(raw: &str) -> Result<(String, Value)> {
    let (name, value) = raw.split_once('=').ok_or_else(|| {
        Error::Usage(format!(
            "use --set {raw}: expected NAME=VALUE, e.g. batch_size=2"
        ))
    })?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::Usage(format!(
            "use --set {raw}: '{name}' is not a Python name"
        )));
    }
    let value = serde_json::from_str(value.trim())
        .unwrap_or_else(|_| Value::String(value.trim().to_string()));
    Ok((name.to_string(), value))
}

/// `--seed-file`: a decimal number (e.g. from `od -An -N8 -tu8 /dev/urandom`).
pub fn read_seed(path: &Path) -> Result<u64> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
    text.trim().parse().map_err(|_| {
        Error::Usage(format!(
            "read a seed from {}: expected one decimal number below 2^64",
            path.display()
        ))
    })
}

/// The run's seed and what the record may say of it.
struct Seed {
    value: u64,
    /// Given as `--seed` (recorded as is).
    given: bool,
    /// `--seed-file`: the seed's SHA-256, recorded instead of the seed.
    sha256: Option<String>,
    /// `--seed-file`: the key the run's records are sealed with.
    key: Option<RecordKey>,
}

/// `--seed`, else `--seed-file`, else a secret seed from the OS; a shard needs one of the two.
fn seed(args: &EvalArgs) -> Result<Seed> {
    let from_file = args.seed_file.as_deref().map(read_seed).transpose()?;
    if args.shard.is_some() && args.seed.is_none() && from_file.is_none() {
        return Err(Error::Usage(
            "use --shard with --seed N or --seed-file FILE: the shards of one run must draw the same inputs".into(),
        ));
    }
    Ok(Seed {
        value: args.seed.or(from_file).unwrap_or_else(|| {
            use rand::RngCore;
            rand::rngs::OsRng.next_u64()
        }),
        given: args.seed.is_some(),
        sha256: from_file.map(seed_sha256),
        key: from_file.map(RecordKey::from_seed),
    })
}

/// The `--set NAME=VALUE` overrides, by name (a later one wins).
fn sets(args: &EvalArgs) -> Result<Map<String, Value>> {
    let mut sets = Map::new();
    for raw in &args.sets {
        let (k, v) = parse_set(raw)?;
        sets.insert(k, v);
    }
    Ok(sets)
}

impl From<SandboxArg> for sandbox::Mode {
    fn from(mode: SandboxArg) -> sandbox::Mode {
        match mode {
            SandboxArg::Auto => sandbox::Mode::Auto,
            SandboxArg::Require => sandbox::Mode::Require,
            SandboxArg::Off => sandbox::Mode::Off,
        }
    }
}

/// What a record holds of a seed from a file: enough to tell two seeds apart, not to find one.
pub fn seed_sha256(seed: u64) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(format!("kbench seed {seed}")))
}

/// `--sanitize`'s tool: refused where it cannot be found, since a run asked to sanitize that
/// did not would pass what it was asked to check.
fn sanitizer(args: &EvalArgs) -> Result<Option<PathBuf>> {
    if !args.sanitize {
        return Ok(None);
    }
    // Its real place: the folder the sandbox shows the candidate is the one its libraries are in.
    let found = crate::sanitizer::find().map(|p| p.canonicalize().unwrap_or(p));
    found.map(Some).ok_or_else(|| {
        Error::Usage(
            "--sanitize: compute-sanitizer is not on PATH, in $CUDA_HOME/bin or in \
             /usr/local/cuda/bin (it comes with the CUDA toolkit; `kbench doctor` looks too)"
                .into(),
        )
    })
}

/// `--profile ncu`'s tool: refused where it cannot be found or there is no GPU to profile, since
/// a run asked for the metrics that gave none would look like a run of kernels that had none.
fn profiler(args: &EvalArgs, device: Device) -> Result<Option<PathBuf>> {
    let Some(ProfilerArg::Ncu) = args.profile else {
        return Ok(None);
    };
    if device == Device::Cpu {
        return Err(Error::Usage(
            "--profile ncu profiles GPU kernels: it needs --device cuda".into(),
        ));
    }
    let found = crate::nsight::find().map(|p| p.canonicalize().unwrap_or(p));
    found.map(Some).ok_or_else(|| {
        Error::Usage(
            "--profile ncu: ncu (Nsight Compute) is not on PATH, in $CUDA_HOME/bin or in \
             /usr/local/cuda/bin (it comes with the CUDA toolkit; `kbench doctor` looks too)"
                .into(),
        )
    })
}

/// The precision's name and its default tolerance (atol and rtol alike).
fn precision(arg: PrecisionArg) -> (&'static str, f64) {
    match arg {
        PrecisionArg::Fp32 => ("fp32", 1e-4),
        PrecisionArg::Fp16 => ("fp16", 1e-2),
        PrecisionArg::Bf16 => ("bf16", 1e-2),
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).map_err(|e| Error::read(p, e))
}

impl Config {
    pub fn resolve(
        args: &EvalArgs,
        tasks_root: PathBuf,
        python: String,
        probe: &Probe,
    ) -> Result<Config> {
        let tasks_label = args
            .source
            .tasks
            .as_ref()
            .map_or("bundled".into(), |p| p.display().to_string());
        let (device, gpus) = devices(args, probe, &python)?;
        let (precision, tolerance) = precision(args.precision);
        check_numbers(args)?;
        let timeouts = timeouts(args)?;
        let lock_clocks = lock_clocks(args, device)?;
        let sets = sets(args)?;
        let compile_baseline = compile_baseline(args)?;
        let run_id = chrono::Local::now().format("run-%Y%m%d-%H%M%S").to_string();
        let out = out_dir(args, &run_id)?;
        let seed = seed(args)?;
        let gpu_use = if args.dedicated {
            GpuUse::Dedicated
        } else {
            GpuUse::Shared
        };
        Ok(Config {
            python,
            tasks_root,
            tasks_label,
            cache: cache_dir(),
            out,
            run_id,
            device,
            lanes: args.lanes as usize,
            gpus,
            jobs: jobs(args),
            precision,
            atol: args.atol.unwrap_or(tolerance),
            rtol: args.rtol.unwrap_or(tolerance),
            trials: args.trials,
            kernelbench_tolerance: args.kernelbench_tolerance.unwrap_or(tolerance),
            kernelbench_eval: args.kernelbench_eval,
            sanitizer: sanitizer(args)?,
            profiler: profiler(args, device)?,
            ci_target: args.ci_target,
            max_samples: args.max_samples,
            budget: Duration::from_secs_f64(args.budget),
            mode: args.mode.into(),
            compile_baseline,
            process_check_always: args.process_check == ProcessCheckArg::Always,
            seed: seed.value,
            seed_given: seed.given,
            seed_sha256: seed.sha256,
            record_key: seed.key,
            scale: args.scale.clone().filter(|s| s != "full"),
            sets,
            timeouts,
            gate: args.gate.clone(),
            resume: args.resume,
            cuda_arch_list: probe.cuda_arch_list(),
            gpu_memory: probe.smallest_gpu_memory(),
            delta: match gpu_use {
                GpuUse::Dedicated => crate::stats::DELTA_DEDICATED,
                GpuUse::Shared => crate::stats::DELTA_SHARED,
            },
            lock_clocks,
            library_policy: args.library_policy.into(),
            gpu_use,
            sandbox: args.sandbox.into(),
            shard: args.shard,
            compat: args.compat,
            rewrite: crate::compat::Compat::new(probe.facts.nvcc.as_deref()),
            contract: args.contract,
        })
    }

    /// The rewrite staged copies get: `rewrite` under `--compat`, else none.
    pub fn staged_rewrite(&self) -> Option<&crate::compat::Compat> {
        self.compat.then_some(&self.rewrite)
    }

    /// Number of evaluations that may run at once: one per GPU, one on the CPU.
    pub fn slots(&self) -> usize {
        self.gpus.len().max(1)
    }

    /// The GPU of `slot` (its index on the node); None on the CPU.
    pub fn gpu_index(&self, slot: usize) -> Option<u32> {
        match self.device {
            Device::Cuda => self.gpus.get(slot).copied(),
            Device::Cpu => None,
        }
    }

    /// Whether a task's evaluation takes the GPU and its memory alone rather than share it with
    /// other lanes: at full size, when its inputs, outputs and parameters exceed a sixth of the
    /// GPU's memory (each worker holds them, and more for the checks). On an H100 two lanes ran
    /// out of GPU memory on level-1 tasks of 14-16 GiB, and a reference worker was killed;
    /// those of 12 GiB shared without fault.
    pub fn alone(&self, bytes: Option<u64>) -> bool {
        match (self.gpu_memory, bytes) {
            (Some(memory), Some(bytes)) => self.lanes > 1 && self.full_size() && bytes > memory / 6,
            _ => false,
        }
    }

    /// Tasks run at their full sizes: no --scale other than full, no --set. The task facts
    /// (bytes, FLOPs) are counted at full size, so speed of light applies only then.
    pub fn full_size(&self) -> bool {
        self.scale.is_none() && self.sets.is_empty()
    }

    /// The size overrides as one JSON value (scale name and --set values).
    pub fn overrides_json(&self) -> Value {
        serde_json::json!({"scale": self.scale, "set": self.sets})
    }

    pub fn recorded(&self) -> RecordedConfig {
        RecordedConfig {
            tasks: self.tasks_label.clone(),
            device: self.device.torch_name().into(),
            precision: self.precision.into(),
            atol: self.atol,
            rtol: self.rtol,
            trials: self.trials,
            ci_target: self.ci_target,
            max_samples: self.max_samples,
            budget_s: self.budget.as_secs_f64(),
            mode: self.mode.as_str().into(),
            seed: self.seed_given.then_some(self.seed),
            seed_sha256: self.seed_sha256.clone(),
            library_policy: self.library_policy.as_str().into(),
            compile_baseline: self.compile_baseline,
            process_check_always: self.process_check_always,
            overrides: self.overrides_json(),
            kernelbench_tolerance: Some(self.kernelbench_tolerance),
            kernelbench_eval: self.kernelbench_eval,
            sanitize: self.sanitizer.is_some(),
            profile: self.profiler.as_ref().map(|_| "ncu".to_string()),
            compat: self.compat,
            contract: self.contract,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn parses_set_values() {
        assert_eq!(
            parse_set("batch_size=2").unwrap(),
            ("batch_size".into(), Value::from(2))
        );
        assert_eq!(
            parse_set("shape=[3, 5]").unwrap().1,
            serde_json::json!([3, 5])
        );
        assert_eq!(parse_set("mode=nearest").unwrap().1, Value::from("nearest"));
        assert!(parse_set("batch_size").is_err());
        assert!(parse_set("a b=1").is_err());
    }

    #[test]
    fn bad_numbers_are_refused_in_words_that_read_after_failed_to() {
        for (flag, said) in [
            ("--trials=0", "use --trials 0: it must be at least 1"),
            (
                "--max-samples=1",
                "use --max-samples 1: it must be at least 2",
            ),
            (
                "--ci-target=1",
                "use --ci-target 1: it must be in (0, 1), e.g. 0.01",
            ),
            (
                "--budget=0",
                "use --budget 0: it must be a positive number of seconds",
            ),
            (
                "--atol=-1",
                "use --atol -1: it must be a finite number >= 0",
            ),
            (
                "--timeout-call=0",
                "use --timeout-call 0: it must be a positive number of seconds",
            ),
        ] {
            let cli = <crate::cli::Cli as clap::Parser>::parse_from(["kbench", "eval", "x", flag]);
            let crate::cli::Command::Eval(args) = cli.command else {
                panic!("not eval");
            };
            let refused = check_numbers(&args).and_then(|()| timeouts(&args).map(drop));
            assert_eq!(refused.unwrap_err().to_string(), said);
        }
    }

    /// `--profile ncu` asks for GPU kernels' metrics: refused on the CPU (before the tool is
    /// looked for), absent from the record's settings when not asked for (the config hash of a
    /// run without it is unchanged).
    #[test]
    fn profile_ncu_is_refused_on_the_cpu_and_recorded_only_when_asked() {
        let cli = <crate::cli::Cli as clap::Parser>::parse_from([
            "kbench",
            "eval",
            "x",
            "--profile",
            "ncu",
        ]);
        let crate::cli::Command::Eval(args) = cli.command else {
            panic!("not eval");
        };
        let refused = profiler(&args, Device::Cpu).unwrap_err().to_string();
        assert!(refused.contains("needs --device cuda"), "{refused}");
        let plain = resolved(&[]);
        assert_eq!(plain.profiler, None);
        let recorded = serde_json::to_value(plain.recorded()).unwrap();
        assert!(recorded.get("profile").is_none(), "{recorded}");
    }

    /// The configuration `kbench eval submissions FLAGS` resolves to, on an H100-like probe.
    pub(crate) fn resolved(flags: &[&str]) -> Config {
        let cli = <crate::cli::Cli as clap::Parser>::parse_from(
            ["kbench", "eval", "submissions"].iter().chain(flags),
        );
        let crate::cli::Command::Eval(args) = cli.command else {
            panic!("not eval");
        };
        let probe = Probe {
            facts: serde_json::from_value(serde_json::json!({
                "cuda_available": true,
                "gpus": [{"capability": "9.0", "memory_bytes": 80u64 << 30}],
            }))
            .unwrap(),
        };
        Config::resolve(&args, PathBuf::from("tasks"), "python3".into(), &probe).unwrap()
    }

    #[test]
    fn compat_is_a_recorded_setting_without_nvcc_leaving_architectures_alone() {
        let compat = resolved(&["--compat"]);
        assert_eq!(
            (compat.compat, compat.rewrite.clone()),
            (true, crate::compat::Compat { lowest_arch: None })
        );
        assert_eq!(
            compat.recorded().differences(&resolved(&[]).recorded()),
            ["compat true against unset"]
        );
    }

    #[test]
    fn the_contract_rule_is_recorded_only_when_kernelbench_s() {
        let kernelbench = resolved(&["--contract", "kernelbench"]).recorded();
        assert_eq!(
            kernelbench.contract,
            crate::record::ContractRule::Kernelbench
        );
        assert_eq!(
            kernelbench.differences(&resolved(&[]).recorded()),
            ["contract \"kernelbench\" against unset"]
        );
        // kbench's own is the default: a record written before the flag reads alike.
        let default = serde_json::to_value(resolved(&[]).recorded()).unwrap();
        assert!(default.get("contract").is_none());
    }

    #[test]
    fn a_task_too_large_to_share_its_gpu_runs_alone() {
        assert_eq!(resolved(&[]).lanes, 1);
        let config = resolved(&["--lanes", "2"]);
        // Over a sixth of 80 GiB: a 14 GiB task; a 12 GiB one shares.
        assert!(config.alone(Some(14 << 30)));
        assert!(!config.alone(Some(12 << 30)));
        assert!(!config.alone(None));
        // One lane, or smaller sizes than the facts count, share nothing worth guarding.
        assert!(!resolved(&["--lanes", "1"]).alone(Some(14 << 30)));
        assert!(!resolved(&["--lanes", "2", "--scale", "small"]).alone(Some(14 << 30)));
    }

    #[test]
    fn policies_come_from_their_flags() {
        let default = resolved(&[]);
        assert_eq!(default.gpu_use, GpuUse::Shared);
        assert_eq!(default.delta, crate::stats::DELTA_SHARED);
        assert_eq!(default.sandbox, sandbox::Mode::Auto);
        assert_eq!(default.shard, None);
        let dedicated = resolved(&["--dedicated", "--sandbox", "off"]);
        assert_eq!(dedicated.gpu_use, GpuUse::Dedicated);
        assert_eq!(dedicated.delta, crate::stats::DELTA_DEDICATED);
        assert_eq!(dedicated.sandbox, sandbox::Mode::Off);
        let shard = resolved(&["--shard", "1/3", "--seed", "7"]).shard.unwrap();
        assert_eq!((shard.index, shard.count), (1, 3));
    }

    #[test]
    fn the_kernelbench_tolerance_is_recorded_and_resumes_only_alike() {
        let default = resolved(&[]).recorded();
        assert_eq!(default.kernelbench_tolerance, Some(1e-4));
        let old = resolved(&["--kernelbench-tolerance", "1e-2"]).recorded();
        assert_eq!(old.kernelbench_tolerance, Some(1e-2));
        // KernelBench's own tolerance for the precision unless given (its eval's
        // get_tolerance_for_precision: fp16 and bf16 1e-2).
        for precision in ["fp16", "bf16"] {
            let half = resolved(&["--precision", precision]).recorded();
            assert_eq!(half.kernelbench_tolerance, Some(1e-2), "{precision}");
        }
        let asked = resolved(&["--precision", "fp16", "--kernelbench-tolerance", "1e-4"]);
        assert_eq!(asked.recorded().kernelbench_tolerance, Some(1e-4));
        assert_eq!(
            default.differences(&old),
            ["kernelbench_tolerance 0.0001 against 0.01"]
        );
        // KernelBench's eval run again on every evaluation is a setting of its own, written
        // only when asked for, so records from before it resume alike.
        let asked = resolved(&["--kernelbench-eval"]).recorded();
        assert!(asked.kernelbench_eval && !default.kernelbench_eval);
        assert_eq!(
            asked.differences(&default),
            ["kernelbench_eval true against unset"]
        );
    }
}
