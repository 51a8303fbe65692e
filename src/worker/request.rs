//! What kbench asks the workers, typed: one `Request` variant per command (`cmd` on the wire),
//! each with the struct of its fields; `Command::Reply` names the struct of its reply body. The
//! Python side answers from one table of commands per role (`commands()` in each worker module);
//! `tests/python/test_protocol.py` checks those tables, the request fields they read and the
//! reply fields they write against `schema()`, which the test `the_schema_file_is_current` keeps
//! in `protocol_schema.json`. Requests derive `Deserialize` for `schema()`, which reads their
//! field names from it.

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

/// Declares `Request` (one variant per command, its wire name the variant's in snake case unless
/// given), its conversions from each command's struct, and `schema()` from the same list.
macro_rules! commands {
    ($($(#[$doc:meta])* $variant:ident $(as $name:literal)? ($request:ident);)*) => {
        /// A request to a worker, tagged by its command.
        #[derive(Clone, Debug, Serialize)]
        #[serde(tag = "cmd", rename_all = "snake_case")]
        pub enum Request {
            $($(#[$doc])* $(#[serde(rename = $name)])? $variant($request),)*
        }

        impl Request {
            /// The command's name on the wire.
            pub fn cmd(&self) -> String {
                match self {
                    $(Request::$variant(_) => wire_name(stringify!($variant), [$($name)?]),)*
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

        /// Every command: its wire name, its request fields and the reply fields kbench reads.
        #[cfg(test)]
        pub fn schema() -> Vec<schema::Entry> {
            vec![$(schema::Entry::of::<$request, <$request as Command>::Reply>(
                wire_name(stringify!($variant), [$($name)?]),
            ),)*]
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
    /// Hand over the output the candidate kept of its last timed block.
    TimedCheck(TimedCheck);
    /// Compare the candidate's outputs with the reference's, in the reference worker.
    Check(CheckOutputs);
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
    /// The task inspector's facts of a task.
    Inspect(Inspect);
    /// The static checker's findings in files (the checker's own `check`).
    CheckFiles as "check" (CheckFiles);
    /// The machine's facts.
    Probe(Probe);
    /// The GPU's measured ceilings.
    Ceilings(MeasureCeilings);
}

/// A variant's wire name: the one given, else its name in snake case (serde's `rename_all`).
fn wire_name<const N: usize>(variant: &str, given: [&str; N]) -> String {
    if let Some(name) = given.first() {
        return (*name).into();
    }
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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ping {}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Exit {}

/// After timing: the candidate's process-state checks, and `outputs.independence` again on the
/// inputs of `seed` (a module may return one static output only once it has warmed up).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub seed: u64,
    pub forward_seed: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Probe {}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MeasureCeilings {}

/// A reply body kbench reads nothing of.
#[derive(Debug, Default, Deserialize)]
pub struct Empty {}

impl Command for Ping {
    type Reply = Empty;
}

impl Command for Exit {
    type Reply = Empty;
}

/// Import the staged submission in the compile pool, with the task as the run sizes it (its file,
/// `--scale` and `--set`).
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

/// Inputs that differ from a plain trial's (`harness.make_inputs`): `kind` on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// One correctness trial in the candidate: `out` is where its outputs go when `transport` is
/// "file".
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trial {
    pub seed: u64,
    pub forward_seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    pub deep: bool,
    pub out: PathBuf,
    pub transport: String,
}

/// Hand over the kept output of the last timed block, as a trial hands over its outputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimedCheck {
    pub out: PathBuf,
    pub transport: String,
}

/// Check the candidate's outputs (in `candidate_out`, or behind `ipc`) against the reference's
/// on the same inputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Perturb {
    pub seed: u64,
}

/// How a timing session samples (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingMode {
    Offline,
    Kernelbench,
    Server,
}

/// Which arm a worker's timing requests are for, where one worker times two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingArm {
    /// The reference under torch.compile.
    Compile,
    /// The candidate's control arm.
    Control,
}

/// A worker's timing set-up: its inputs' seeds, and the CPU its submitting thread moves to.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

/// One block of timed calls: `n` samples (offline, kernelbench) or requests after idle gaps
/// (server).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Profile {
    pub seed: u64,
    pub forward_seed: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Inspect {
    pub task: PathBuf,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckFiles {
    pub files: Vec<PathBuf>,
}

/// The schema of the commands, for `tests/python/test_protocol.py`: field names as serde sees
/// them, recorded by a deserializer that only asks each struct for its fields.
#[cfg(test)]
pub mod schema {
    use serde::de::{self, Deserialize, Deserializer, Visitor};
    use serde::Serialize;

    /// One command: its wire name, the fields its request may carry, the reply fields kbench reads.
    #[derive(Debug, Serialize)]
    pub struct Entry {
        pub cmd: String,
        pub request: Vec<&'static str>,
        pub reply: Vec<&'static str>,
    }

    impl Entry {
        pub fn of<'de, Q: Deserialize<'de>, R: Deserialize<'de>>(cmd: String) -> Entry {
            Entry {
                cmd,
                request: fields::<Q>(),
                reply: fields::<R>(),
            }
        }
    }

    /// The field names of a struct.
    pub fn fields<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
        let mut seen = Vec::new();
        let _ = T::deserialize(Recorder(&mut seen));
        seen
    }

    struct Recorder<'a>(&'a mut Vec<&'static str>);

    #[derive(Debug)]
    struct Stop;

    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fields recorded")
        }
    }

    impl std::error::Error for Stop {}

    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Stop {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for Recorder<'_> {
        type Error = Stop;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.extend_from_slice(fields);
            Err(Stop)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
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
        };
        assert_eq!(
            wire(setup),
            json!({"cmd": "time_setup", "seed": 7, "mode": "offline", "cpu": 3,
                   "cycles_per_us": 1980, "arm": "compile"})
        );
        let block = Time {
            n: Some(4),
            arm: Some(TimingArm::Control),
            ..Time::default()
        };
        assert_eq!(
            wire(block),
            json!({"cmd": "time", "n": 4, "arm": "control"})
        );
        let files = CheckFiles {
            files: vec!["/a.py".into()],
        };
        assert_eq!(wire(files), json!({"cmd": "check", "files": ["/a.py"]}));
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
            Request::from(TimedCheck {
                out: "o".into(),
                transport: "ipc".into(),
            }),
            Request::from(MeasureCeilings {}),
        ] {
            assert_eq!(
                serde_json::to_value(&request).unwrap()["cmd"],
                request.cmd()
            );
        }
    }

    fn schema_json() -> String {
        serde_json::to_string_pretty(&schema()).unwrap() + "\n"
    }

    /// `protocol_schema.json` is what `schema()` says (the pytest reads the file). To update
    /// it: `KBENCH_UPDATE_SCHEMA=1 cargo test the_schema_file_is_current`.
    #[test]
    fn the_schema_file_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/worker/protocol_schema.json");
        if std::env::var_os("KBENCH_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, schema_json()).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            stored == schema_json(),
            "{} is stale: KBENCH_UPDATE_SCHEMA=1 cargo test the_schema_file_is_current",
            path.display()
        );
    }

    #[test]
    fn the_schema_lists_every_command_with_its_fields() {
        let entries = schema();
        let time = entries.iter().find(|e| e.cmd == "time").unwrap();
        assert!(time.request.contains(&"arm") && time.reply.contains(&"samples_ms"));
        let checks: Vec<_> = entries.iter().filter(|e| e.cmd == "check").collect();
        assert_eq!(checks.len(), 2, "the reference's and the static checker's");
        assert!(entries
            .iter()
            .all(|e| !e.cmd.chars().any(char::is_uppercase)));
    }
}
