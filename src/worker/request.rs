//! What kbench asks the workers, typed: one `Request` variant per command (`cmd` on the wire),
//! each with the struct of its fields; `Command::Reply` names the struct of its reply body. The
//! Python side answers from one table of commands per role (`commands()` in each worker module);
//! `tests/python/test_protocol.py` checks those tables and the request and reply types the
//! workers declare (`kbench_worker/wire/messages.py`) against `schema()`, which `super::schema`
//! derives from these types and the test `the_schema_file_is_current` keeps in
//! `protocol_schema.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request's fields and the body of its reply. The reply is declared beside the code that
/// reads it (this module knows nothing of checks, kernels or tasks), with the `impl`.
pub trait Command: Into<Request> {
    type Reply: DeserializeOwned;
}

/// Declares `Request` (one variant per command, its wire name the variant's in snake case), its
/// conversions from each command's struct, and `schema()` from the same list.
macro_rules! commands {
    ($($(#[$doc:meta])* $variant:ident($request:ident);)*) => {
        /// A request to a worker, tagged by its command.
        #[derive(Clone, Debug, Serialize)]
        #[serde(tag = "cmd", rename_all = "snake_case")]
        pub enum Request {
            $($(#[$doc])* $variant($request),)*
        }

        impl Request {
            /// The command's name on the wire.
            pub fn cmd(&self) -> String {
                match self {
                    $(Request::$variant(_) => wire_name(stringify!($variant)),)*
                }
            }
        }

        $(
            impl From<$request> for Request {
                fn from(request: $request) -> Request {
                    Request::$variant(request)
                }
            }
        )*

        /// Every command: its wire name, its request's fields and the reply fields kbench reads,
        /// typed; with the protocol's version and error kinds.
        #[cfg(test)]
        pub fn schema() -> super::schema::Protocol {
            let mut schema = super::schema::Builder::default();
            $(schema.command::<$request, <$request as Command>::Reply>(
                wire_name(stringify!($variant)),
            );)*
            schema.finish()
        }
    };
}

commands! {
    /// Whether the worker still answers.
    Ping(Ping);
    /// End the worker (answered by no reply).
    Exit(Exit);
    /// Import the submission in the compile pool, building its extensions.
    Compile(Compile);
    /// Construct the imported ModelNew and call it once on fake tensors.
    Warm(Warm);
    /// Load the task (and, in the candidate, the submission).
    Load(Load);
    /// One correctness trial in the candidate, its outputs handed over.
    Trial(Trial);
    /// One of KernelBench's trials as its eval runs it, in a candidate loaded for them.
    KernelbenchTrial(KernelbenchTrial);
    /// Compare the candidate's outputs with the reference's, in the reference worker.
    Check(CheckOutputs);
    /// Compare one timed call's output, read from the candidate's pool, with the reference's.
    CheckKept(CheckKept);
    /// New parameter values from a seed.
    Perturb(Perturb);
    /// A timing arm's set-up and warm-up.
    TimeSetup(TimeSetup);
    /// One block of timed calls.
    Time(Time);
    /// The candidate's checks once timing is done.
    State(State);
    /// One profiled call.
    Profile(Profile);
    /// One call for a kernel profiler outside the worker (`--profile ncu`), between
    /// cudaProfilerStart and cudaProfilerStop.
    ProfilerCall(ProfilerCall);
    /// The task inspector's facts of a task.
    Inspect(Inspect);
    /// The static checker's findings in files.
    CheckFiles(CheckFiles);
    /// The machine's facts.
    Probe(Probe);
    /// The GPU's measured ceilings.
    Ceilings(MeasureCeilings);
}

/// A variant's wire name: its name in snake case (serde's `rename_all`).
fn wire_name(variant: &str) -> String {
    let mut name = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Requests with no fields: `ping`, `exit`, `probe`, `ceilings`.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Ping {}

#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Exit {}

/// After timing: the candidate's process-state checks, and `outputs.independence` again on the
/// inputs of `seed` (a module may return one static output only once it has warmed up).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct State {
    pub seed: u64,
    pub forward_seed: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Probe {}

#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MeasureCeilings {}

/// A reply body kbench reads nothing of.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Empty {}

impl Command for Ping {
    type Reply = Empty;
}

impl Command for Exit {
    type Reply = Empty;
}

/// Import the staged submission in the compile pool, with the task as the run sizes it (its file,
/// `--scale` and `--set`).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Compile {
    pub task: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<String>,
    pub set: Map<String, Value>,
    /// The staged copy of the submission, as the worker sees it.
    pub submission: PathBuf,
    /// The torch device name the submission is meant for.
    pub device: String,
}

/// A compile request again, with the precision its fake call runs in.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Warm {
    pub task: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<String>,
    pub set: Map<String, Value>,
    pub submission: PathBuf,
    pub device: String,
    pub precision: String,
}

impl Warm {
    /// The warm-up of what `compile` imported, its fake call in `precision`.
    pub fn after(compile: Compile, precision: &str) -> Warm {
        Warm {
            task: compile.task,
            scale: compile.scale,
            set: compile.set,
            submission: compile.submission,
            device: compile.device,
            precision: precision.into(),
        }
    }
}

/// Load the task; the candidate also gets the staged submission and its build environment.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Load {
    pub task: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<String>,
    pub set: Map<String, Value>,
    pub device: String,
    pub precision: String,
    pub atol: f64,
    pub rtol: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// `kernelbench.environment`: the candidate loads the task and the submission as
    /// KernelBench's eval does, for its trials alone (`KernelbenchTrial`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub kernelbench: bool,
    /// The reference keeps its outputs on each trial's inputs for the task's next candidates
    /// (`roles/memo.py`): the task's reference repeats itself and a candidate of it is still to come.
    #[serde(default, skip_serializing_if = "is_false")]
    pub memo: bool,
}

/// Inputs that differ from a plain trial's (`inputs.make_inputs`): `kind` on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Variant {
    /// 2x - 1 where the inputs are non-negative.
    Signed,
    Scaled {
        factor: f64,
    },
    /// Offset by this many of their standard deviations.
    Shifted {
        spreads: f64,
    },
    /// The inputs of the task with these size constants.
    Shape {
        set: BTreeMap<String, i64>,
    },
}

/// One correctness trial in the candidate: its outputs go by `transport`: "ipc" (CUDA IPC views),
/// "file" (to `out`), or "none" (kept in the worker: nothing compares them, the sanitizer's trial).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Trial {
    pub seed: u64,
    pub forward_seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    pub deep: bool,
    pub out: PathBuf,
    pub transport: String,
}

