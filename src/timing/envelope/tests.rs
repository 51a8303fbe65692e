//! Tests of the envelope and the audit: honest and forged times, large inputs, the blocker a
//! candidate sizes, and the charge.

use super::*;
use crate::record::CHARGED;
use crate::stats;
use crate::timing::arms::ArmId;
use crate::timing::label::distrust_charged;
use crate::timing::offline::{Round, Rounds, AUDIT_CALLS};
use crate::timing::session::Block;
use crate::timing::summary::summarize;

fn taken(samples: &[f64], unexplained: &[f64], audit: &[f64]) -> Taken {
    Taken {
        samples: samples.to_vec(),
        rounds: (0..samples.len() as u32).map(|i| i / 10).collect(),
        unexplained_ms: unexplained.to_vec(),
        harness_ms: unexplained.to_vec(),
        audit_ms: audit.to_vec(),
        ..Taken::default()
    }
}

/// Rounds of a reference and a candidate behind a blocker of `blocker_us`, nothing kept yet.
fn two_arms(blocker_us: f64) -> Rounds {
    Rounds {
        arms: vec![Taken::default(), Taken::default()],
        telemetry: Vec::new(),
        used_burst: 1,
        blocker_us,
        host_syncs: false,
        kept: 0,
        attempts: 0,
        overflows: 0,
        stopped: "",
    }
}

fn audited(audit: &[f64], excess: &[f64]) -> Taken {
    Taken {
        audit_excess_ms: excess.to_vec(),
        ..taken(&[1.0; 20], &[], audit)
    }
}

#[test]
fn the_envelope_fails_times_that_wall_time_does_not_explain() {
    let reference = taken(&[1.0; 20], &[0.30, 0.32], &[]);
    let honest = taken(&[0.5; 20], &[0.31, 0.33], &[]);
    assert_eq!(
        Envelope::of(&reference, &honest, Device::Cuda)
            .check()
            .outcome,
        Outcome::Pass
    );
    // Reports 0.1 ms per call while each sample's wall time hides 0.9 ms more.
    let forged = taken(&[0.1; 20], &[1.2, 1.25], &[]);
    let check = Envelope::of(&reference, &forged, Device::Cuda).check();
    assert_eq!(check.outcome, Outcome::Warn, "{}", check.evidence);
    // The floor is wider on the CPU.
    assert_eq!(
        Envelope::of(&reference, &forged, Device::Cpu)
            .check()
            .outcome,
        Outcome::Pass
    );
    let forged = taken(&[0.1; 20], &[40.3, 40.2], &[]);
    assert_eq!(
        Envelope::of(&reference, &forged, Device::Cpu)
            .check()
            .outcome,
        Outcome::Warn
    );
}

#[test]
fn the_envelope_allows_for_a_slower_refresh_of_large_inputs() {
    // A 4.27 ms call whose 6 GB of inputs take 11 ms a sample to refresh; the honest
    // candidate's worker refreshes them 12 % slower (level1/21 on an H100). A quarter of the
    // call (1.07 ms) would charge it; a fifth of the refresh beyond its fixed part (2.1 ms)
    // does not.
    let reference = taken(&[4.27; 20], &[11.0, 11.0], &[]);
    let honest = taken(&[4.27; 20], &[12.3, 12.4], &[]);
    let envelope = Envelope::of(&reference, &honest, Device::Cuda);
    assert_eq!(envelope.check().outcome, Outcome::Pass);
    assert!(
        (envelope.limit_ms - 2.1).abs() < 1e-9,
        "{}",
        envelope.limit_ms
    );
    // Times divided by 20 leave 4 ms more unexplained: all beyond the allowance is charged,
    // so such a forger keeps the allowance (here 2.1 of 4.27 ms) and no more.
    let forged = taken(&[0.2135; 20], &[15.0, 15.0], &[]);
    let envelope = Envelope::of(&reference, &forged, Device::Cuda);
    assert!(
        (envelope.beyond() - 1.9).abs() < 1e-9,
        "{}",
        envelope.beyond()
    );
}

