//! One evaluation's timing session: its two workers, one timing request to an arm (whose
//! worker answers, and whose fault a failure is), one block of samples as the offline protocol
//! asks for it, the workers' set-up, NVML, and the dispatch to the run's mode. It owns no
//! schedule and no statistics: the modes (`offline`, `kernelbench`, `server`) decide what to ask.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::arms::ArmId;
use super::beside;
use super::replies::{excess_of, samples_of, times_of};
use crate::config::{Config, Mode};
use crate::nvml::{Gpu, Nvml, Telemetry};
use crate::record::{merge_check, Check, Timing};
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::{Command, Time, TimeSetup, TimingMode};
use crate::worker::{Failure, Link, Reply};

/// Why timing (or another phase of an evaluation) ended early: the cause that decides the
/// verdict.
pub type Failed = Cause;

/// Extra time allowed for a worker's warm-up (at most ~2 s of calls) beyond one call's deadline.
pub(super) const WARMUP_ALLOWANCE: Duration = Duration::from_secs(5);

/// The two workers of an evaluation, as timing uses them.
pub struct Session<'s, L: Link> {
    pub config: &'s Config,
    pub reference: &'s mut L,
    pub candidate: &'s mut L,
    /// NVML for the evaluation's GPU, when it can be read.
    pub gpu: Option<&'s Mutex<Nvml>>,
    /// The CPU both workers' submitting threads move to for timing (`cpus::reserve`).
    pub cpu: Option<usize>,
    /// Base of the warm-up's input seeds (draw k uses derive_seed(base, k)) and of the
    /// statistics' resampling; a timed block's inputs come from a seed no worker could know
    /// before the block (`offline`).
    pub seed_base: u64,
    /// The folder where the arms keep their timed outputs as files (the exchange, as the
    /// workers see it), when the outputs cannot stay on the GPU and be shared by CUDA IPC: on
    /// the CPU, or after IPC failed.
    pub kept_files: Option<PathBuf>,
    /// One call per sample for every arm: the candidate hands out the same output storage on
    /// every call (`outputs.independence`'s breach), so a burst's later calls would overwrite
    /// the earlier calls' outputs before they are kept.
    pub single_calls: bool,
    /// Where the session's time went beside the sampled rounds, so far.
    pub spent: Spent,
}

/// Seconds of a timing session outside its sampled rounds (`Phases::warmup_s` and the next two).
#[derive(Clone, Copy, Debug, Default)]
pub struct Spent {
    /// Every arm's set-up and warm-up.
    pub warmup_s: f64,
    /// The reference worker's checks of timed outputs (`timing.timed_output_check`).
    pub output_checks_s: f64,
    /// The process check's set-up and rounds (`timing.process`).
    pub process_check_s: f64,
    /// Stopping and continuing the candidate's processes beside its worker (`alone`).
    pub pause_s: f64,
}

/// A block's draws: its seed, and the pool slot of its first draw.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Draws {
    pub(super) seed: Option<u64>,
    pub(super) keep: u32,
}

/// A block's reply, read.
pub(super) struct Block {
    pub(super) samples: Vec<f64>,
    pub(super) overflows: u32,
    pub(super) audit_ms: Vec<f64>,
    pub(super) audit_excess_ms: Vec<f64>,
    /// kbench's wall time for the block per sample asked.
    pub(super) wall_per_sample_ms: f64,
    /// Calls per sample the worker timed (fewer than asked when memory held fewer input sets).
    pub(super) burst: u32,
}

