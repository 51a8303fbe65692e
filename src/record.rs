//! The run record: one plain serde value that every report is made from, written as
//! `results.json` after each evaluation so that a killed run loses nothing.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

use crate::stats::{Decision, Speedup};
use crate::task::TaskId;
use crate::verdict::{Rewritten, Verdict};
use crate::worker::CheckName;

#[cfg(test)]
pub(crate) mod fixtures;

/// Bumped whenever a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

/// `--contract`: which module contract the gate holds a submission to (a recorded setting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ContractRule {
    /// kbench's: a `contract` verdict fails the gate like any other failure.
    #[default]
    Kbench,
    /// KernelBench's, which checks values only: a `contract` verdict is a warning (still
    /// counted in the summary, and named by the gate).
    Kernelbench,
}

impl ContractRule {
    pub fn is_kbench(&self) -> bool {
        *self == ContractRule::Kbench
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub kbench_version: String,
    pub run_id: String,
    pub started_at: String,
    pub environment: Environment,
    pub config: RecordedConfig,
    pub evaluations: Vec<Evaluation>,
    pub unmatched: Vec<crate::submission::Unmatched>,
    /// `--published FILE`: the published results the evaluations are compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// The command line that started the run (empty in records written before it was kept).
    #[serde(default)]
    pub command: Vec<String>,
    /// `--shard I/N`: this record is one shard of a run (`kbench merge` joins them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
    /// `kbench merge --unauthenticated`: the shards' records were merged without a MAC to
    /// check (shards run with `--seed N`, a public seed), so any of their rows may have been
    /// edited before the merge.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unauthenticated: bool,
    /// `kbench serve --instance NAME`: this record is one instance's of a service run on several
    /// (`kbench merge` joins them, each request once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The key results.json is sealed with each time it is written (`record_mac`): the run's,
    /// when its seed came from `--seed-file`. Never written.
    #[serde(skip)]
    pub key: Option<crate::record_mac::RecordKey>,
}

impl RunRecord {
    /// A record written by a run of this schema, from its bytes (`--resume`, `merge` and the
    /// reports over runs read it so).
    pub fn parse(bytes: &[u8]) -> Result<RunRecord> {
        let record: RunRecord = serde_json::from_slice(bytes)
            .map_err(|e| Error::Other(format!("read results.json: {e}")))?;
        if record.schema_version != SCHEMA_VERSION {
            return Err(Error::Usage(format!(
                "read results.json: it has schema {}, this kbench reads {SCHEMA_VERSION}",
                record.schema_version
            )));
        }
        Ok(record)
    }

    /// The record of a run: `path` is its folder (holding results.json) or the file itself.
    /// Returns the folder its log paths are relative to, and the record.
    pub fn read(path: &Path) -> Result<(PathBuf, RunRecord)> {
        let (dir, file) = if path.is_dir() {
            (path.to_path_buf(), path.join("results.json"))
        } else {
            let dir = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
            (dir, path.to_path_buf())
        };
        let bytes = std::fs::read(&file).map_err(|e| Error::read(&file, e))?;
        let record = RunRecord::parse(&bytes)
            .map_err(|e| Error::Usage(format!("{e} (in {})", file.display())))?;
        Ok((dir, record))
    }
}

/// What the run ran on: from the Python probe (torch, CUDA, GPUs) and NVML (driver).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Environment {
    pub os: String,
    pub python: Option<String>,
    pub torch: Option<String>,
    pub torch_cuda: Option<String>,
    pub triton: Option<String>,
    pub driver: Option<String>,
    pub gpus: Vec<Value>,
    pub cpu: Option<String>,
    /// Copy bandwidth and GEMM rates measured at start-up, behind every %SOL of the run.
    #[serde(default)]
    pub ceilings: Option<Ceilings>,
}

impl Environment {
    /// The GPU models present, distinct, joined by ';' (empty without a GPU).
    pub fn gpu_names(&self) -> String {
        let mut names: Vec<&str> = self
            .gpus
            .iter()
            .filter_map(|g| g.get("name")?.as_str())
            .collect();
        names.dedup();
        names.join(";")
    }
}

