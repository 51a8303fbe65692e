//! `--mode kernelbench`: upstream KernelBench's loop, for comparison with published numbers,
//! not for decisions. It asks both workers for their samples and summarizes them; the label of
//! its ratio of means is `label::by_ratio_of_means`.

use super::arms::ArmId;
use super::label::by_ratio_of_means;
use super::replies::samples_of;
use super::session::{Failed, Session, WARMUP_ALLOWANCE};
use super::summary::{method, summarize, CI_LEVEL};
use crate::record::{Arm, Timing};
use crate::stats;
use crate::worker::request::{Time, TimingMode};
use crate::worker::Link;

/// Upstream KernelBench's number of timed trials.
const KERNELBENCH_TRIALS: u32 = 100;

impl<L: Link> Session<'_, L> {
    /// Upstream KernelBench's loop: all candidate samples, then all reference samples (its
    /// order), each after a write flush with no blocker; the speedup is the ratio of means with
    /// a Fieller interval. For comparison with published numbers, not for decisions.
    pub(super) fn kernelbench(&mut self) -> Result<Timing, Failed> {
        let cfg = self.config;
        let setup = self.setup(TimingMode::Kernelbench);
        let deadline = cfg.timeouts.call + WARMUP_ALLOWANCE;
        self.warm(ArmId::Candidate, setup.clone(), deadline)?;
        self.warm(ArmId::Eager, setup, deadline)?;
        let request = Time {
            n: Some(cfg.max_samples.min(KERNELBENCH_TRIALS)),
            ..Time::default()
        };
        let cand = samples_of(&self.ask(ArmId::Candidate, request.clone(), cfg.timeouts.call)?)?;
        let refs = samples_of(&self.ask(ArmId::Eager, request, cfg.timeouts.call)?)?;
        let arm = |samples_ms: Vec<f64>| Arm {
            median_ms: stats::median(&samples_ms),
            rounds: vec![0; samples_ms.len()],
            samples_ms,
            ..Arm::default()
        };
        let mut timing = summarize(method(cfg), arm(refs), arm(cand), self.seed_base, cfg.delta);
        timing.stopped = "max_samples".into();
        let means = stats::Samples::new(timing.reference.samples_ms.clone()).and_then(|r| {
            Ok(stats::ratio_of_means(
                &r,
                &stats::Samples::new(timing.candidate.samples_ms.clone())?,
                CI_LEVEL,
            ))
        });
        by_ratio_of_means(&mut timing, means.ok().and_then(|m| m.ci), cfg.delta);
        Ok(timing)
    }
}
