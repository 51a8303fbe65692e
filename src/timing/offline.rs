//! The offline protocol (docs/design/timing.md 10.2-10.4): warm-up and blocker sizing,
//! interleaved rounds of blocks (palindromes over the arms, the start rotated, each block's
//! inputs from a fresh seed), NVML telemetry after every block (slowdown rounds retaken, power
//! capping tagged), adaptive stopping on the precision of the speedup, timed-output checks at
//! unpredictable rounds (`kept`), audit calls, then the conclusion: the envelope and audit
//! checks, the summary, and the process check of a label a difference between the two processes
//! could explain. It schedules and gathers; the envelope's
//! arithmetic, the statistics and the label rules live in their own files.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::arms::{arm_of, ArmId, Taken};
use super::envelope::{audit_check, charged, Envelope};
use super::kept::{KeptBlock, Pool};
use super::label::{
    allow_host_error, allow_process_effect, clock_parity, distrust_charged, process_check_due,
    process_unchecked,
};
use super::session::{Block, Draws, Failed, Session, WARMUP_ALLOWANCE};
use super::summary::{compile_baseline, median_or_zero, method, summarize, CI_LEVEL};
use crate::config::{Config, Device};
use crate::nvml::{RoundTag, Telemetry};
use crate::record::{
    merge_check, Arm, Audit, Check, Outcome, ProcessEffect, RoundTelemetry, Timing, CHARGED,
};
use crate::stats;
use crate::verdict::Cause;
use crate::worker::request::{TimeSetup, TimingMode};
use crate::worker::{ErrorKind, Link};

/// Samples per arm in one block: enough calls for ~5 ms, at most 10. A round is A C C A (or
/// C A A C) in blocks, so linear drift cancels within a round and each arm holds each position
/// equally often.
const BLOCK: u32 = 10;
const BLOCK_MS: f64 = 5.0;
/// Rounds before stopping may be considered: the bootstrap resamples whole rounds.
const MIN_ROUNDS: u32 = 5;
/// Resamples of the bootstrap that confirms the quick interval before stopping.
const CONFIRM_RESAMPLES: usize = 1_000;
/// The blocker: twice the slower arm's host submission time, within these bounds (µs).
const BLOCKER_MIN_US: f64 = 50.0;
const BLOCKER_MAX_US: f64 = 100_000.0;
/// SM clock assumed when NVML cannot say: the blocker spins cycles, so a higher guess only
/// lengthens it.
const FALLBACK_MAX_MHZ: u32 = 2_000;
/// Rounds with audit calls (this many per arm): the first, then every tenth.
const AUDIT_EVERY: u32 = 10;
pub(super) const AUDIT_CALLS: u32 = 3;

/// The blocker grows (doubling) to this multiple of its first length to cover host submission;
/// a call still outlasting it waits for the GPU itself (a host synchronization inside).
const BLOCKER_GROWTH: f64 = 8.0;
/// Bursts: calls under 100 µs are timed in bursts of up to 32 calls filling 400 µs, so a
/// sample's wall time is long beside the envelope's floor (`envelope`): work a short call hides
/// outside its events adds up over the burst.
const BURST_BELOW_MS: f64 = 0.1;
const BURST_MS: f64 = 0.4;
const BURST_MAX: u32 = 32;
/// Audit samples per arm taken when the audit flags the candidate.
const AUDIT_SAMPLES: u32 = 20;

/// Timed outputs checked: the first round's, then each later round with probability 1/4.
const MAX_TIMED_CHECKS: u32 = 6;

/// Pause after a round discarded for slowdown, to let the GPU recover.
const SLOWDOWN_PAUSE: Duration = Duration::from_millis(50);

/// Rounds of A and A' the process check (`allow_process_effect`) takes.
pub(super) const PROCESS_ROUNDS: u32 = 6;