/// The settings that decide the numbers; a resumed run must have the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedConfig {
    pub tasks: String,
    pub device: String,
    pub precision: String,
    pub atol: f64,
    pub rtol: f64,
    pub trials: u32,
    pub ci_target: f64,
    pub max_samples: u32,
    pub budget_s: f64,
    /// Timing mode: "offline" (kbench's protocol) or "kernelbench" (upstream's loop).
    pub mode: String,
    #[serde(default)]
    pub library_policy: String,
    /// `--baseline eager,compile`: each timing also holds the speedup over torch.compile.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compile_baseline: bool,
    /// `--process-check always`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub process_check_always: bool,
    /// None when the seed was secret.
    pub seed: Option<u64>,
    /// `--seed-file`: the SHA-256 of the seed, which stays secret (shards of one run must
    /// agree on it). Such a run's results.json ends in a MAC under a key derived from the seed
    /// (`record_mac`), which `kbench merge --seed-file` checks; a `--seed N` run's cannot be
    /// authenticated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_sha256: Option<String>,
    pub overrides: Value,
    /// `--kernelbench-tolerance`: the atol and rtol of KernelBench's own verdict
    /// (`Evaluation::kernelbench_correct`); unset in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench_tolerance: Option<f64>,
    /// `--kernelbench-eval`: KernelBench's verdict comes from its eval run again as it runs on
    /// every evaluation whose trials ran (`kernelbench.environment`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernelbench_eval: bool,
    /// `--sanitize`: each correct candidate's kernels also ran under compute-sanitizer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sanitize: bool,
    /// `--profile`: the kernel profiler each passing or timed candidate's kernels, and the
    /// reference's, ran under once (`ncu`; `Evaluation::ncu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// `--compat`: known toolchain drift was rewritten in the staged submissions
    /// (`Build::compat`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compat: bool,
    /// `--contract`: the module contract the gate holds submissions to; unset for kbench's own.
    #[serde(default, skip_serializing_if = "ContractRule::is_kbench")]
    pub contract: ContractRule,
}

