//! The workers' timing replies as kbench reads them (`time_setup`: `Warmed`; `time`: `Timed`)
//! and the checks on their numbers: a list missing or holding a number it must not is a broken
//! worker (`Cause::MalformedTimes`). It reads; what the numbers mean is the modes' business.

use serde::Deserialize;

use crate::record::Check;
use crate::verdict::Cause;
use crate::worker::request::{CheckKept, Command, Time, TimeSetup};

/// A warm-up's figures.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Warmed {
    pub submit_ms: Option<f64>,
    pub median_ms: Option<f64>,
    /// How long torch.compile took (the compiled arm).
    pub compile_s: Option<f64>,
    /// Where the arm keeps its timed calls' outputs (`kept.Pool.describe`), passed on as it came:
    /// `slots`, and the CUDA IPC handles or files of the pool.
    pub kept: Option<serde_json::Value>,
}

impl Command for TimeSetup {
    type Reply = Warmed;
}

/// A timed block's figures; each list is checked where it is read.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Timed {
    pub samples_ms: Option<Vec<f64>>,
    pub audit_ms: Option<Vec<f64>>,
    pub audit_excess_ms: Option<Vec<f64>>,
    pub latency_ms: Option<Vec<f64>>,
    /// The SM clock before each request, null where NVML could not be read.
    pub sm_mhz: Vec<Option<f64>>,
    /// Calls per sample the worker timed.
    pub burst: Option<u64>,
    pub overflows: u64,
}

impl Command for Time {
    type Reply = Timed;
}

/// The reference's comparison of the candidate's outputs with its own (a trial's, or a timed
/// call's read from the candidate's pool).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Checked {
    pub correct: bool,
    /// The reference's own output is not finite on these inputs.
    pub uncheckable: bool,
    pub reason: Option<String>,
    pub max_abs_diff: Option<f64>,
    pub max_rel_diff: Option<f64>,
    pub checks: Vec<Check>,
    /// KernelBench's verdict on the trial, when asked (`CheckOutputs::kernelbench_tolerance`).
    pub kernelbench_correct: Option<bool>,
    /// The least tolerance at which KernelBench's rule passes the trial (1.0: none of its
    /// versions' tolerances does), asked with `kernelbench_correct`.
    pub kernelbench_needed: Option<f64>,
    /// Right outputs from a call that broke the module contract (`inputs.integrity`: it wrote
    /// into its inputs), naming the check.
    pub contract: Option<String>,
}

impl Command for CheckKept {
    type Reply = Checked;
}

/// The samples of a timing reply: finite, non-negative milliseconds, or the worker is broken.
pub fn samples_of(reply: &Timed) -> Result<Vec<f64>, Cause> {
    times_of(&reply.samples_ms, "samples_ms")
}

/// The audit calls' excesses: finite, of either sign (two clocks, microseconds apart).
pub(super) fn excess_of(reply: &Timed) -> Result<Vec<f64>, Cause> {
    numbers_of(
        &reply.audit_excess_ms,
        "audit_excess_ms",
        |s| s.is_finite(),
        "a non-finite audit excess",
    )
}

/// The times of a reply's list `key`: finite, non-negative milliseconds.
pub(super) fn times_of(values: &Option<Vec<f64>>, key: &str) -> Result<Vec<f64>, Cause> {
    numbers_of(
        values,
        key,
        |s| s.is_finite() && s >= 0.0,
        "a negative or non-finite time",
    )
}

/// The numbers of a reply's list `key`, each passing `valid`, or the worker is broken.
fn numbers_of(
    values: &Option<Vec<f64>>,
    key: &str,
    valid: impl Fn(f64) -> bool,
    what: &str,
) -> Result<Vec<f64>, Cause> {
    let Some(values) = values else {
        return Err(Cause::MalformedTimes(format!(
            "malformed timing reply: no {key}"
        )));
    };
    if values.iter().any(|&s| !valid(s)) {
        return Err(Cause::MalformedTimes(format!("timing reply holds {what}")));
    }
    Ok(values.clone())
}
