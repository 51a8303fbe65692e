//! The checks of the candidate's reported times against what the trusted side sees: the
//! wall-clock envelope (`timing.wall_envelope`, with the charge it leads to) and the audit
//! (`timing.audit`). Each gives a `Check`; neither takes a sample nor changes a label.

use super::arms::{arm_of, Taken};
use super::summary::median_or_zero;
use crate::config::Device;
use crate::record::{Arm, Check, Outcome};
use crate::worker::CheckName;

/// The candidate's audit excess (host wall time beyond the device's interval for the same call,
/// medians) may reach the largest of a floor, a multiple of the reference's excess and a share
/// of its own audit time. The floor is above the synchronize's latency: 68 honest identity
/// tasks on an H100 read 0.04 ms (median) and up to 0.21 ms; a timed-only stream escape, 3.8 ms.
const AUDIT_FLOOR_MS: f64 = 0.25;
const AUDIT_FACTOR: f64 = 3.0;
const AUDIT_SHARE: f64 = 0.02;

/// Wall time per sample not explained by the reported times may exceed the reference's by at
/// most max(floor, share x the reference's median, harness share x the reference's own
/// unexplained time less the blocker and a fixed part). The last is for tasks whose inputs take
/// longer to refresh than the call takes: refreshing the same 6 GB ran up to 12.5 % slower in
/// one worker than in the other on an H100 (level1/19-32, four identity runs), which charged
/// honest calls 9-13 %. The blocker is left out because the candidate sizes it: a forger that
/// sleeps 50 ms in forward grew it to 100 ms, and with it the allowance, and read 1000x FASTER
/// on an H100. The fixed part (synchronize, flush, the draw's Python) is left out so that a
/// short call's allowance is not a share of its harness: with it, an 18 µs call could hide its
/// work outside its events. Calls under 100 µs are timed in bursts (`offline`), so the floor
/// is at most a quarter of a sample there too.
const ENVELOPE_FLOOR_MS: f64 = 0.1;
const ENVELOPE_SHARE: f64 = 0.25;
const ENVELOPE_HARNESS_SHARE: f64 = 0.2;
const ENVELOPE_HARNESS_FIXED_MS: f64 = 0.5;
/// On the CPU the floor is wider: the candidate worker's own checks per block, and a worker
/// descheduled on a busy host, add milliseconds per sample when blocks are short (2-3 ms
/// measured at 8 samples per arm, once 10.7 ms); a forgery below this goes unflagged.
const ENVELOPE_FLOOR_CPU_MS: f64 = 10.0;

/// The candidate's times when its blocks took more wall time than they explain
/// (`timing.wall_envelope`): each sample charged `charge_ms`, the unexplained wall time per call
/// beyond the reference's and the envelope's allowance, so forged times gain at most the
/// allowance, as an honest candidate's own overhead may.
pub(super) fn charged(taken: &Taken, charge_ms: f64) -> Arm {
    arm_of(&Taken {
        samples: taken.samples.iter().map(|ms| ms + charge_ms).collect(),
        rounds: taken.rounds.clone(),
        ..Taken::default()
    })
}

/// `timing.wall_envelope`: the wall time of the candidate's timing requests, seen from here,
/// should be explained by the times it reported, as well as the reference's are (both arms pay
/// the same flush, blocker and input refresh per sample). Times forged inside the candidate's
/// process (a patched timer, a fake reply) leave wall time unexplained. Evidence, not a verdict:
/// on the GPU the blocker spins a number of cycles, so it lasts longer when a heavy kernel has
/// pulled the SM clock down under the power cap (on the H100 honest SGEMMs showed up to 1.8 ms
/// more per sample than cuBLAS's reference); on a busy CPU an honest candidate showed 10.7 ms
/// more per sample than its reference. The candidate's state checks once ran in each of its
/// timing requests: 0.75 ms more per request than the reference's on an H100 (four identity
/// runs), which charged an honest level1/21 to 0.91; they are asked for after timing (`State`,
/// in pipeline/evidence.rs). Here:
/// each arm's median wall time per sample beyond its reported time, and how much more the
/// candidate's may be; what it exceeds that by is charged to its samples (`charged`).
pub(super) struct Envelope {
    reference_ms: f64,
    candidate_ms: f64,
    limit_ms: f64,
}

impl Envelope {
    pub(super) fn of(reference: &Taken, candidate: &Taken, device: Device) -> Envelope {
        let r = median_or_zero(&reference.unexplained_ms);
        // On the CPU the reference's own unexplained time is allowed again (at least doubled
        // before flagged): what a busy host adds to one arm's blocks it can add to the other's.
        let floor = match device {
            Device::Cuda => ENVELOPE_FLOOR_MS,
            Device::Cpu => ENVELOPE_FLOOR_CPU_MS.max(r),
        };
        Envelope {
            reference_ms: r,
            candidate_ms: median_or_zero(&candidate.unexplained_ms),
            limit_ms: floor
                .max(ENVELOPE_SHARE * median_or_zero(&reference.samples))
                .max(
                    ENVELOPE_HARNESS_SHARE
                        * (median_or_zero(&reference.harness_ms) - ENVELOPE_HARNESS_FIXED_MS),
                ),
        }
    }

    /// The candidate's unexplained wall time per sample beyond the reference's and the limit.
    pub(super) fn beyond(&self) -> f64 {
        (self.candidate_ms - self.reference_ms - self.limit_ms).max(0.0)
    }

    pub(super) fn check(&self) -> Check {
        let (c, r, limit) = (self.candidate_ms, self.reference_ms, self.limit_ms);
        let excess = c - r;
        Check {
            name: CheckName::TimingWallEnvelope,
            outcome: if self.beyond() > 0.0 {
                Outcome::Warn
            } else {
                Outcome::Pass
            },
            evidence: format!(
                "wall time per sample beyond the reported time: candidate {c:.3} ms, reference {r:.3} ms (excess {excess:.3} ms, limit {limit:.3} ms)"
            ),
            seconds: 0.0,
            runs: 1,
        }
    }
}

/// `timing.audit`: calls timed by the host up to a device-wide synchronize, against the
/// device's interval for the same call (events from the blocker's start to the stop event).
/// Work a candidate leaves on another stream is invisible to events on the harness stream but
/// not to a device-wide synchronize; host time inside the call is inside both, so host-bound
/// and host-synchronizing calls are not mistaken for it. A flag switches the reported times to
/// audit wall times for this task (the trick is then measured, not rewarded).
pub(super) fn audit_check(reference: &Taken, candidate: &Taken) -> Check {
    let name = CheckName::TimingAudit;
    if reference.audit_ms.is_empty() || candidate.audit_ms.is_empty() {
        return Check {
            name,
            outcome: Outcome::Skip,
            evidence: "no audit samples (CPU)".into(),
            seconds: 0.0,
            runs: 1,
        };
    }
    let excess = |t: &Taken| median_or_zero(&t.audit_excess_ms);
    let (r, c) = (excess(reference), excess(candidate));
    let limit = AUDIT_FLOOR_MS
        .max(AUDIT_FACTOR * r)
        .max(AUDIT_SHARE * median_or_zero(&candidate.audit_ms));
    Check {
        name,
        outcome: if c > limit { Outcome::Warn } else { Outcome::Pass },
        evidence: format!(
            "host wall time beyond the device's interval for the call: candidate {c:.3} ms, reference {r:.3} ms (limit {limit:.3} ms, {} audit call(s) per arm)",
            candidate.audit_ms.len()
        ),
        seconds: 0.0,
        runs: candidate.audit_ms.len() as u32,
    }
}

#[cfg(test)]
mod tests;
