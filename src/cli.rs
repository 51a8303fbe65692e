//! The command line as typed: raw flags only. `config` resolves them into one `Config`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::task::TaskId;

const EXIT_CODES: &str = "\
Exit codes:
  0  the gate passed: every evaluated kernel is correct (and fast enough, with --min-speedup)
  1  the gate failed: a kernel is incorrect, failed to build or run, timed out, crashed,
     is slower than --min-speedup, or no_kernel under --require-kernel; or nothing was
     evaluated, or a file matched no task (unless --allow-empty, --allow-unmatched)
  2  kbench itself failed (bad arguments, unreadable input, no Python with torch)
  130  SIGINT, SIGTERM or SIGHUP stopped eval (its workers ended; --resume continues it)";

#[derive(Debug, Parser)]
#[command(name = "kbench", version, about = "Benchmark and verify AI-generated GPU kernels on the KernelBench tasks", after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate submissions: build, check correctness, time against the reference
    #[command(after_help = EXIT_CODES)]
    Eval(Box<EvalArgs>),
    /// List the tasks found
    List(ListArgs),
    /// Check the Python, torch, CUDA, compiler and NVML set-up, with a fix for each problem;
    /// exit 1 when a check the device needs fails
    Doctor(DoctorArgs),
    /// Static checks of submission sources (no GPU, no torch); exit 1 on an error-level finding
    Check(CheckArgs),
    /// Import published kernels: OUT/tasks/ (the references they were timed against),
    /// OUT/submissions/ (mirrored layout) and OUT/published.csv (their published results)
    Import(ImportArgs),
    /// Write one self-contained HTML page for runs: plots, a sortable table with log links,
    /// the environment and the command (eval writes RUN_DIR/report.html itself)
    Report(ReportArgs),
    /// Compare run B with run A task by task: speedup ratio B/A with its interval, verdict
    /// changes, the suite's geometric mean
    #[command(after_help = COMPARE_EXIT_CODES)]
    Compare(CompareArgs),
    /// Merge runs of several submitters (one run each) into one ranked leaderboard CSV
    Leaderboard(LeaderboardArgs),
    /// Join the output folders of the shards of one run (`eval --shard`) into one run's
    /// results.json, results.csv, junit.xml and summary.json
    #[command(after_help = EXIT_CODES)]
    Merge(MergeArgs),
    /// A warm evaluation service: POST /v1/evaluate takes a task and a submission's source
    /// (JSON) and answers its evaluation, judged as `eval` judges it; every result is appended
    /// to the run record in --out. Takes eval's flags (no submission path)
    Serve(Box<ServeArgs>),
}

const COMPARE_EXIT_CODES: &str = "\
Exit codes:
  0  no regression beyond --fail-on-regression (always, without it)
  1  a task correct in A is not in B, or a task's or the suite's B/A interval lies wholly
     below 1 - X
  2  kbench itself failed (unreadable or incompatible results.json)";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run folders (holding results.json) or results.json files
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// The page to write [default: RUN_DIR/report.html for one run, else report.html]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The earlier run (folder or results.json)
    #[arg(value_name = "A")]
    pub before: PathBuf,
    /// The later run (folder or results.json)
    #[arg(value_name = "B")]
    pub after: PathBuf,
    /// Practical band of the labels: improved above 1 + F, regressed below 1 - F
    #[arg(long, value_name = "F", default_value_t = 0.03)]
    pub band: f64,
    /// Exit 1 when a task or the suite regressed by more than X (interval of B/A wholly below
    /// 1 - X; 0.05 = 5 %), or a task correct in A is not in B
    #[arg(long, value_name = "X")]
    pub fail_on_regression: Option<f64>,
}