impl RecordedConfig {
    /// The first 16 hex digits of the SHA-256 of the settings as results.json writes them: two
    /// runs with the same hash ran with the same settings (a recorded seed included).
    pub fn hash(&self) -> String {
        use sha2::Digest;
        let json = serde_json::to_vec(self).expect("the settings serialize");
        let digest = sha2::Sha256::digest(json);
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The settings in which this differs from `other`, each as `name A against B` (as
    /// results.json writes them), so a refusal names the flag to fix rather than printing both.
    pub fn differences(&self, other: &RecordedConfig) -> Vec<String> {
        let as_map = |c: &RecordedConfig| match serde_json::to_value(c) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let (a, b) = (as_map(self), as_map(other));
        let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
        names.sort();
        names.dedup();
        let shown = |v: Option<&Value>| v.map_or("unset".into(), Value::to_string);
        names
            .into_iter()
            .filter(|name| a.get(*name) != b.get(*name))
            .map(|name| {
                format!(
                    "{name} {} against {}",
                    shown(a.get(name)),
                    shown(b.get(name))
                )
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    /// Imported and built (or nothing to build).
    Ok,
    /// Syntax error or failed extension build: the submission cannot run.
    Failed,
    /// Import failed without a GPU for another reason; the GPU worker tries again.
    ImportFailed,
    Timeout,
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub status: BuildStatus,
    pub message: String,
    pub log: String,
    pub seconds: f64,
    pub cache_hit: bool,
    /// Kernels the submission created while importing (extensions, Triton, CuPy), and while
    /// the pool constructed it and called it once.
    pub kernels: Vec<String>,
    /// SHA-256 of the build folder's artifacts when built: a cached build is reused only while
    /// they still hash to it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifacts_sha256: String,
    /// How far the compile pool ran the submission so that its builds happen there: "import",
    /// "construct" (ModelNew on fake tensors) or "forward" (one call on fake tensors); empty
    /// when the pool did not run it (nothing to build, or the import failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warmed: String,
    /// Why the pool's warm-up stopped short of a forward (the error's first line).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warm_note: String,
    /// Extension loads that compiled in the compile pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pool_compiled: Vec<String>,
    /// Extension loads that compiled in the evaluation slot (a build the pool missed): empty
    /// when the slot's load was a cache hit; None when the candidate never loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_compiled: Option<Vec<String>>,
    /// Why the cache's record of this build was not trusted (it did not authenticate under the
    /// cache's key), in the evaluation that built it again only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cache_note: String,
    /// `--compat`'s rewrites of the staged copy, each `what (N places)` (`compat`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compat: Vec<String>,
    /// A failed build's known toolchain drift, what of the toolchain moved (the worker's
    /// `WorkerError::drift`, kept where the build with the drift rewritten builds): the
    /// verdict is `environment`. Records written before it was recorded have none; their
    /// verdicts are recorded with them and are not decided again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// Where the build succeeded but the module fell back from a build that met known
    /// toolchain drift (caught inside the submission): what the pool's second build, with the
    /// drift rewritten, did. The verdict is `environment` only where that one builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_rewritten: Option<Rewritten>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub index: u32,
    pub correct: bool,
    /// The reference's own output was not finite: the trial says nothing about the kernel.
    #[serde(default)]
    pub uncheckable: bool,
    pub reason: String,
    pub max_abs_diff: Option<f64>,
    pub max_rel_diff: Option<f64>,
    /// KernelBench's rule on this trial (shapes, allclose at `--kernelbench-tolerance`): on
    /// KernelBench's trials only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench_correct: Option<bool>,
    /// The least tolerance (atol = rtol) at which KernelBench's rule passes this trial; 1.0
    /// where none of its versions' tolerances does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench_needed: Option<f64>,
}

/// How a runtime check ended; ordered from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Skip,
    Pass,
    Warn,
    Fail,
}

/// One published result: a row of `published.csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishedRow {
    pub level: u32,
    pub problem_id: u32,
    /// The submission's path under the import's `submissions/` folder, as `kbench eval` names
    /// it (e.g. `level1/19_ReLU.py`); empty when no code was published.
    pub submission: String,
    /// The source's own correctness verdict, where the format has one.
    pub correct: Option<bool>,
    /// The published speedup over eager PyTorch and the source column it came from.
    pub speedup: Option<f64>,
    pub speedup_column: String,
    /// The published speedup over torch.compile (default mode) and its source column.
    pub speedup_vs_compile: Option<f64>,
    pub speedup_vs_compile_column: String,
    /// Any other published speedups, `column=value` separated by `;`.
    pub other_speedups: String,
    /// The system that published it: the import's format (`cuda-l1`, `sakana`, ...); empty in
    /// files written before it was recorded.
    #[serde(default)]
    pub system: String,
}

/// The published table a run compares with (`published`), kept in the run record so `--resume` keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The file as given to `--published`.
    pub file: String,
    pub rows: Vec<PublishedRow>,
}

/// What the machine's GPU reaches at best, measured by the `ceilings` worker (`sol`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Ceilings {
    /// Device-to-device copy, bytes read plus bytes written per second, in GB/s.
    pub copy_gbps: f64,
    /// Dense GEMM rate in TFLOP/s per dtype: "fp32" (TF32 off), "tf32", "bf16", "fp16".
    pub gemm_tflops: std::collections::BTreeMap<String, f64>,
    /// The GPU they were measured on.
    pub gpu: String,
    /// Seconds the measurement took (not counting the worker's start-up).
    pub measured_s: f64,
}

/// One named runtime check (docs/design/verifier.md's names, e.g. `timing.stream_join`) and its evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Check {
    pub name: CheckName,
    pub outcome: Outcome,
    pub evidence: String,
    /// Time the check cost, outside any timed region.
    #[serde(default)]
    pub seconds: f64,
    /// How many times it ran in this evaluation (trials, timed blocks).
    #[serde(default = "one")]
    pub runs: u32,
}

fn one() -> u32 {
    1
}