/// What the warm-up decided for the offline protocol's rounds.
struct Plan {
    /// Arms timed: A and C, and B (torch.compile) when it compiled.
    arm_count: usize,
    /// Seconds torch.compile took on its first call (arm B).
    compile_s: f64,
    compile_failed: Option<String>,
    /// Calls per sample (calls under 10 µs are timed in bursts).
    burst: u32,
    first_blocker_us: f64,
    /// Samples per arm in one block.
    block_n: u32,
    /// Where the candidate keeps its timed calls' outputs.
    pool: Pool,
    /// The GPU's maximum SM clock (NVML), and the one the blockers' cycle counts assume.
    max_sm: Option<u32>,
    max_mhz: u32,
}

impl Plan {
    fn cycles(&self, blocker_us: f64) -> u64 {
        (blocker_us * f64::from(self.max_mhz)) as u64
    }

    /// The longest blocker before a forward counts as synchronizing with the host.
    fn blocker_ceiling_us(&self) -> f64 {
        (BLOCKER_GROWTH * self.first_blocker_us).min(BLOCKER_MAX_US)
    }
}

/// One round's blocks per arm, before it is kept or taken again.
pub(super) struct Round {
    pub(super) index: u32,
    /// Per arm (`ArmId::index`), its blocks.
    pub(super) blocks: Vec<Vec<Block>>,
    /// SM clock after each of an arm's blocks.
    pub(super) clocks: Vec<Vec<f64>>,
    pub(super) slowdown: bool,
    pub(super) reading: Option<Telemetry>,
    /// The candidate's blocks, as its pool holds their outputs.
    pub(super) kept: Vec<KeptBlock>,
}

/// The rounds kept, and how sampling went.
pub(super) struct Rounds {
    /// Per arm (`ArmId::index`), its samples.
    pub(super) arms: Vec<Taken>,
    pub(super) telemetry: Vec<RoundTelemetry>,
    /// The smallest burst any block ran (fewer input sets than asked lower it).
    pub(super) used_burst: u32,
    pub(super) blocker_us: f64,
    /// The forward outlasted the largest blocker: it waits for the GPU inside.
    pub(super) host_syncs: bool,
    pub(super) kept: u32,
    pub(super) attempts: u32,
    pub(super) overflows: u32,
    /// Why sampling stopped (`stop_reason`).
    pub(super) stopped: &'static str,
}

impl Rounds {
    /// Keep a round, run behind a blocker of `blocker_ms`: its samples and clocks go to their
    /// arms.
    pub(super) fn keep(&mut self, mut round: Round, blocker_ms: f64) {
        for (arm, taken) in self.arms.iter_mut().enumerate() {
            for block in std::mem::take(&mut round.blocks[arm]) {
                self.used_burst = self.used_burst.min(block.burst);
                // Wall time per sample beyond the reported median sample: the statistics use
                // medians, so work a forger piles into one sample of a block is unexplained.
                let reported = median_or_zero(&block.samples) * f64::from(block.burst);
                let unexplained = block.wall_per_sample_ms - reported;
                taken.unexplained_ms.push(unexplained);
                taken.harness_ms.push(unexplained - blocker_ms);
                taken
                    .rounds
                    .extend(std::iter::repeat_n(round.index, block.samples.len()));
                taken.samples.extend(block.samples);
                taken.audit_ms.extend(block.audit_ms);
                taken.audit_excess_ms.extend(block.audit_excess_ms);
            }
            taken.sm_mhz.append(&mut round.clocks[arm]);
        }
        self.kept += 1;
    }
}