/// One of KernelBench's trials as its eval runs it (`kernelbench.environment`): its index from 0,
/// judged at `tolerance`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct KernelbenchTrial {
    pub index: u32,
    pub tolerance: f64,
}

/// Compare the output of one timed call, read from slot `slot` of the candidate's pool (`kept`,
/// as the candidate's set-up described it), with the reference's on that call's inputs.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CheckKept {
    pub slot: u32,
    pub seed: u64,
    pub forward_seed: u64,
    pub kept: Value,
}

/// Check the candidate's outputs (in `candidate_out`, or behind `ipc`) against the reference's
/// on the same inputs.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CheckOutputs {
    pub seed: u64,
    pub forward_seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub deep: bool,
    pub candidate_out: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<Value>,
    /// On KernelBench's trials: judge by KernelBench's rule too, at this tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench_tolerance: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Perturb {
    pub seed: u64,
    /// To the candidate worker: the task's parameters as the reference worker built them, to
    /// match ModelNew's own against (the reference's reply says them, on a GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built: Option<Vec<BuiltParam>>,
    /// Put back the values the perturbation with this seed replaced (each worker kept a copy):
    /// the checks after `params.perturbation`, and timing, judge the parameters as built.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore: bool,
}

/// One of the task's parameters as the reference worker built it (`params.built`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BuiltParam {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: String,
    /// `params.digest` of its values.
    pub digest: String,
}

/// How a timing session samples (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TimingMode {
    Offline,
    Kernelbench,
    Server,
}