/// Add a check's result under its name: runs and seconds add up, the worst outcome and its
/// evidence stay.
pub fn merge_check(checks: &mut Vec<Check>, check: Check) {
    match checks.iter_mut().find(|c| c.name == check.name) {
        Some(seen) => {
            seen.runs += check.runs;
            seen.seconds += check.seconds;
            if check.outcome > seen.outcome {
                seen.outcome = check.outcome;
                seen.evidence = check.evidence;
            }
        }
        None => checks.push(check),
    }
}

/// Raw timing samples (ms) of one arm, in the order they were taken, with the round of each.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    pub samples_ms: Vec<f64>,
    pub rounds: Vec<u32>,
    pub median_ms: f64,
    /// Tukey's outlier counts over the samples (labels only: no sample is dropped).
    #[serde(default)]
    pub outliers: crate::stats::OutlierCounts,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// How the times were taken: "cuda_events_flush_blocker" or "cpu_perf_counter"; when a
    /// check distrusts the candidate's own times, "audit_wall_clock" (`Audit::flagged`) or
    /// "charged_wall_envelope" (`timing.wall_envelope`); the other modes name theirs.
    pub method: String,
    pub reference: Arm,
    pub candidate: Arm,
    /// Ratio of medians, reference over candidate, with a bootstrap interval over whole rounds.
    pub speedup: f64,
    pub speedup_ci_low: f64,
    pub speedup_ci_high: f64,
    pub ci_level: f64,
    /// FASTER / SLOWER / SAME / INCONCLUSIVE against the practical band `delta`.
    pub label: Decision,
    pub delta: f64,
    /// Cross-checks: Hodges-Lehmann speedup on log times with its Mann-Whitney interval, and the
    /// one-sided Mann-Whitney p-value that the candidate is faster.
    pub hodges_lehmann: Option<Speedup>,
    pub p_faster: Option<f64>,
    /// Ratio of means, for comparison with upstream KernelBench's numbers.
    pub mean_ratio: f64,
    /// Hyperfine-style warnings per arm (warm-up too short, noisy environment).
    pub warnings: Vec<String>,
    /// Rounds taken again because the GPU reported hardware or thermal slowdown.
    pub rounds_discarded: u32,
    /// NVML readings after each round (empty without NVML, e.g. on the CPU).
    pub telemetry: Vec<RoundTelemetry>,
    /// Why sampling ended: "precision" (--ci-target reached), "max_samples" or "budget".
    #[serde(default)]
    pub stopped: String,
    /// Half-width of the speedup's interval relative to the speedup (0.01 = ±1 %).
    #[serde(default)]
    pub ci_half_width: f64,
    /// The blocker ahead of each call (µs) and the samples whose host submission outlasted it.
    #[serde(default)]
    pub blocker_us: f64,
    #[serde(default)]
    pub blocker_overflows: u32,
    /// Median SM clock per arm (NVML, read after each block of samples).
    #[serde(default)]
    pub reference_sm_mhz: Option<f64>,
    #[serde(default)]
    pub candidate_sm_mhz: Option<f64>,
    /// The speedup in SM cycles, given when the arms' clocks differ by more than 2 %.
    #[serde(default)]
    pub cycle_speedup: Option<f64>,
    /// Host wall time (ms) of calls between device-wide synchronizations, no blocker.
    #[serde(default)]
    pub audit: Option<Audit>,
    #[serde(default)]
    pub server: Option<Server>,
    /// Calls per sample when calls are under 10 µs (each sample is a burst, divided by this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// For a forward that synchronizes with the host inside: the systematic relative error its
    /// labels allow for (`timing::allow_host_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_error: Option<f64>,
    /// The CPU both workers' submitting threads ran on while timed (`cpus::reserve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// `--baseline eager,compile`: the candidate against torch.compile of the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileBaseline>,
    /// The process check of a FASTER or SLOWER label (`timing::allow_process_effect`): the
    /// reference timed in the candidate's process too; the interval above includes its effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessEffect>,
    /// The task's speed of light on this machine (ms, `sol::t_sol_ms`); None without measured
    /// ceilings or task facts.
    #[serde(default)]
    pub sol_ms: Option<f64>,
    /// `sol_ms` over the candidate's median, in percent (docs/design/timing.md 10.4 item 18).
    #[serde(default)]
    pub percent_sol: Option<f64>,
    /// `sol_ms` over the reference's median, in percent: how close eager PyTorch gets.
    #[serde(default)]
    pub reference_percent_sol: Option<f64>,
    /// The times cannot be right (the candidate ran faster than the speed of light): the gate
    /// fails the evaluation and the suite aggregates leave its speedup out.
    #[serde(default)]
    pub invalid: bool,
}