impl<L: Link> Session<'_, L> {
    /// The offline protocol (docs/design/timing.md): warm up and size the samples, take interleaved
    /// rounds until the interval is tight enough, then summarize with the audit's verdict.
    pub(super) fn offline(&mut self, checks: &mut Vec<Check>) -> Result<Timing, Failed> {
        let plan = self.warm_up()?;
        let rounds = self.take_rounds(&plan, checks)?;
        self.conclude(&plan, rounds, checks)
    }

    /// Warm every arm up behind a blocker (so the burst rule sees device time) and derive the
    /// sampling plan from the warm-up: arms, burst, blocker and block sizes.
    fn warm_up(&mut self) -> Result<Plan, Failed> {
        let cfg = self.config;
        // Read once: the blockers' cycle counts and the slowdown rule use it.
        let max_sm = self.max_sm_mhz();
        let max_mhz = max_sm.unwrap_or(FALLBACK_MAX_MHZ);
        let mut setup = self.setup(TimingMode::Offline);
        setup.cycles_per_us = Some(max_mhz);
        let deadline = cfg.timeouts.call + WARMUP_ALLOWANCE;
        // Arm B compiles in its set-up (its first call), under the compile deadline, before the
        // other arms warm up; a task torch.compile cannot handle is timed without it, and says so.
        let arm_setup = |arm: ArmId| TimeSetup {
            arm: arm.wire(),
            kept: self.kept_path(arm),
            ..setup.clone()
        };
        let [eager, candidate, compile] =
            [ArmId::Eager, ArmId::Candidate, ArmId::Compiled].map(arm_setup);
        let compiled = cfg
            .compile_baseline
            .then(|| self.warm(ArmId::Compiled, compile, cfg.timeouts.compile + deadline));
        let mut warm = vec![
            self.warm(ArmId::Eager, eager, deadline)?,
            self.warm(ArmId::Candidate, candidate, deadline)?,
        ];
        let pool = Pool::of(&warm[ArmId::Candidate.index()])?;
        let mut compile_failed = None;
        match compiled {
            Some(Ok(reply)) => warm.push(reply),
            Some(Err(cause)) => compile_failed = Some(cause.reason()),
            None => {}
        }
        let submit_ms = warm.iter().filter_map(|w| w.submit_ms).fold(0.0, f64::max);
        let medians = || warm.iter().filter_map(|w| w.median_ms);
        let shortest_ms = medians().fold(f64::INFINITY, f64::min);
        let median_ms = medians().fold(0.0, f64::max);
        let burst = if cfg.device == Device::Cuda && !self.single_calls {
            burst_size(shortest_ms)
        } else {
            1
        };
        // The blocker covers the submission of every call of a sample.
        let first_blocker_us =
            (2e3 * submit_ms * f64::from(burst)).clamp(BLOCKER_MIN_US, BLOCKER_MAX_US);
        let per_block = if median_ms > 0.0 {
            (BLOCK_MS / (median_ms * f64::from(burst))).ceil() as u32
        } else {
            BLOCK
        };
        // A round's two candidate blocks fit the pool where it holds a sample per block.
        let fits = (pool.slots / (2 * burst)).max(1);
        Ok(Plan {
            arm_count: warm.len(),
            compile_s: warm
                .get(ArmId::Compiled.index())
                .and_then(|w| w.compile_s)
                .unwrap_or(0.0),
            compile_failed,
            burst,
            first_blocker_us,
            block_n: per_block
                .clamp(1, BLOCK)
                .min((cfg.max_samples / 4).max(1))
                .min(fits),
            pool,
            max_sm,
            max_mhz,
        })
    }

    /// Interleaved rounds until `stop_reason` says stop: rounds under slowdown are taken again,
    /// a blocker that host submission outlasts grows (or the forward is marked host-bound), and
    /// timed outputs are checked along the way. The blocks' seeds and the rounds and calls
    /// checked come from the OS's randomness, which no worker sees.
    fn take_rounds(&mut self, plan: &Plan, checks: &mut Vec<Check>) -> Result<Rounds, Failed> {
        let cfg = self.config;
        let mut rng = ChaCha8Rng::from_entropy();
        let mut taken = Rounds {
            arms: (0..plan.arm_count).map(|_| Taken::default()).collect(),
            telemetry: Vec::new(),
            used_burst: plan.burst,
            blocker_us: plan.first_blocker_us,
            host_syncs: false,
            kept: 0,
            attempts: 0,
            overflows: 0,
            stopped: "",
        };
        let mut timed_checks = 0u32;
        let started = Instant::now();
        loop {
            taken.attempts += 1;
            let blocker_ms = match cfg.device {
                Device::Cuda => taken.blocker_us / 1e3,
                Device::Cpu => 0.0,
            };
            let mut round =
                self.round(plan, taken.kept, plan.cycles(taken.blocker_us), &mut rng)?;
            if let Some(reading) = round.reading {
                let tag = if round.slowdown {
                    RoundTag::Slowdown
                } else {
                    reading.tag(plan.max_sm)
                };
                taken.telemetry.push(RoundTelemetry {
                    round: taken.kept,
                    reading,
                    tag,
                });
            }
            let round_overflows: u32 = round.blocks.iter().flatten().map(|b| b.overflows).sum();
            taken.overflows += round_overflows;
            let give_up = taken.attempts > 3 * taken.kept + 10;
            if round.slowdown && !give_up {
                std::thread::sleep(SLOWDOWN_PAUSE);
                continue;
            }
            // Host submission outlasted the blocker: lengthen it and take the round again, up to
            // a point; beyond it the call waits for the GPU itself and no blocker can help.
            if round_overflows > 0 && !taken.host_syncs && !give_up {
                let ceiling = plan.blocker_ceiling_us();
                if taken.blocker_us < ceiling {
                    taken.blocker_us = (2.0 * taken.blocker_us).min(ceiling);
                    continue;
                }
                // The call waits out any blocker before its submission goes on: a long one
                // only costs samples.
                taken.host_syncs = true;
                taken.blocker_us = BLOCKER_MIN_US;
            }
            let kept = std::mem::take(&mut round.kept);
            let index = taken.kept;
            taken.keep(round, blocker_ms);
            if timed_checks == 0 || (timed_checks < MAX_TIMED_CHECKS && rng.gen_ratio(1, 4)) {
                timed_checks += 1;
                let asked = Instant::now();
                let check = self.check_kept(&plan.pool, &kept, index, &mut rng);
                self.spent.output_checks_s += asked.elapsed().as_secs_f64();
                merge_check(checks, check?);
            }
            let elapsed = started.elapsed();
            if let Some(why) = stop_reason(&taken.arms, taken.kept, elapsed, cfg, self.seed_base) {
                taken.stopped = why;
                return Ok(taken);
            }
            if give_up && taken.kept < 2 {
                return Err(Cause::NoCleanRounds);
            }
        }
    }

    /// One round: a block per arm per position, in the round's palindromic order, with NVML
    /// read after every block; audits in A's and C's first blocks of every tenth round. Each
    /// block draws its inputs from a fresh seed of `rng`, and keeps its outputs in its arm's
    /// pool after the arm's earlier blocks of the round.
    fn round(
        &mut self,
        plan: &Plan,
        round: u32,
        cycles: u64,
        rng: &mut ChaCha8Rng,
    ) -> Result<Round, Failed> {
        let cuda = self.config.device == Device::Cuda;
        let mut taken = Round {
            index: round,
            blocks: (0..plan.arm_count).map(|_| Vec::new()).collect(),
            clocks: vec![Vec::new(); plan.arm_count],
            slowdown: false,
            reading: None,
            kept: Vec::new(),
        };
        let mut kept_so_far = vec![0u32; plan.arm_count];
        for (position, &arm) in round_order(round, plan.arm_count).iter().enumerate() {
            let audit = cuda
                && round % AUDIT_EVERY == 0
                && position < plan.arm_count
                && arm != ArmId::Compiled;
            let audits = if audit { AUDIT_CALLS } else { 0 };
            let (seed, keep) = (rng.gen_range(0..1 << 53), kept_so_far[arm.index()]);
            let draws = Draws {
                seed: Some(seed),
                keep,
            };
            let block = self.block(arm, plan.block_n, cycles, audits, plan.burst, draws)?;
            let kept = KeptBlock {
                seed,
                keep,
                draws: plan.block_n * block.burst,
            };
            kept_so_far[arm.index()] += kept.draws;
            if arm == ArmId::Candidate {
                taken.kept.push(kept);
            }
            taken.blocks[arm.index()].push(block);
            if let Some(t) = self.read_gpu() {
                taken.slowdown |= t.tag(plan.max_sm) == RoundTag::Slowdown;
                taken.clocks[arm.index()].push(f64::from(t.sm_mhz));
                taken.reading = Some(t);
            }
        }
        Ok(taken)
    }

    /// The timing from the rounds: the envelope and audit checks, audit-only times when the
    /// audit flags the candidate, the torch.compile arm, and the warnings the rounds call for.
    fn conclude(
        &mut self,
        plan: &Plan,
        mut rounds: Rounds,
        checks: &mut Vec<Check>,
    ) -> Result<Timing, Failed> {
        let cfg = self.config;
        let arms = &mut rounds.arms;
        let b = (plan.arm_count > ArmId::Compiled.index())
            .then(|| arms.remove(ArmId::Compiled.index()));
        let c = arms.remove(ArmId::Candidate.index());
        let a = arms.remove(ArmId::Eager.index());
        let envelope = Envelope::of(&a, &c, cfg.device);
        let unexplained = envelope.beyond() > 0.0;
        merge_check(checks, envelope.check());
        let audit_check = audit_check(&a, &c);
        let audited = audit_check.outcome == Outcome::Warn;
        merge_check(checks, audit_check);
        let audit = (!a.audit_ms.is_empty()).then(|| Audit {
            reference_ms: a.audit_ms.clone(),
            candidate_ms: c.audit_ms.clone(),
            reference_excess_ms: a.audit_excess_ms.clone(),
            candidate_excess_ms: c.audit_excess_ms.clone(),
            flagged: audited,
        });
        let (reference, candidate, method) = if audited {
            let (r, c) = self.audit_only(AUDIT_SAMPLES, plan.cycles(rounds.blocker_us))?;
            (r, c, "audit_wall_clock".to_string())
        } else if unexplained {
            let charge = envelope.beyond() / f64::from(rounds.used_burst);
            (arm_of(&a), charged(&c, charge), CHARGED.to_string())
        } else {
            (arm_of(&a), arm_of(&c), method(cfg))
        };
        let flagged = audited || unexplained;
        let compile = match (b, flagged) {
            (Some(b), false) => Some(compile_baseline(
                arm_of(&b),
                &reference,
                &candidate,
                plan.compile_s,
                self.seed_base,
                cfg.delta,
            )),
            _ => None,
        };
        let mut timing = summarize(method, reference, candidate, self.seed_base, cfg.delta);
        timing.compile = compile;
        if rounds.host_syncs {
            allow_host_error(&mut timing, stats::HOST_SPEED_ERROR);
        }
        distrust_charged(&mut timing);
        if !flagged {
            self.check_process(plan, rounds.blocker_us, &mut timing)?;
        }
        timing.rounds_discarded = rounds.attempts - rounds.kept;
        timing.telemetry = std::mem::take(&mut rounds.telemetry);
        timing.stopped = rounds.stopped.into();
        timing.blocker_us = if cfg.device == Device::Cuda {
            rounds.blocker_us
        } else {
            0.0
        };
        timing.blocker_overflows = rounds.overflows;
        timing.audit = audit;
        clock_parity(&mut timing, &a.sm_mhz, &c.sm_mhz);
        self.warn(&mut timing, plan, &rounds, flagged);
        Ok(timing)
    }

    /// The offline timing's warnings, in the order a reader needs them.
    fn warn(&self, timing: &mut Timing, plan: &Plan, rounds: &Rounds, flagged: bool) {
        let cfg = self.config;
        let warnings = &mut timing.warnings;
        if let Some(why) = &plan.compile_failed {
            warnings.push(format!("torch.compile baseline not timed: {why}"));
        } else if cfg.compile_baseline && flagged {
            warnings.push(format!(
                "torch.compile baseline left out: the candidate's times are wall times ({})",
                timing.method
            ));
        }
        if timing.method == CHARGED {
            warnings.push(
                "the candidate's blocks took more wall time than the times it reported explain (timing.wall_envelope): each of its samples is charged the unexplained wall time beyond the reference's and the allowance, by kbench's own clock, and such times label nothing FASTER"
                    .into(),
            );
        }
        if self.single_calls {
            warnings.push(
                "one call per sample, however short: forward hands out the same output storage on every call (outputs.independence), which a burst's later calls would overwrite before it is kept"
                    .into(),
            );
        }
        let used_burst = rounds.used_burst;
        if used_burst > 1 {
            timing.burst = Some(used_burst);
            warnings.push(format!(
                "calls under {:.0} µs: each sample is a burst of {used_burst} calls on distinct input sets under one pair of events, divided by {used_burst}",
                BURST_BELOW_MS * 1e3
            ));
        }
        if rounds.host_syncs {
            warnings.push(format!(
                "forward waits for the GPU while it is being submitted (a host synchronization inside; {} sample(s) outlasted a {:.1} ms blocker): launch latency is inside these times, and with it the host's speed, so the labels allow for a systematic error (host_error)",
                rounds.overflows,
                plan.blocker_ceiling_us() / 1e3,
            ));
        }
        if timing.stopped != "precision" {
            warnings.push(format!(
                "stopped by the {} before reaching ±{:.1} %: the interval reached ±{:.2} %",
                timing.stopped.replace('_', " "),
                cfg.ci_target * 100.0,
                timing.ci_half_width * 100.0
            ));
        }
    }

    /// The process check of a label that a difference between the processes could explain
    /// (`process_check_due`): the reference timed in the candidate's worker too, and the interval
    /// widened by its effect (`allow_process_effect`). A control arm that cannot be timed leaves
    /// the label INCONCLUSIVE; a candidate caught cheating, dying or hanging fails as in any call.
    fn check_process(
        &mut self,
        plan: &Plan,
        blocker_us: f64,
        timing: &mut Timing,
    ) -> Result<(), Failed> {
        if !process_check_due(timing, self.config.process_check_always) {
            return Ok(());
        }
        let started = Instant::now();
        let rounds = self.process_rounds(plan, blocker_us);
        self.spent.process_check_s += started.elapsed().as_secs_f64();
        match rounds {
            Ok((reference, control)) => {
                let effect = summarize(String::new(), reference, control, self.seed_base, 0.0);
                allow_process_effect(
                    timing,
                    ProcessEffect {
                        ratio: effect.speedup,
                        ci_low: effect.speedup_ci_low,
                        ci_high: effect.speedup_ci_high,
                        reference_ms: effect.reference.median_ms,
                        control_ms: effect.candidate.median_ms,
                        rounds: PROCESS_ROUNDS,
                        measured_ci_low: timing.speedup_ci_low,
                        measured_ci_high: timing.speedup_ci_high,
                    },
                );
            }
            Err(
                cause @ (Cause::Silent(_) | Cause::ReferenceDied(_) | Cause::MalformedTimes(_)),
            ) => return Err(cause),
            Err(Cause::Raised(e)) if e.kind == ErrorKind::Cheat => return Err(Cause::Raised(e)),
            Err(cause) => {
                process_unchecked(timing, &cause.reason());
            }
        }
        Ok(())
    }

    /// Rounds of the reference in its own worker (A) and in the candidate's (the control arm
    /// A'), palindromic as the main rounds are: A A' A' A, then A' A A A'.
    fn process_rounds(&mut self, plan: &Plan, blocker_us: f64) -> Result<(Arm, Arm), Failed> {
        let mut setup = self.setup(TimingMode::Offline);
        setup.cycles_per_us = Some(plan.max_mhz);
        setup.arm = ArmId::Control.wire();
        setup.kept = self.kept_path(ArmId::Control);
        let deadline = self.config.timeouts.call + WARMUP_ALLOWANCE;
        self.ask(ArmId::Control, setup, deadline)?;
        let cycles = plan.cycles(blocker_us);
        let mut taken = [Taken::default(), Taken::default()];
        for round in 0..PROCESS_ROUNDS {
            let order = if round % 2 == 0 {
                [ArmId::Eager, ArmId::Control, ArmId::Control, ArmId::Eager]
            } else {
                [ArmId::Control, ArmId::Eager, ArmId::Eager, ArmId::Control]
            };
            for arm in order {
                let block =
                    self.block(arm, plan.block_n, cycles, 0, plan.burst, Draws::default())?;
                // The pair is [A, A'], not indexed by `ArmId::index`.
                let arm_taken = &mut taken[usize::from(arm == ArmId::Control)];
                arm_taken
                    .rounds
                    .extend(std::iter::repeat_n(round, block.samples.len()));
                arm_taken.samples.extend(block.samples);
            }
        }
        Ok((arm_of(&taken[0]), arm_of(&taken[1])))
    }

    /// Audit samples only, interleaved one per arm per round (A C, then C A): the times
    /// reported when events could not see all of the candidate's work.
    fn audit_only(&mut self, rounds: u32, blocker_cycles: u64) -> Result<(Arm, Arm), Failed> {
        let mut taken = [Taken::default(), Taken::default()];
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [ArmId::Eager, ArmId::Candidate]
            } else {
                [ArmId::Candidate, ArmId::Eager]
            };
            for arm in order {
                let block = self.block(arm, 0, blocker_cycles, 1, 1, Draws::default())?;
                for ms in block.audit_ms {
                    taken[arm.index()].samples.push(ms);
                    taken[arm.index()].rounds.push(round);
                }
            }
        }
        Ok((arm_of(&taken[0]), arm_of(&taken[1])))
    }
}