impl<L: Link> Session<'_, L> {
    /// A request to the worker of `arm`. What the candidate started beside its worker (forked,
    /// detached processes) is stopped whenever the request is not its own arm's, so it cannot
    /// slow the reference or the control arm; the workers themselves are never stopped (their
    /// threads are `runtime.thread_count`'s), so an honest candidate's timing is untouched.
    pub(super) fn alone<C: Command>(
        &mut self,
        arm: ArmId,
        body: C,
        deadline: Duration,
    ) -> Result<Reply<C::Reply>, Failure> {
        let started = Instant::now();
        if arm == ArmId::Candidate {
            self.candidate.resume();
        } else {
            self.candidate.pause();
        }
        self.spent.pause_s += started.elapsed().as_secs_f64();
        let worker = if arm.in_candidate() {
            &mut *self.candidate
        } else {
            &mut *self.reference
        };
        worker.request(body, deadline)
    }

    /// A timing request to one arm; the reference's own errors are not the submission's fault,
    /// but its death while the candidate runs is.
    pub(super) fn ask<C: Command>(
        &mut self,
        arm: ArmId,
        body: C,
        deadline: Duration,
    ) -> Result<C::Reply, Failed> {
        match (self.alone(arm, body, deadline), arm) {
            (Ok(Reply::Ok(v)), _) => Ok(v),
            (Ok(Reply::Err(e)), ArmId::Eager | ArmId::Compiled) => {
                Err(Cause::ReferenceError(ReferenceStep::Timing, e))
            }
            (Err(f), ArmId::Eager | ArmId::Compiled) => Err(Cause::ReferenceDied(f)),
            (Ok(Reply::Err(e)), _) => Err(Cause::Raised(e)),
            (Err(f), _) => Err(Cause::Silent(f)),
        }
    }

    /// An arm's set-up request (its input sets and warm-up), its time counted in
    /// `spent.warmup_s`.
    pub(super) fn warm(
        &mut self,
        arm: ArmId,
        body: TimeSetup,
        deadline: Duration,
    ) -> Result<<TimeSetup as Command>::Reply, Failed> {
        let started = Instant::now();
        let reply = self.ask(arm, body, deadline);
        self.spent.warmup_s += started.elapsed().as_secs_f64();
        reply
    }

    /// One block from `arm`: `n` samples of `burst` calls behind a blocker of `blocker_cycles`,
    /// then `audits` audit calls, drawn as `draws` says; its wall time is measured here, around
    /// the request.
    pub(super) fn block(
        &mut self,
        arm: ArmId,
        n: u32,
        blocker_cycles: u64,
        audits: u32,
        burst: u32,
        draws: Draws,
    ) -> Result<Block, Failed> {
        let request = Time {
            n: Some(n),
            blocker_cycles: Some(blocker_cycles),
            audits: Some(audits),
            burst: Some(burst),
            arm: arm.wire(),
            seed: draws.seed,
            keep: Some(draws.keep),
            ..Time::default()
        };
        // The block's own wall time: stopping and continuing the other worker is kbench's.
        let (started, paused) = (Instant::now(), self.spent.pause_s);
        let reply = self.ask(arm, request, self.config.timeouts.call)?;
        let wall_ms = (started.elapsed().as_secs_f64() - (self.spent.pause_s - paused)) * 1e3;
        let samples = samples_of(&reply)?;
        let burst_used = reply
            .burst
            .map_or(1, |b| b.clamp(1, u64::from(burst)) as u32);
        Ok(Block {
            burst: burst_used,
            wall_per_sample_ms: wall_ms / f64::from(n.max(1)),
            overflows: reply.overflows as u32,
            audit_ms: times_of(&reply.audit_ms, "audit_ms")?,
            audit_excess_ms: excess_of(&reply)?,
            samples,
        })
    }

    /// A worker's timing set-up in `mode`: its inputs' seeds, and the CPU its submitting thread
    /// moves to.
    pub(super) fn setup(&self, mode: TimingMode) -> TimeSetup {
        TimeSetup {
            seed: self.seed_base,
            mode,
            cpu: self.cpu,
            cycles_per_us: None,
            arm: None,
            kept: None,
        }
    }

    /// Where `arm` keeps its timed outputs as files, if it does (`kept_files`).
    pub(super) fn kept_path(&self, arm: ArmId) -> Option<PathBuf> {
        let base = self.kept_files.as_ref()?;
        Some(base.join(format!("kept-{arm:?}").to_lowercase()))
    }

    pub(super) fn read_gpu(&self) -> Option<Telemetry> {
        self.gpu?.lock().ok()?.read().ok()
    }

    pub(super) fn max_sm_mhz(&self) -> Option<u32> {
        self.gpu?.lock().ok()?.max_sm_mhz().ok()
    }

    /// Time both arms in the run's mode; the checks it runs on the way go to `checks`, with the
    /// census of what the candidate ran beside its worker meanwhile (`beside`).
    pub fn run(&mut self, checks: &mut Vec<Check>) -> Result<Timing, Failed> {
        let before = self.candidate.beside();
        let started = Instant::now();
        let timed = match self.config.mode {
            Mode::KernelBench => self.kernelbench(),
            Mode::Server => self.server(),
            Mode::Offline => self.offline(checks),
        };
        self.candidate.resume();
        let mut timing = timed?;
        let after = self.candidate.beside();
        merge_check(
            checks,
            beside::judge(&before, &after, started.elapsed().as_secs_f64()),
        );
        timing.cpu = self.cpu;
        Ok(timing)
    }
}