/// The method of a candidate's times charged what the wall clock does not explain
/// (`timing.wall_envelope`).
pub const CHARGED: &str = "charged_wall_envelope";

impl Timing {
    /// Whether the speedup counts as a result: not ruled out by the speed of light, and not
    /// charged by `timing.wall_envelope` (a forger keeps the allowance in charged times).
    pub fn counts(&self) -> bool {
        !self.invalid && self.method != CHARGED
    }
}

/// Arm B (docs/design/timing.md): torch.compile of the reference (inductor, default mode), compiled in the
/// trusted worker before timing and timed in the same rounds as the eager reference and the
/// candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompileBaseline {
    /// Arm B's samples (ms).
    pub reference: Arm,
    /// Seconds the compiling first call took, outside the clock.
    pub compile_s: f64,
    /// B's median over the candidate's, with the paired bootstrap interval over rounds.
    pub speedup: f64,
    pub speedup_ci_low: f64,
    pub speedup_ci_high: f64,
    pub label: Decision,
    /// The eager reference's median over B's: what torch.compile gains on this task.
    pub compile_gain: f64,
}

/// How differently the two workers' processes run the same kernels: the task's reference timed
/// in the reference worker (A) and in the candidate's worker (the control arm A', beside the
/// candidate's arm, on its memory), interleaved as A and the candidate are. cuDNN and cuBLAS
/// choose algorithms per process, and where inputs and outputs lie can move a kernel's time, so
/// an identity submission can read a few percent FASTER or SLOWER in one process pair and not in
/// another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessEffect {
    /// A's median over A''s, with the paired bootstrap interval over rounds.
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub reference_ms: f64,
    pub control_ms: f64,
    pub rounds: u32,
    /// The speedup's interval before it was widened to the process-corrected speedup.
    pub measured_ci_low: f64,
    pub measured_ci_high: f64,
}

/// `--mode server`: per-request statistics of each arm and the tail speedup (the speedup
/// above is then the ratio of median request latencies).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// Mean of the exponential idle gap before each request.
    pub mean_gap_ms: f64,
    pub reference: Latency,
    pub candidate: Latency,
    /// Ratio of the 99th percentiles of request latency, with its bootstrap interval.
    pub p99_speedup: Speedup,
}

/// One arm's request latencies (host clock around submission and completion) and device times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub requests: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub device_p50_ms: f64,
    pub device_ms: Vec<f64>,
    /// The SM clock (NVML) read just before each request: an idle GPU clocks down between
    /// requests. Empty where the worker could not read NVML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_mhz: Vec<f64>,
}

/// Audit samples (docs/design/timing.md step 9): what events cannot see, such as work on another stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    /// Each audit call's host wall time up to a device-wide synchronize, less its blocker (ms).
    pub reference_ms: Vec<f64>,
    pub candidate_ms: Vec<f64>,
    /// Each call's wall time beyond the device's interval for it: the synchronize's latency
    /// for an honest call, plus any work left on another stream (empty in older records).
    #[serde(default)]
    pub reference_excess_ms: Vec<f64>,
    #[serde(default)]
    pub candidate_excess_ms: Vec<f64>,
    /// The candidate's excess was more than allowed: the speedup above is then computed from
    /// audit wall times (method "audit_wall_clock").
    pub flagged: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundTelemetry {
    pub round: u32,
    pub reading: crate::nvml::Telemetry,
    pub tag: crate::nvml::RoundTag,
}