/// Whether to stop after this round: precision reached, the sample cap, or the time budget
/// (precision only after `MIN_ROUNDS`, the others after two rounds, the bootstrap's minimum).
/// Precision is the quick rank interval (docs/design/timing.md step 13), confirmed by a paired bootstrap
/// over rounds like the one reported, so the reported interval meets the target too.
fn stop_reason(
    arms: &[Taken],
    rounds: u32,
    elapsed: Duration,
    cfg: &Config,
    seed: u64,
) -> Option<&'static str> {
    let n = arms.iter().map(|t| t.samples.len()).min().unwrap_or(0);
    // Every speedup reported must reach the target: C against A, and against B when timed.
    let precise_against = |reference: &Taken| {
        let candidate = &arms[ArmId::Candidate.index()];
        let quick = stats::Samples::new(reference.samples.clone())
            .and_then(|a| Ok((a, stats::Samples::new(candidate.samples.clone())?)))
            .is_ok_and(|(a, c)| stats::precision_reached(&a, &c, cfg.ci_target));
        quick
            && stats::Rounds::from_tagged(
                &reference.samples,
                &reference.rounds,
                &candidate.samples,
                &candidate.rounds,
            )
            .is_ok_and(|r| {
                let s = stats::paired_speedup(&r, CONFIRM_RESAMPLES, CI_LEVEL, seed).speedup;
                (s.ci_high - s.ci_low) / (2.0 * s.ratio) <= cfg.ci_target
            })
    };
    let precise = rounds >= MIN_ROUNDS
        && arms
            .iter()
            .enumerate()
            .filter(|(arm, _)| *arm != ArmId::Candidate.index())
            .all(|(_, reference)| precise_against(reference));
    if rounds < 2 {
        None
    } else if precise {
        Some("precision")
    } else if n >= cfg.max_samples as usize {
        Some("max_samples")
    } else if elapsed >= cfg.budget {
        Some("budget")
    } else {
        None
    }
}