#[test]
fn times_the_wall_clock_does_not_explain_are_charged_to_the_candidate() {
    // Both arms truly take 1 ms a call behind a 0.5 ms blocker, with 0.2 ms of harness work
    // per sample; the candidate reports 0.05 ms. Its blocks' wall time gives it away: each
    // of its samples is charged what is unexplained beyond the reference's and the
    // allowance (a quarter of the reference's call), so it gains the allowance and no more.
    let block = |reported: f64, audits: usize| Block {
        samples: vec![reported; 4],
        overflows: 0,
        audit_ms: vec![2.0; audits],
        audit_excess_ms: vec![0.0; audits],
        wall_per_sample_ms: 1.7 + 0.5 * audits as f64,
        burst: 1,
    };
    let mut rounds = two_arms(500.0);
    for index in 0..6 {
        let audits = if index == 0 { AUDIT_CALLS as usize } else { 0 };
        let round = Round {
            index,
            blocks: vec![
                vec![block(1.0, audits), block(1.0, 0)],
                vec![block(0.05, audits), block(0.05, 0)],
            ],
            clocks: vec![Vec::new(); 2],
            slowdown: false,
            kept: Vec::new(),
            reading: None,
        };
        rounds.keep(round, 0.5);
    }
    let (a, c) = (
        &rounds.arms[ArmId::Eager.index()],
        &rounds.arms[ArmId::Candidate.index()],
    );
    let envelope = Envelope::of(a, c, Device::Cuda);
    assert_eq!(envelope.check().outcome, Outcome::Warn);
    assert!(
        (envelope.beyond() - 0.70).abs() < 1e-9,
        "{}",
        envelope.beyond()
    );
    let reported = summarize(
        "events".into(),
        arm_of(a),
        arm_of(c),
        1,
        stats::DELTA_SHARED,
    );
    assert!(reported.speedup > 19.0);
    let mut charged = summarize(
        CHARGED.into(),
        arm_of(a),
        charged(c, envelope.beyond()),
        1,
        stats::DELTA_SHARED,
    );
    assert!(
        (charged.speedup - 1.0 / 0.75).abs() < 1e-9,
        "{}",
        charged.speedup
    );
    assert_eq!(charged.label, stats::Decision::Faster);
    distrust_charged(&mut charged);
    assert_eq!(
        charged.label,
        stats::Decision::Inconclusive,
        "the allowance it keeps labels it nothing"
    );
}

#[test]
fn the_blocker_the_candidate_sizes_widens_no_allowance() {
    // level1/19 on an H100: a forger that sleeps 50 ms in forward grows the blocker to
    // 100 ms for both arms and reports its 4.27 ms call as 4.27 µs. A fifth of the
    // reference's unexplained time (111 ms) would allow it 22 ms; the blocker is left out.
    let (refresh, blocker, call) = (11.0, 100.0, 4.27);
    let mut rounds = two_arms(blocker * 1e3);
    let block = |reported: f64| Block {
        samples: vec![reported; 4],
        overflows: 0,
        audit_ms: Vec::new(),
        audit_excess_ms: Vec::new(),
        wall_per_sample_ms: blocker + refresh + call,
        burst: 1,
    };
    for index in 0..4 {
        let round = Round {
            index,
            blocks: vec![vec![block(call)], vec![block(call / 1e3)]],
            clocks: vec![Vec::new(); 2],
            slowdown: false,
            kept: Vec::new(),
            reading: None,
        };
        rounds.keep(round, blocker);
    }
    let envelope = Envelope::of(
        &rounds.arms[ArmId::Eager.index()],
        &rounds.arms[ArmId::Candidate.index()],
        Device::Cuda,
    );
    assert!(
        (envelope.limit_ms - 0.2 * (refresh - ENVELOPE_HARNESS_FIXED_MS)).abs() < 1e-9,
        "{}",
        envelope.limit_ms
    );
    assert_eq!(envelope.check().outcome, Outcome::Warn);
}

