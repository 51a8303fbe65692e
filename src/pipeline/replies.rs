//! The bodies of the compile, candidate and reference workers' replies that the evaluation
//! reads, one struct per command (`Command::Reply`); fields a worker may leave out default.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::record::Check;
use crate::reference_ops::Launches;
pub use crate::timing::Checked;
use crate::verdict::BuildFailure;
use crate::worker::request::{
    BuiltParam, CheckOutputs, Command, Compile, KernelbenchTrial, Load, Perturb, Profile, State,
    Trial, Warm,
};

/// What the compile pool built: whether ModelNew exists, its kernels, how far warming it got.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Built {
    pub has_model_new: bool,
    pub kernels: Vec<String>,
    pub compiled: Vec<String>,
    /// Builds that raised inside the submission, which caught them and fell back.
    pub build_failures: Vec<BuildFailure>,
    /// How far the warm-up got ("import", "construct", "forward").
    pub reached: Option<String>,
    pub note: String,
}

impl Command for Compile {
    type Reply = Built;
}

impl Command for Warm {
    type Reply = Built;
}

/// A load's reply: the reference's task constants, the candidate's start-up, checks and kernels.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Loaded {
    pub constants: Map<String, Value>,
    pub startup_s: Option<f64>,
    /// What the candidate compiled itself (a build the pool missed).
    pub compiled: Option<Vec<String>>,
    pub checks: Vec<Check>,
    pub kernels: Vec<String>,
}

impl Command for Load {
    type Reply = Loaded;
}

/// The candidate's outputs, handed over: CUDA IPC handles, or nothing where they went to a file.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Shipped {
    /// Handles the reference worker opens (`transfer.import_cuda`), passed on as they came.
    pub ipc: Option<Value>,
    pub compiled: Option<Vec<String>>,
    pub checks: Vec<Check>,
    /// The first breach of the module contract the call's checks found, naming the check: a
    /// `contract` verdict where the reference finds the outputs right.
    pub contract: Option<String>,
}

impl Command for Trial {
    type Reply = Shipped;
}

/// The candidate's checks after timing.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Stated {
    pub checks: Vec<Check>,
    /// A breach of the module contract found after timing (a module that hands out one static
    /// output only once warm), naming the check.
    pub contract: Option<String>,
}

impl Command for State {
    type Reply = Stated;
}

impl Command for CheckOutputs {
    type Reply = Checked;
}

/// One of KernelBench's trials as its eval ran it: its verdict at the tolerance asked, the least
/// tolerance that passes it (`KERNELBENCH_NEVER` for none), and why it failed.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Judged {
    pub correct: bool,
    pub needed: f64,
    pub reason: String,
}

impl Command for KernelbenchTrial {
    type Reply = Judged;
}

/// The shapes of the task's parameters perturbed, in order; from the reference on a GPU also
/// the parameters as built, and from the candidate how its parameters were paired with the
/// task's (`params.pair`), each as `name [shape]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Perturbed {
    pub shapes: Option<Vec<Value>>,
    pub built: Option<Vec<BuiltParam>>,
    /// Pairs other than by the same name and shape: `ours = theirs`, and how permuted.
    pub paired: Vec<String>,
    /// The task's parameters ModelNew has no counterpart for.
    pub missing: Vec<String>,
    /// ModelNew's parameters the task has no counterpart for (left unperturbed).
    pub extra: Vec<String>,
}

impl Command for Perturb {
    type Reply = Perturbed;
}

/// A profiled call: either worker's figures, and the candidate's checks and kernels.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Profiled {
    pub profile: ProfileFigures,
    pub kernels: Option<Vec<String>>,
    pub build_failures: Vec<BuildFailure>,
    pub defined: Vec<String>,
    pub checks: Vec<Check>,
}

impl Command for Profile {
    type Reply = Profiled;
}

/// A worker's profile of one call (`profile.summarize`): the reference's has no kernel of its own.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ProfileFigures {
    pub library_share: Option<f64>,
    pub busy_ms: Option<f64>,
    pub custom_ms: Option<f64>,
    pub total_ms: Option<f64>,
    /// Every kernel's launches, the longest first.
    pub launches: Vec<Launches>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Fields the workers may leave out read as absent; a field of the wrong type does not read.
    #[test]
    fn replies_read_their_fields() {
        let checked: Checked =
            serde_json::from_value(json!({"correct": true, "max_abs_diff": null, "ok": true}))
                .unwrap();
        assert!(checked.correct && checked.reason.is_none() && checked.checks.is_empty());
        let loaded: Loaded = serde_json::from_value(json!({"constants": {"dim": 4}})).unwrap();
        assert_eq!(loaded.constants["dim"], 4);
        assert!(loaded.compiled.is_none());
        assert!(serde_json::from_value::<Shipped>(json!({"checks": [{"name": 1}]})).is_err());
    }
}