/// Which arm a worker's timing requests are for, where one worker times two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TimingArm {
    /// The reference under torch.compile.
    Compile,
    /// The candidate's control arm.
    Control,
}

/// A worker's timing set-up: its inputs' seeds, and the CPU its submitting thread moves to.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TimeSetup {
    pub seed: u64,
    pub mode: TimingMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Blocker cycles per microsecond (offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_per_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<TimingArm>,
    /// Where the arm's pool of timed outputs goes as files (the host's memory); on the GPU
    /// without it, the pool stays on the GPU and is shared by CUDA IPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<PathBuf>,
}

/// One block of timed calls: `n` samples (offline, kernelbench) or requests after idle gaps
/// (server).
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Time {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker_cycles: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audits: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps_ms: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<TimingArm>,
    /// The block's seed: draw j of the block uses derive_seed(seed, j).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The pool slot of the block's first draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Profile {
    pub seed: u64,
    pub forward_seed: u64,
}

/// One forward on the inputs of `seed` for a profiler that watches the worker from outside
/// (`--profile ncu`): once unwatched (lazy set-up stays out), then once between
/// cudaProfilerStart and cudaProfilerStop, the device idle at both ends. Answered by both roles.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ProfilerCall {
    pub seed: u64,
    pub forward_seed: u64,
}

impl Command for ProfilerCall {
    type Reply = Empty;
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Inspect {
    pub task: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CheckFiles {
    pub files: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(request: impl Into<Request>) -> Value {
        serde_json::to_value(request.into()).unwrap()
    }

    /// Requests serialize to the objects kbench sent when it built them as JSON by hand (the
    /// Python side reads them unchanged); fields left out are ones the workers read with a default.
    #[test]
    fn requests_keep_their_wire_form() {
        let setup = TimeSetup {
            seed: 7,
            mode: TimingMode::Offline,
            cpu: Some(3),
            cycles_per_us: Some(1980),
            arm: Some(TimingArm::Compile),
            kept: Some("/x/kept-compiled".into()),
        };
        assert_eq!(
            wire(setup),
            json!({"cmd": "time_setup", "seed": 7, "mode": "offline", "cpu": 3,
                   "cycles_per_us": 1980, "arm": "compile", "kept": "/x/kept-compiled"})
        );
        let block = Time {
            n: Some(4),
            arm: Some(TimingArm::Control),
            seed: Some(9),
            keep: Some(40),
            ..Time::default()
        };
        assert_eq!(
            wire(block),
            json!({"cmd": "time", "n": 4, "arm": "control", "seed": 9, "keep": 40})
        );
        let files = CheckFiles {
            files: vec!["/a.py".into()],
        };
        assert_eq!(
            wire(files),
            json!({"cmd": "check_files", "files": ["/a.py"]})
        );
        let trial = Trial {
            seed: 1,
            forward_seed: 2,
            variant: Some(Variant::Shape {
                set: [("batch_size".to_string(), 17)].into(),
            }),
            deep: false,
            out: "/x/trial0.pt".into(),
            transport: "file".into(),
        };
        assert_eq!(
            wire(trial),
            json!({"cmd": "trial", "seed": 1, "forward_seed": 2, "deep": false,
                   "variant": {"kind": "shape", "set": {"batch_size": 17}},
                   "out": "/x/trial0.pt", "transport": "file"})
        );
        let scaled = serde_json::to_value(Variant::Scaled { factor: 8.0 }).unwrap();
        assert_eq!(scaled, json!({"kind": "scaled", "factor": 8.0}));
        assert_eq!(wire(Exit {}), json!({"cmd": "exit"}));
    }

    #[test]
    fn a_request_names_its_command_as_the_wire_does() {
        for request in [
            Request::from(CheckFiles { files: vec![] }),
            Request::from(CheckKept {
                slot: 3,
                seed: 1,
                forward_seed: 2,
                kept: json!({"slots": 4}),
            }),
            Request::from(MeasureCeilings {}),
        ] {
            assert_eq!(
                serde_json::to_value(&request).unwrap()["cmd"],
                request.cmd()
            );
        }
    }
}