/// Calls per sample: 1, or for calls under `BURST_BELOW_MS` enough to fill `BURST_MS`, at
/// most `BURST_MAX` (docs/design/timing.md step 8: event resolution is ~0.5 µs).
fn burst_size(median_ms: f64) -> u32 {
    if median_ms.is_finite() && median_ms > 0.0 && median_ms < BURST_BELOW_MS {
        ((BURST_MS / median_ms).ceil() as u32).clamp(1, BURST_MAX)
    } else {
        1
    }
}

/// One round's blocks: a palindrome over the arms, so linear drift cancels within the round,
/// with the starting arm rotated from round to round (A C C A, C A A C; with B: A B C C B A,
/// B C A A C B, C A B B A C).
fn round_order(round: u32, arm_count: usize) -> Vec<ArmId> {
    let base: &[ArmId] = if arm_count > ArmId::Compiled.index() {
        &[ArmId::Eager, ArmId::Compiled, ArmId::Candidate]
    } else {
        &[ArmId::Eager, ArmId::Candidate]
    };
    let start = round as usize % base.len();
    let half: Vec<ArmId> = base[start..]
        .iter()
        .chain(&base[..start])
        .copied()
        .collect();
    half.iter().chain(half.iter().rev()).copied().collect()
}

#[cfg(test)]
mod tests;