#[derive(Debug, Args)]
pub struct LeaderboardArgs {
    /// One run per submitter (folder or results.json); the submitter is the folder's name
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// The board CSV to write [default: stdout]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImportFormat {
    /// CUDA-L1's release: JSON Lines, one row per task (level_id, task_id, ref_code,
    /// custom_code, score_*), for any GPU's file
    CudaL1,
    /// An upstream KernelBench run directory: level_L_problem_P_sample_S_kernel.py files and
    /// their eval_results.json where present (no references: evaluate with --tasks)
    KernelbenchRun,
    /// Sakana AI CUDA Engineer archive rows as JSON Lines (Level_ID, Task_ID, Kernel_Name,
    /// CUDA_Code, PyTorch_Code_Module, PyTorch_Code_Functional, Correct, CUDA_Speedup_*);
    /// for the Parquet archive convert first: python -c "import pandas as pd;
    /// pd.read_parquet('IN.parquet').to_json('OUT.jsonl', orient='records', lines=True)"
    Sakana,
    /// A CUDA-L2 checkout (or a folder with its layout): kernels/GPU_F32F16F16F32/M_N_K.cu,
    /// pybind/hgemm_GPU_fp32.cc and eval_results/*_speedup_{offline,server}.csv; a task per
    /// shape, a submission per kernel (built with CUTLASS: see kbench doctor)
    CudaL2,
    /// Stanford's good-kernels checkout: a folder per problem with ref.py (the task) and src.py
    /// (the kernel); the published figures are its blog post's (FP32, on an L40S)
    GoodKernels,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The published format
    #[arg(value_enum)]
    pub format: ImportFormat,
    /// The published file (cuda-l1, sakana) or folder (kernelbench-run, cuda-l2, good-kernels)
    pub src: PathBuf,
    /// Output folder, created; must be missing or empty
    pub out: PathBuf,
    /// cuda-l2: the GPU whose kernels to import (the folder kernels/GPU_F32F16F16F32)
    #[arg(long, default_value = "h100")]
    pub gpu: String,
    /// cuda-l2: the shapes to import, M_N_K separated by commas (with --sample: these too)
    #[arg(long, value_delimiter = ',', value_name = "M_N_K")]
    pub shapes: Vec<String>,
    /// cuda-l2: N shapes chosen deterministically so that each value of M, N and K is used
    /// about equally (without --shapes and --sample: every kernel)
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' output folders (each holding results.json), every shard once
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// Output folder of the merged run
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Merge only once every shard has finished: while one is missing its results.json or has
    /// not finished, say which and exit 0 without writing (each shard can run this as it ends;
    /// the last one merges)
    #[arg(long)]
    pub if_complete: bool,
    /// Replace the merged run already in --out (a merge made again after a shard was rerun)
    #[arg(long)]
    pub replace: bool,
    /// The seed file the shards ran with (`eval --seed-file`): each shard's results.json must
    /// carry a MAC under a key derived from it, or the merge is refused
    #[arg(long, value_name = "FILE", conflicts_with = "unauthenticated")]
    pub seed_file: Option<PathBuf>,
    /// Merge shards whose records nothing authenticates (run with --seed N, a public seed): they
    /// are taken as they are, and the merged record says so (`unauthenticated`)
    #[arg(long)]
    pub unauthenticated: bool,
}

/// What fails the gate beyond a failed verdict (`gate::judge`).
#[derive(Clone, Debug, Default, Args)]
pub struct GateArgs {
    /// Fail the gate when a correct evaluation's speedup is below X (every timed correct one:
    /// `no_kernel` included)
    #[arg(long, value_name = "X")]
    pub min_speedup: Option<f64>,
    /// Fail the gate on `no_kernel` (correct, but no kernel of its own did the work); without
    /// it a `no_kernel` result is reported and passes: a pure-PyTorch file computes the task
    #[arg(long)]
    pub require_kernel: bool,
    /// Pass the gate when nothing was evaluated (no submission of a selected task, or every
    /// one skipped)
    #[arg(long)]
    pub allow_empty: bool,
    /// Pass the gate when files in the submission folder match no task (they are still listed)
    #[arg(long)]
    pub allow_unmatched: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Submission files to check
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Also print info-level findings
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub python: PythonArg,
}

#[derive(Clone, Debug, Args)]
pub struct TaskSource {
    /// A KernelBench-format tree: levelN/ folders (any N) of ID_Name.py files, or one flat folder of them [default: the tasks built into kbench]
    #[arg(long, value_name = "DIR")]
    pub tasks: Option<PathBuf>,
    /// Only tasks of this level
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub level: Option<u32>,
}