/// Where an evaluation's wall time went, outside the build (which `Build::seconds` holds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Worker start-up (Python, torch, CUDA context), overlapped with the previous evaluation.
    pub worker_startup_s: Option<f64>,
    /// Loading task and submission and constructing both models.
    pub load_s: f64,
    /// The correctness trials, less the waits between their steps (in `gpu_wait_s`).
    pub correctness_s: f64,
    pub timing_s: f64,
    /// Waiting for the GPU's gate: for other lanes' steps before loading, for their steps and
    /// timings before timing alone (`lanes`).
    #[serde(default)]
    pub gpu_wait_s: f64,
    /// Within `correctness_s`: the candidate worker's trial requests and the reference worker's
    /// checks of them, summed by kbench's clock (one waits while the other runs).
    #[serde(default)]
    pub trials_candidate_s: f64,
    #[serde(default)]
    pub trials_reference_s: f64,
    /// Within `timing_s`: both arms' set-up and warm-up, the timed outputs' checks and the
    /// process check's rounds; the rest of it is the sampled rounds.
    #[serde(default)]
    pub warmup_s: f64,
    #[serde(default)]
    pub output_checks_s: f64,
    #[serde(default)]
    pub process_check_s: f64,
    /// Within `timing_s`: stopping and continuing the processes the candidate started beside its
    /// worker around each timing request (`Link::pause`).
    #[serde(default)]
    pub pause_s: f64,
    /// Ending the candidate's worker: its kill, and the wait until its PID namespace is empty.
    #[serde(default)]
    pub candidate_end_s: f64,
    /// After timing: the candidate's state checks and both workers' profiled calls.
    #[serde(default)]
    pub after_timing_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub task: TaskId,
    pub task_name: String,
    pub file: String,
    pub sample: Option<u32>,
    pub sha256: String,
    pub verdict: Verdict,
    /// Why the verdict, in one line (empty for a clean pass).
    pub reason: String,
    pub build: Option<Build>,
    /// Static checks of the source at warning level and above: evidence, not a verdict.
    #[serde(default)]
    pub findings: Vec<crate::check::Finding>,
    pub trials: Vec<Trial>,
    /// KernelBench's own verdict: every one of its trials ran, and its outputs had the
    /// reference's shapes and were allclose at `kernelbench_tolerance`; the trials are KernelBench's
    /// eval run as it runs (`kernelbench.environment`) under `--kernelbench-eval` or where kbench's
    /// checks cut one short, else kbench's plain trials. None when the trials were not reached or could not say
    /// (a build or load that failed, a skip).
    #[serde(default)]
    pub kernelbench_correct: Option<bool>,
    /// The least tolerance (atol = rtol) at which KernelBench's rule passes every one of its
    /// trials: KernelBench's verdict at any tolerance from one run (`kernelbench_correct` at
    /// `t` is `kernelbench_needed <= t`, up to float32 rounding at the boundary). 1.0 where no
    /// tolerance of KernelBench's versions passes (a failed call included); None where
    /// `kernelbench_correct` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench_needed: Option<f64>,
    /// Runtime checks with their evidence, one per check name (the worst outcome seen).
    #[serde(default)]
    pub checks: Vec<Check>,
    /// Degenerate-task flags from the task's facts (constant_output, identity, ...): a result on
    /// such a task is never counted as a win.
    #[serde(default)]
    pub task_flags: Vec<String>,
    pub timing: Option<Timing>,
    /// Both arms' kernel launches in their profiled calls (GPU only), which
    /// `profile.reference_ops` compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::reference_ops::Profiles>,
    /// `--profile ncu`: both arms' kernels as Nsight Compute measured them in one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ncu: Option<crate::nsight::NcuProfile>,
    /// Worker logs kept for this evaluation, relative to the output folder.
    pub logs: Vec<String>,
    pub phases: Phases,
    pub seconds: f64,
    /// How the processes that ran the submission's code were confined (`--sandbox`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
    /// The service request it answered (`kbench serve`): the request's id and where it was
    /// judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<Served>,
}

/// Where a service judged a request, and the id the client gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Served {
    /// The client's id for the request (its retries carry the same), if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The instance's name (`--instance`), or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// The host that judged it.
    pub node: String,
    /// The GPU it ran on (its index on the node, NVML's order); None on the CPU.
    pub gpu: Option<u32>,
}

impl Evaluation {
    pub fn label(&self) -> String {
        format!("level{}/{}", self.task.level, self.task_name)
    }
}
