//! The arms of a timing and what each accumulates. It names the arms, says which worker runs
//! each, and holds their samples as they come; it decides nothing about when an arm is timed or
//! what its samples mean.

use crate::record::Arm;
use crate::stats;
use crate::worker::request::TimingArm;

/// One arm of a timing: the eager reference (A) and the candidate (C) always; torch.compile of
/// the reference (B, in the reference worker) with `--baseline eager,compile`; the control arm A'
/// (`allow_process_effect`): the reference, timed in the candidate's worker. Not `record::Arm`,
/// which is an arm's samples as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArmId {
    Eager,
    Candidate,
    Compiled,
    Control,
}

impl ArmId {
    /// The arm's place in per-arm vectors: A, C, B in the order the warm-up asks them (a plan's
    /// `arm_count` counts from the start of it), A' after them.
    pub(super) fn index(self) -> usize {
        match self {
            ArmId::Eager => 0,
            ArmId::Candidate => 1,
            ArmId::Compiled => 2,
            ArmId::Control => 3,
        }
    }

    /// Whether the candidate's worker runs the arm (else the reference's does).
    pub(super) fn in_candidate(self) -> bool {
        matches!(self, ArmId::Candidate | ArmId::Control)
    }

    /// The arm as a timing request names it: none for the worker's own model.
    pub(super) fn wire(self) -> Option<TimingArm> {
        match self {
            ArmId::Compiled => Some(TimingArm::Compile),
            ArmId::Control => Some(TimingArm::Control),
            ArmId::Eager | ArmId::Candidate => None,
        }
    }
}

/// One arm's samples as they accumulate.
#[derive(Default)]
pub(super) struct Taken {
    pub(super) samples: Vec<f64>,
    pub(super) rounds: Vec<u32>,
    /// Per block: wall time per sample (seen from here) minus the reported median sample.
    pub(super) unexplained_ms: Vec<f64>,
    /// Per block: the same less the blocker's length (input refresh, flush, the worker's work).
    pub(super) harness_ms: Vec<f64>,
    pub(super) audit_ms: Vec<f64>,
    pub(super) audit_excess_ms: Vec<f64>,
    pub(super) sm_mhz: Vec<f64>,
}

/// An arm's samples as recorded.
pub(super) fn arm_of(taken: &Taken) -> Arm {
    Arm {
        median_ms: stats::median(&taken.samples),
        samples_ms: taken.samples.clone(),
        rounds: taken.rounds.clone(),
        ..Arm::default()
    }
}
