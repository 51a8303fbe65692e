//! What an evaluation's stages gather before its verdict: the workers' logs, the trials, the
//! checks, the phases' times, KernelBench's verdict, the timing and the profiles, and what the
//! candidate compiled itself. The stages fill it; `decide::evaluation` makes the `Evaluation`
//! from it once, with the verdict, at the end.

use crate::record::{Check, Phases, Timing, Trial};
use crate::reference_ops::Profiles;

/// An evaluation's results so far (the `Evaluation`'s fields of the same names).
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub logs: Vec<String>,
    pub trials: Vec<Trial>,
    pub kernelbench_correct: Option<bool>,
    pub kernelbench_needed: Option<f64>,
    pub checks: Vec<Check>,
    pub timing: Option<Timing>,
    pub profile: Option<Profiles>,
    /// Both arms' kernels under Nsight Compute (`--profile ncu`).
    pub ncu: Option<crate::nsight::NcuProfile>,
    pub phases: Phases,
    /// What the candidate compiled itself, as it last said (`Build::slot_compiled`).
    pub slot_compiled: Option<Vec<String>>,
}

impl Gathered {
    /// What the candidate compiled itself so far (`compiled` in its load and trial replies): a
    /// build the pool missed; empty when the slot only loaded.
    pub(super) fn slot_compiled(&mut self, compiled: Option<Vec<String>>) {
        if let Some(names) = compiled {
            self.slot_compiled = Some(names);
        }
    }
}
