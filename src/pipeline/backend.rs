//! The pipeline's outside: the `Backend` trait the scheduler (`schedule`) and the service
//! (`serve`) drive, and the `Phase` an evaluation tells its caller as it enters each step.

use crate::record::{Build, Evaluation};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Cause;

use super::decide;
use super::gathered::Gathered;

/// What a running evaluation is doing, told to its caller as it enters each phase
/// (`Backend::evaluate`) for progress only: nothing is decided from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the slot's gate: other lanes' steps, or their timings before timing alone.
    Waiting,
    /// Taking a pair of workers (starting them where none waits), loading task and submission
    /// and constructing both models.
    Loading,
    /// The correctness trials and their checks.
    Trials,
    /// Timing, with the device alone.
    Timing,
    /// After timing: the candidate's state checks and both workers' profiled calls.
    Profiling,
    /// Ending the candidate's worker and everything it started.
    Ending,
    /// KernelBench's eval as KernelBench runs it, in a fresh worker (`--kernelbench-eval`).
    Kernelbench,
    /// The candidate's kernels under compute-sanitizer, in fresh workers (`--sanitize`).
    Sanitizer,
    /// Both arms' kernels under Nsight Compute, in fresh workers (`--profile ncu`).
    KernelProfiler,
}

impl Phase {
    /// The phase in words, as progress shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting for the device",
            Phase::Loading => "loading",
            Phase::Trials => "correctness trials",
            Phase::Timing => "timing",
            Phase::Profiling => "profiling",
            Phase::Ending => "ending its workers",
            Phase::Kernelbench => "KernelBench's eval",
            Phase::Sanitizer => "compute-sanitizer",
            Phase::KernelProfiler => "Nsight Compute",
        }
    }
}

/// Runs compile and evaluation steps; the scheduler is generic over it so it can be tested
/// with a scripted fake.
pub trait Backend: Sync {
    /// The run's evaluations, before any starts (a backend may keep what one task's
    /// evaluations share for the next).
    fn expect(&self, _work: &[(Task, Submission)]) {}
    fn compile(&self, task: &Task, submission: &Submission) -> Build;
    /// Evaluate on `slot` (an index into the configured devices), calling `enter` as the
    /// evaluation enters each `Phase`.
    fn evaluate(
        &self,
        task: &Task,
        submission: &Submission,
        build: &Build,
        slot: usize,
        enter: &dyn Fn(Phase),
    ) -> Evaluation;
    /// The evaluation `cause` decides where the backend's own stages gave no result (a stage
    /// abandoned, a service that stopped first), with the `build` where it got that far; no
    /// worker runs.
    fn gave_up(
        &self,
        task: &Task,
        submission: &Submission,
        build: Option<&Build>,
        cause: &Cause,
    ) -> Evaluation {
        let gathered = Gathered::default();
        let sub = (task, submission);
        decide::evaluation(sub, build.cloned(), String::new(), gathered, cause, 0.0)
    }
    /// Later evaluations on `slot` share nothing with those before: one was abandoned there
    /// and may never let go of what it holds.
    fn replace_slot(&self, _slot: usize) {}
}