#[derive(Clone, Debug, Args)]
pub struct PythonArg {
    /// Python with torch [default: $KBENCH_PYTHON, else .venv/bin/python if present, else python3]
    #[arg(long, value_name = "PY")]
    pub python: Option<String>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The device to check the set-up for: cuda needs CUDA and nvcc, cpu does not, auto picks
    /// as eval does (cuda when torch sees a GPU); both need torch, ninja and a C++ compiler
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    pub device: DeviceArg,
    #[command(flatten)]
    pub python: PythonArg,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub source: TaskSource,
    /// Also show facts derived from each task file: bytes, FLOPs, input-only constants, and
    /// degenerate or non-deterministic flags (needs Python with torch; cached after the first run)
    #[arg(long)]
    pub meta: bool,
    #[command(flatten)]
    pub python: PythonArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProfilerArg {
    /// NVIDIA Nsight Compute
    Ncu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    Auto,
    Cuda,
    Cpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// kbench's protocol: read flush, blocker, interleaved rounds, ratio of medians
    Offline,
    /// Upstream KernelBench's loop: write flush, no blocker, candidate then reference, means
    Kernelbench,
    /// Isolated requests at an idle GPU (exponential gaps, 100 per second): request latency
    /// p50/p90/p99 per arm; never pooled with offline numbers
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// The task's PyTorch model, run eagerly (always timed)
    Eager,
    /// torch.compile of the task's model (inductor, default mode)
    Compile,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProcessCheckArg {
    /// For FASTER and SLOWER labels whose interval lies within 1.5x of 1
    Auto,
    /// For every timed evaluation (SAME labels included)
    Always,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LibraryPolicyArg {
    /// At most half of the GPU time in library kernels (cuBLAS, cuDNN, ATen), on every level
    Strict,
    /// At most half on level 1; levels 2 and 3 may keep library GEMMs/convolutions and fuse the rest
    /// (not rerun every kernel launch of the reference's: profile.reference_ops)
    Partial,
    /// No limit; the share is still reported
    Any,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Confine submission code where the host allows it; otherwise warn loudly and record it
    Auto,
    /// Refuse to run (exit 2) when submission code cannot be confined
    Require,
    /// Run submission code unconfined, with kbench's own rights (recorded)
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    Fp32,
    Fp16,
    Bf16,
}

#[derive(Clone, Debug, Args)]
pub struct EvalArgs {
    /// A submission directory (mirrored levelN/ layout or KernelBench run files), or one file with --task
    pub path: PathBuf,
    #[command(flatten)]
    pub source: TaskSource,
    /// The task of a single-file submission, e.g. 1/19
    #[arg(long, value_name = "LEVEL/N")]
    pub task: Option<TaskId>,
    /// Only these tasks, e.g. 1/19,2/3
    #[arg(long, value_delimiter = ',', value_name = "LEVEL/N,...")]
    pub only: Vec<TaskId>,
    /// Where kernels run; auto picks CUDA when torch sees a GPU
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    pub device: DeviceArg,
    /// GPUs to use, one evaluation at a time on each [default: all]
    #[arg(long, value_delimiter = ',', value_name = "0,1,...")]
    pub gpus: Vec<u32>,
    /// Evaluations sharing each GPU: they load and run their correctness trials side by side,
    /// and each takes the GPU alone to time. Experimental: on an H100, two lanes ran level2/1-40
    /// 15 % faster but the identity run's first 184 tasks no faster than one (each phase runs
    /// slower beside the other lane)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub lanes: u32,
    #[command(flatten)]
    pub python: PythonArg,
    /// Output folder [default: reports/run-<time>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Parallel builds [default: number of CPU cores]
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Correctness trials, each with fresh inputs
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub trials: u32,
    /// How to time: kbench's protocol, or upstream KernelBench's loop for comparison
    #[arg(long, value_enum, default_value_t = ModeArg::Offline)]
    pub mode: ModeArg,
    /// The references a submission is timed against, in the offline mode: eager (the task's
    /// PyTorch model), and with `eager,compile` also torch.compile of it (inductor, default
    /// mode, compiled before timing), interleaved in the same rounds
    #[arg(long, value_enum, value_delimiter = ',', default_value = "eager")]
    pub baseline: Vec<BaselineArg>,
    /// When the reference is also timed in the candidate's process, on the candidate's memory,
    /// to measure how differently the two processes run the same kernels (cuDNN and cuBLAS
    /// choose algorithms per process; where inputs and outputs lie can move a kernel's time);
    /// the speedup's interval then includes that effect
    #[arg(long, value_enum, default_value_t = ProcessCheckArg::Auto)]
    pub process_check: ProcessCheckArg,
    /// Stop timing a task when the 95 % interval of its speedup is within ±F (0.01 = 1 %)
    #[arg(long, value_name = "F", default_value_t = 0.01)]
    pub ci_target: f64,
    /// Most timing samples per arm before stopping short of --ci-target (kernelbench mode:
    /// its 100 trials, or fewer if this is lower)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_samples: u32,
    /// Most seconds of timing per task before stopping short of --ci-target
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub budget: f64,
    /// Precision of inputs and weights
    #[arg(long, value_enum, default_value_t = PrecisionArg::Fp32)]
    pub precision: PrecisionArg,
    /// Absolute tolerance [default: 1e-4 for fp32, 1e-2 for fp16/bf16]
    #[arg(long)]
    pub atol: Option<f64>,
    /// Relative tolerance [default: 1e-4 for fp32, 1e-2 for fp16/bf16]
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Tolerance (atol and rtol) of KernelBench's own verdict, reported beside kbench's:
    /// allclose on its plain trials and nothing else [default: KernelBench's for the
    /// precision: 1e-4 for fp32, 1e-2 for fp16/bf16] (KernelBench v0 and v0.1 used 1e-2)
    #[arg(long, value_name = "TOL")]
    pub kernelbench_tolerance: Option<f64>,
    /// Run KernelBench's eval again as KernelBench runs it (one process, its seeds and CPU-made
    /// inputs, PyTorch's own switches) for KernelBench's verdict on every evaluation whose
    /// trials ran: the verdict upstream's eval gives, at upstream's cost (minutes on tasks
    /// with large inputs). Without it KernelBench's rule judges kbench's own trials, and its
    /// eval runs only where kbench's checks ended a trial before its outputs were compared
    #[arg(long)]
    pub kernelbench_eval: bool,
    /// Run each correct candidate's kernels once more, on one trial, under NVIDIA's
    /// compute-sanitizer (memcheck, racecheck, initcheck, synccheck), confined as the candidate:
    /// an error the tool reports in a kernel of the submission's own makes it `incorrect`
    /// (docs/checks.md, `sanitizer.*`). Needs compute-sanitizer (on PATH, or in
    /// $CUDA_HOME/bin); minutes per evaluation
    #[arg(long)]
    pub sanitize: bool,
    /// Profile each passing or timed candidate's kernels, and the reference's beside them, in
    /// one call outside the timed rounds under a kernel profiler: `ncu`, NVIDIA Nsight Compute,
    /// read only (`--clock-control none`): each kernel's duration, achieved occupancy, SM and
    /// DRAM throughput as a share of peak, and arithmetic intensity, in results.json,
    /// results.csv and the report's roofline (docs/checks.md, `profile.ncu`). Needs ncu (on
    /// PATH, or in $CUDA_HOME/bin) and a GPU; no timing or verdict changes
    #[arg(long, value_enum)]
    pub profile: Option<ProfilerArg>,
    /// Seed of inputs, parameter perturbation and timing, to repeat a run exactly [default: a
    /// secret seed per run, never recorded, so no submission can predict its inputs]. Weights
    /// follow KernelBench: seed 42 before each constructor
    #[arg(long)]
    pub seed: Option<u64>,
    /// Read the seed from FILE (one decimal number), e.g. for the shards of one run: unlike
    /// --seed it stays secret (the record holds its SHA-256)
    #[arg(long, value_name = "FILE", conflicts_with = "seed")]
    pub seed_file: Option<PathBuf>,
    /// Evaluate shard I of N (0 <= I < N): every N-th submission by relative path, the same
    /// split on every machine; needs --seed or --seed-file. `kbench merge` joins the shards
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::shard::Shard>,
    /// Task sizes: full, or a named scale from each level's scale.toml (e.g. small, for CPUs)
    #[arg(long, value_name = "NAME")]
    pub scale: Option<String>,
    /// Override a task's module constant, e.g. --set batch_size=2 (a Python literal)
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub sets: Vec<String>,
    /// Seconds allowed to import and build one submission
    #[arg(long, value_name = "S", default_value_t = 600.0)]
    pub timeout_compile: f64,
    /// Seconds allowed to load a task or submission on its device and construct the model
    #[arg(long, value_name = "S", default_value_t = 300.0)]
    pub timeout_load: f64,
    /// Seconds allowed for one trial or one block of timing samples
    #[arg(long, value_name = "S", default_value_t = 120.0)]
    pub timeout_call: f64,
    /// Refuse to run when other processes compute on a chosen GPU, and judge speedups against a
    /// 1 % band (a shared GPU gets 3 %); needs NVML
    #[arg(long)]
    pub dedicated: bool,
    /// Rewrite known toolchain drift in the staged copy of each submission (never the file
    /// itself) before building: `AT_DISPATCH_*(x.type(), ...)` as `x.scalar_type()`, and
    /// architectures below the installed nvcc's lowest raised to it; each rewrite is recorded
    #[arg(long)]
    pub compat: bool,
    /// Lock the SM clock for the run: `base` (the TDP clock) or a frequency in MHz; needs
    /// --dedicated and root; restored on exit. Never on a GPU others use
    #[arg(long, value_name = "base|MHZ", requires = "dedicated")]
    pub lock_clocks: Option<String>,
    /// How much GPU time library kernels may take before a correct submission is `no_kernel`
    #[arg(long, value_enum, default_value_t = LibraryPolicyArg::Partial)]
    pub library_policy: LibraryPolicyArg,
    /// The module contract the gate holds submissions to: kbench's (a `contract` verdict
    /// fails), or KernelBench's, which checks values only (a `contract` verdict warns)
    #[arg(
        long,
        value_enum,
        value_name = "kbench|kernelbench",
        default_value = "kbench"
    )]
    pub contract: crate::record::ContractRule,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Continue the run in --out, skipping evaluations it already holds
    #[arg(long)]
    pub resume: bool,
    /// Compare with published results: a published.csv as `kbench import` writes it (rows
    /// matched by submission path and task); kept in the run record, so --resume keeps it
    #[arg(long, value_name = "FILE")]
    pub published: Option<PathBuf>,
    /// Confinement of the processes that run submission code (candidate worker, compile pool):
    /// own namespaces (PID, mount, network), own uid, read-only root, private /tmp, rlimits
    #[arg(long, value_enum, default_value_t = SandboxArg::Auto)]
    pub sandbox: SandboxArg,
}

/// eval's arguments that `serve` refuses, by id: requests bring the submissions, and no gate
/// judges the service's run. Hidden from `serve --help`.
pub const EVAL_ONLY: [&str; 9] = [
    "path",
    "task",
    "published",
    "shard",
    "lock_clocks",
    "min_speedup",
    "require_kernel",
    "allow_empty",
    "allow_unmatched",
];

#[derive(Debug, Args)]
// The service takes submissions by request, not from a path.
#[command(mut_arg("path", |a| a.required(false).default_value(".")))]
#[command(mut_args(|a| {
    let eval_only = EVAL_ONLY.contains(&a.get_id().as_str());
    a.hide(eval_only)
}))]
pub struct ServeArgs {
    /// Address and port to listen on (port 0: any free one; the first line on stdout is the
    /// service's URL). Anything but a loopback address needs a token
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8470")]
    pub listen: std::net::SocketAddr,
    /// The token every request must present as `Authorization: Bearer TOKEN` [default:
    /// $KBENCH_TOKEN; none on loopback]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Most requests admitted at once (waiting or running); more are refused with 429
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub queue: u32,
    /// Largest submission source accepted, in bytes (larger: 413)
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_source_bytes: usize,
    /// One of several instances of one run: its name. Instances share a --seed-file and an out
    /// root (each --out ROOT/NAME); each result says which instance, node and GPU judged it, a
    /// request id judged by any of them is answered from its result, and `kbench merge` joins
    /// their records into one run
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// Write the service's URL (the host's name in place of an unspecified address) to FILE once
    /// it listens, and remove it when the service starts draining: clients find the instances
    /// of a run there (`Client.from_announced`)
    #[arg(long, value_name = "FILE")]
    pub announce: Option<PathBuf>,
    /// The host clients reach the service by, in the announced URL [default: the host's name
    /// when listening on an unspecified address, else the address] (a pod's IP on Kubernetes)
    #[arg(long, value_name = "HOST", requires = "announce")]
    pub advertise: Option<String>,
    #[command(flatten)]
    pub run: EvalArgs,
}