#[test]
fn the_audit_flags_work_that_events_do_not_see() {
    let reference = audited(&[1.02, 1.03, 1.02], &[0.02, 0.03, 0.02]);
    let honest = audited(&[0.52, 0.53, 0.51], &[0.03, 0.02, 0.02]);
    assert_eq!(audit_check(&reference, &honest).outcome, Outcome::Pass);
    // A host-bound call three times slower on the host than the reference's (another
    // process): its host time is inside the device's interval, so no excess.
    let host_bound = audited(&[3.3, 3.6, 3.4], &[0.03, 0.04, 0.03]);
    assert_eq!(audit_check(&reference, &host_bound).outcome, Outcome::Pass);
    // The device was busy 2 ms after the stop event (a side stream).
    let escaped = audited(&[2.05, 2.06, 2.04], &[2.0, 2.01, 1.99]);
    let check = audit_check(&reference, &escaped);
    assert_eq!(check.outcome, Outcome::Warn, "{}", check.evidence);
    // A long call may keep 2 % of its time beyond the stop event; more is flagged.
    let long = audited(&[100.0; 3], &[1.5; 3]);
    assert_eq!(audit_check(&reference, &long).outcome, Outcome::Pass);
    let hidden = audited(&[100.0; 3], &[3.0; 3]);
    assert_eq!(audit_check(&reference, &hidden).outcome, Outcome::Warn);
    assert_eq!(
        audit_check(&taken(&[1.0], &[], &[]), &escaped).outcome,
        Outcome::Skip
    );
}

/// Rounds of one block per arm: the reference's calls take `call` ms and the candidate reports
/// `reported`; both pay `harness` ms a sample, and the candidate `hidden` ms a call more.
fn bursts(call: f64, reported: &[f64], burst: u32, harness: f64, hidden: f64) -> Envelope {
    let mut rounds = two_arms(50.0);
    let b = f64::from(burst);
    let block = |samples: &[f64], extra: f64| Block {
        samples: samples.to_vec(),
        overflows: 0,
        audit_ms: Vec::new(),
        audit_excess_ms: Vec::new(),
        wall_per_sample_ms: harness + b * (call + extra),
        burst,
    };
    for index in 0..4 {
        let round = Round {
            index,
            blocks: vec![vec![block(&[call; 4], 0.0)], vec![block(reported, hidden)]],
            clocks: vec![Vec::new(); 2],
            slowdown: false,
            kept: Vec::new(),
            reading: None,
        };
        rounds.keep(round, 0.05);
    }
    Envelope::of(
        &rounds.arms[ArmId::Eager.index()],
        &rounds.arms[ArmId::Candidate.index()],
        Device::Cuda,
    )
}

#[test]
fn a_short_call_cannot_hide_its_work_outside_its_events() {
    // An 18 µs call, timed in bursts of 23 (400 µs a sample), with 0.3 ms of harness a sample.
    let burst = 23;
    assert_eq!(bursts(0.018, &[0.018; 4], burst, 0.3, 0.0).beyond(), 0.0);
    // Reporting 2 µs a call while doing the work outside the events: 0.37 ms a sample
    // unexplained, beyond the 0.1 ms allowance.
    let forged = bursts(0.018, &[0.002; 4], burst, 0.3, 0.016);
    assert_eq!(forged.check().outcome, Outcome::Warn);
    assert!(forged.beyond() > 0.25, "{}", forged.beyond());
    // Piling a block's work into one of its samples: the median is what is explained.
    let piled = bursts(0.018, &[0.002, 0.002, 0.002, 0.066], burst, 0.3, 0.0);
    assert_eq!(piled.check().outcome, Outcome::Warn);
}
