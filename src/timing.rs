//! The timing schedule (docs/design/timing.md 10.2-10.4) over the two workers of an evaluation: warm-up and
//! blocker sizing, interleaved blocks of samples (A C C A, then C A A C; with the torch.compile
//! baseline B, A B C C B A with the start rotated), NVML telemetry after
//! every block (slowdown rounds retaken, power capping tagged, clock parity), adaptive stopping
//! on the precision of the speedup, timed-output checks at unpredictable rounds, audit samples
//! and the wall-clock envelope; then the statistics of the comparison. The samples themselves
//! are taken by the workers (`kbench_worker/timing.py`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::config::{Config, Device, Mode};
use crate::nvml::{Gpu, Nvml, RoundTag, Telemetry};
use crate::record::{
    merge_check, Arm, Audit, Check, CompileBaseline, Latency, Outcome, ProcessEffect,
    RoundTelemetry, Server, Timing, CHARGED,
};
use crate::stats;
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::{Command, Time, TimeSetup, TimingArm, TimingMode};
use crate::worker::{ErrorKind, Link, Reply};

/// Why timing (or another phase of an evaluation) ended early: the cause that decides the
/// verdict.
pub type Failed = Cause;

/// The arms: the eager reference (A) and the candidate (C) always; torch.compile of the
/// reference (B, in the reference worker) with `--baseline eager,compile`.
const EAGER: usize = 0;
const CANDIDATE: usize = 1;
const COMPILED: usize = 2;
/// The control arm A' (`allow_process_effect`): the reference, timed in the candidate's worker.
const CONTROL: usize = 3;

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
const AUDIT_CALLS: u32 = 3;
/// The candidate's audit excess (host wall time beyond the device's interval for the same call,
/// medians) may reach the largest of a floor, a multiple of the reference's excess and a share
/// of its own audit time. The floor is above the synchronize's latency: 68 honest identity
/// tasks on an H100 read 0.04 ms (median) and up to 0.21 ms; a timed-only stream escape, 3.8 ms.
const AUDIT_FLOOR_MS: f64 = 0.25;
const AUDIT_FACTOR: f64 = 3.0;
const AUDIT_SHARE: f64 = 0.02;
/// The blocker grows (doubling) to this multiple of its first length to cover host submission;
/// a call still outlasting it waits for the GPU itself (a host synchronization inside).
const BLOCKER_GROWTH: f64 = 8.0;
/// Bursts: calls under 10 µs are timed in bursts of up to 32 calls filling 20 µs.
const BURST_BELOW_MS: f64 = 0.010;
const BURST_MS: f64 = 0.020;
const BURST_MAX: u32 = 32;
/// Audit samples per arm taken when the audit flags the candidate.
const AUDIT_SAMPLES: u32 = 20;
/// Wall time per sample not explained by the reported times may exceed the reference's by at
/// most max(floor, share x the reference's median, harness share x the reference's own
/// unexplained time less the blocker). The last is for tasks whose inputs take longer to
/// refresh than the call takes: refreshing the same 6 GB ran up to 12.5 % slower in one worker
/// than in the other on an H100 (level1/19-32, four identity runs), which charged honest calls
/// 9-13 %. The blocker is left out because the candidate sizes it: a forger that sleeps 50 ms
/// in forward grew it to 100 ms, and with it the allowance, and read 1000x FASTER on an H100.
const ENVELOPE_FLOOR_MS: f64 = 0.1;
const ENVELOPE_SHARE: f64 = 0.25;
const ENVELOPE_HARNESS_SHARE: f64 = 0.2;
/// On the CPU the floor is wider: the candidate worker's own checks per block, and a worker
/// descheduled on a busy host, add milliseconds per sample when blocks are short (2-3 ms
/// measured at 8 samples per arm, once 10.7 ms); a forgery below this goes unflagged.
const ENVELOPE_FLOOR_CPU_MS: f64 = 10.0;
/// Timed outputs checked: the first round's, then each later round with probability 1/4.
const MAX_TIMED_CHECKS: u32 = 6;
/// Arms whose median SM clocks differ by more than this are "clock-confounded".
const CLOCK_PARITY: f64 = 0.02;
/// Pause after a round discarded for slowdown, to let the GPU recover.
const SLOWDOWN_PAUSE: Duration = Duration::from_millis(50);
/// Extra time allowed for a worker's warm-up (at most ~2 s of calls) beyond one call's deadline.
const WARMUP_ALLOWANCE: Duration = Duration::from_secs(5);
const BOOTSTRAP_RESAMPLES: usize = stats::DEFAULT_RESAMPLES;
const CI_LEVEL: f64 = 0.95;
/// The process check (`allow_process_effect`) runs for FASTER and SLOWER labels whose interval
/// lies within this factor of 1: a difference between processes explains no more (identities on
/// an H100 read 0.95-1.04 from it; a cuDNN workspace that did not fit, 0.76), and checking
/// larger speedups would only cost time. It takes this many rounds of A and A'.
const PROCESS_RANGE: f64 = 1.5;
const PROCESS_ROUNDS: u32 = 6;

/// The two workers of an evaluation, as timing uses them.
pub struct Session<'s, L: Link> {
    pub config: &'s Config,
    pub reference: &'s mut L,
    pub candidate: &'s mut L,
    /// NVML for the evaluation's GPU, when it can be read.
    pub gpu: Option<&'s Mutex<Nvml>>,
    /// The CPU both workers' submitting threads move to for timing (`cpus::reserve`).
    pub cpu: Option<usize>,
    /// Base of the input seeds of timed calls: sample k of either arm uses derive_seed(base, k).
    pub seed_base: u64,
}

/// One arm's samples as they accumulate.
#[derive(Default)]
struct Taken {
    samples: Vec<f64>,
    rounds: Vec<u32>,
    /// Per block: wall time per sample (seen from here) minus the reported mean sample.
    unexplained_ms: Vec<f64>,
    /// Per block: the same less the blocker's length (input refresh, flush, the worker's work).
    harness_ms: Vec<f64>,
    audit_ms: Vec<f64>,
    audit_excess_ms: Vec<f64>,
    sm_mhz: Vec<f64>,
}

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

/// `--mode server`'s requests per arm: latencies (as samples), device times and SM clocks.
#[derive(Default)]
struct Served {
    arms: [Taken; 2],
    device: [Vec<f64>; 2],
    clocks: [Vec<f64>; 2],
}

/// One round's blocks per arm, before it is kept or taken again.
struct Round {
    index: u32,
    blocks: Vec<Vec<Block>>,
    /// SM clock after each of an arm's blocks.
    clocks: Vec<Vec<f64>>,
    slowdown: bool,
    reading: Option<Telemetry>,
}

/// The rounds kept, and how sampling went.
struct Rounds {
    arms: Vec<Taken>,
    telemetry: Vec<RoundTelemetry>,
    /// The smallest burst any block ran (fewer input sets than asked lower it).
    used_burst: u32,
    blocker_us: f64,
    /// The forward outlasted the largest blocker: it waits for the GPU inside.
    host_syncs: bool,
    kept: u32,
    attempts: u32,
    overflows: u32,
    /// Why sampling stopped (`stop_reason`).
    stopped: &'static str,
}

impl Rounds {
    /// Keep a round, run behind a blocker of `blocker_ms`: its samples and clocks go to their
    /// arms.
    fn keep(&mut self, mut round: Round, blocker_ms: f64) {
        for (arm, taken) in self.arms.iter_mut().enumerate() {
            for block in std::mem::take(&mut round.blocks[arm]) {
                self.used_burst = self.used_burst.min(block.burst);
                // Wall time per sample beyond the reported mean sample.
                let reported = mean_or_zero(&block.samples) * f64::from(block.burst);
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

/// A block's reply, read.
struct Block {
    samples: Vec<f64>,
    overflows: u32,
    audit_ms: Vec<f64>,
    audit_excess_ms: Vec<f64>,
    /// kbench's wall time for the block per sample asked.
    wall_per_sample_ms: f64,
    /// Calls per sample the worker timed (fewer than asked when memory held fewer input sets).
    burst: u32,
}

/// A warm-up's figures.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Warmed {
    pub submit_ms: Option<f64>,
    pub median_ms: Option<f64>,
    /// How long torch.compile took (the compiled arm).
    pub compile_s: Option<f64>,
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

impl<L: Link> Session<'_, L> {
    fn worker(&mut self, arm: usize) -> &mut L {
        if arm == CANDIDATE || arm == CONTROL {
            self.candidate
        } else {
            self.reference
        }
    }

    /// A timing request to one arm; the reference's own errors are not the submission's fault,
    /// but its death while the candidate runs is.
    fn ask<C: Command>(
        &mut self,
        arm: usize,
        body: C,
        deadline: Duration,
    ) -> Result<C::Reply, Failed> {
        match (self.worker(arm).request(body, deadline), arm) {
            (Ok(Reply::Ok(v)), _) => Ok(v),
            (Ok(Reply::Err(e)), EAGER | COMPILED) => {
                Err(Cause::ReferenceError(ReferenceStep::Timing, e))
            }
            (Err(f), EAGER | COMPILED) => Err(Cause::ReferenceDied(f)),
            (Ok(Reply::Err(e)), _) => Err(Cause::Raised(e)),
            (Err(f), _) => Err(Cause::Silent(f)),
        }
    }

    fn block(
        &mut self,
        arm: usize,
        n: u32,
        blocker_cycles: u64,
        audits: u32,
        burst: u32,
    ) -> Result<Block, Failed> {
        let request = Time {
            n: Some(n),
            blocker_cycles: Some(blocker_cycles),
            audits: Some(audits),
            burst: Some(burst),
            arm: match arm {
                COMPILED => Some(TimingArm::Compile),
                CONTROL => Some(TimingArm::Control),
                _ => None,
            },
            ..Time::default()
        };
        let started = Instant::now();
        let reply = self.ask(arm, request, self.config.timeouts.call)?;
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;
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
    fn setup(&self, mode: TimingMode) -> TimeSetup {
        TimeSetup {
            seed: self.seed_base,
            mode,
            cpu: self.cpu,
            cycles_per_us: None,
            arm: None,
        }
    }

    fn read_gpu(&self) -> Option<Telemetry> {
        self.gpu?.lock().ok()?.read().ok()
    }

    fn max_sm_mhz(&self) -> Option<u32> {
        self.gpu?.lock().ok()?.max_sm_mhz().ok()
    }

    /// Time both arms in the run's mode. `timed_check` checks the candidate's kept output of the
    /// last block (it gets both workers and the seed base) and says how it went.
    pub fn run(
        &mut self,
        checks: &mut Vec<Check>,
        timed_check: impl FnMut(&mut L, &mut L, u64) -> Result<Check, Failed>,
    ) -> Result<Timing, Failed> {
        let mut timing = match self.config.mode {
            Mode::KernelBench => self.kernelbench(),
            Mode::Server => self.server(),
            Mode::Offline => self.offline(checks, timed_check),
        }?;
        timing.cpu = self.cpu;
        Ok(timing)
    }

    /// The offline protocol (docs/design/timing.md): warm up and size the samples, take interleaved
    /// rounds until the interval is tight enough, then summarize with the audit's verdict.
    fn offline(
        &mut self,
        checks: &mut Vec<Check>,
        timed_check: impl FnMut(&mut L, &mut L, u64) -> Result<Check, Failed>,
    ) -> Result<Timing, Failed> {
        let plan = self.warm_up()?;
        let rounds = self.take_rounds(&plan, checks, timed_check)?;
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
        let compiled = cfg.compile_baseline.then(|| {
            let mut request = setup.clone();
            request.arm = Some(TimingArm::Compile);
            self.ask(COMPILED, request, cfg.timeouts.compile + deadline)
        });
        let mut warm = vec![
            self.ask(EAGER, setup.clone(), deadline)?,
            self.ask(CANDIDATE, setup, deadline)?,
        ];
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
        let burst = if cfg.device == Device::Cuda {
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
        Ok(Plan {
            arm_count: warm.len(),
            compile_s: warm.get(COMPILED).and_then(|w| w.compile_s).unwrap_or(0.0),
            compile_failed,
            burst,
            first_blocker_us,
            block_n: per_block.clamp(1, BLOCK).min((cfg.max_samples / 4).max(1)),
            max_sm,
            max_mhz,
        })
    }

    /// Interleaved rounds until `stop_reason` says stop: rounds under slowdown are taken again,
    /// a blocker that host submission outlasts grows (or the forward is marked host-bound), and
    /// timed outputs are checked along the way.
    fn take_rounds(
        &mut self,
        plan: &Plan,
        checks: &mut Vec<Check>,
        mut timed_check: impl FnMut(&mut L, &mut L, u64) -> Result<Check, Failed>,
    ) -> Result<Rounds, Failed> {
        let cfg = self.config;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed_base);
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
            let round = self.round(plan, taken.kept, plan.cycles(taken.blocker_us))?;
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
            taken.keep(round, blocker_ms);
            if timed_checks == 0 || (timed_checks < MAX_TIMED_CHECKS && rng.gen_ratio(1, 4)) {
                timed_checks += 1;
                let check = timed_check(self.reference, self.candidate, self.seed_base)?;
                merge_check(checks, check);
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
    /// read after every block; audits in A's and C's first blocks of every tenth round.
    fn round(&mut self, plan: &Plan, round: u32, cycles: u64) -> Result<Round, Failed> {
        let cuda = self.config.device == Device::Cuda;
        let mut taken = Round {
            index: round,
            blocks: (0..plan.arm_count).map(|_| Vec::new()).collect(),
            clocks: vec![Vec::new(); plan.arm_count],
            slowdown: false,
            reading: None,
        };
        for (position, &arm) in round_order(round, plan.arm_count).iter().enumerate() {
            let audit =
                cuda && round % AUDIT_EVERY == 0 && position < plan.arm_count && arm != COMPILED;
            let audits = if audit { AUDIT_CALLS } else { 0 };
            taken.blocks[arm].push(self.block(arm, plan.block_n, cycles, audits, plan.burst)?);
            if let Some(t) = self.read_gpu() {
                taken.slowdown |= t.tag(plan.max_sm) == RoundTag::Slowdown;
                taken.clocks[arm].push(f64::from(t.sm_mhz));
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
        let b = (plan.arm_count > COMPILED).then(|| arms.remove(COMPILED));
        let c = arms.remove(CANDIDATE);
        let a = arms.remove(EAGER);
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
    /// (`PROCESS_RANGE`): the reference timed in the candidate's worker too, and the interval
    /// widened by its effect (`allow_process_effect`). A control arm that cannot be timed leaves
    /// the label INCONCLUSIVE; a candidate caught cheating, dying or hanging fails as in any call.
    fn check_process(
        &mut self,
        plan: &Plan,
        blocker_us: f64,
        timing: &mut Timing,
    ) -> Result<(), Failed> {
        let due = self.config.process_check_always
            || matches!(
                timing.label,
                stats::Decision::Faster | stats::Decision::Slower
            ) && timing.speedup_ci_low >= 1.0 / PROCESS_RANGE
                && timing.speedup_ci_high <= PROCESS_RANGE;
        if !due {
            return Ok(());
        }
        match self.process_rounds(plan, blocker_us) {
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
                timing.label = stats::Decision::Inconclusive;
                timing.warnings.push(format!(
                    "the process check could not time the reference in the candidate's worker ({}): a difference between the two processes is not ruled out, so the label is INCONCLUSIVE",
                    cause.reason()
                ));
            }
        }
        Ok(())
    }

    /// Rounds of the reference in its own worker (A) and in the candidate's (the control arm
    /// A'), palindromic as the main rounds are: A A' A' A, then A' A A A'.
    fn process_rounds(&mut self, plan: &Plan, blocker_us: f64) -> Result<(Arm, Arm), Failed> {
        let mut setup = self.setup(TimingMode::Offline);
        setup.cycles_per_us = Some(plan.max_mhz);
        setup.arm = Some(TimingArm::Control);
        let deadline = self.config.timeouts.call + WARMUP_ALLOWANCE;
        self.ask(CONTROL, setup, deadline)?;
        let cycles = plan.cycles(blocker_us);
        let mut taken = [Taken::default(), Taken::default()];
        for round in 0..PROCESS_ROUNDS {
            let order = if round % 2 == 0 {
                [EAGER, CONTROL, CONTROL, EAGER]
            } else {
                [CONTROL, EAGER, EAGER, CONTROL]
            };
            for arm in order {
                let block = self.block(arm, plan.block_n, cycles, 0, plan.burst)?;
                let arm_taken = &mut taken[usize::from(arm == CONTROL)];
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
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for arm in order {
                let block = self.block(arm, 0, blocker_cycles, 1, 1)?;
                for ms in block.audit_ms {
                    taken[arm].samples.push(ms);
                    taken[arm].rounds.push(round);
                }
            }
        }
        Ok((arm_of(&taken[0]), arm_of(&taken[1])))
    }

    /// Upstream KernelBench's loop: all candidate samples, then all reference samples (its
    /// order), each after a write flush with no blocker; the speedup is the ratio of means with
    /// a Fieller interval. For comparison with published numbers, not for decisions.
    fn kernelbench(&mut self) -> Result<Timing, Failed> {
        let cfg = self.config;
        let setup = self.setup(TimingMode::Kernelbench);
        let deadline = cfg.timeouts.call + WARMUP_ALLOWANCE;
        self.ask(1, setup.clone(), deadline)?;
        self.ask(0, setup, deadline)?;
        let request = Time {
            n: Some(cfg.max_samples.min(KERNELBENCH_TRIALS)),
            ..Time::default()
        };
        let cand = samples_of(&self.ask(1, request.clone(), cfg.timeouts.call)?)?;
        let refs = samples_of(&self.ask(0, request, cfg.timeouts.call)?)?;
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
        timing.speedup = timing.mean_ratio;
        match means.ok().and_then(|m| m.ci) {
            Some(ci) => {
                (timing.speedup_ci_low, timing.speedup_ci_high) = (ci.low, ci.high);
                timing.label = stats::decide(ci.low, ci.high, cfg.delta);
            }
            None => {
                (timing.speedup_ci_low, timing.speedup_ci_high) = (0.0, f64::MAX);
                timing.label = stats::Decision::Inconclusive;
            }
        }
        timing.ci_half_width = half_width(&timing);
        Ok(timing)
    }
}

/// `--mode server`: requests per second, unless a call would keep the GPU busy more than this
/// share of the time; requests per arm wanted, and the least time (p99s need ~1,000 requests);
/// the longest time unless --budget is longer; requests per worker request; request clocks
/// below this share of the maximum are reported as down-clocked.
const SERVER_QPS: f64 = 100.0;
const SERVER_BUSY: f64 = 0.05;
const SERVER_REQUESTS: u32 = 1_000;
const SERVER_MIN: Duration = Duration::from_secs(20);
const SERVER_CAP: Duration = Duration::from_secs(60);
const SERVER_BLOCK: usize = 5;
const SERVER_CLOCK_SHARE: f64 = 0.9;

impl<L: Link> Session<'_, L> {
    /// The server scenario (docs/design/timing.md): each arm gets blocks of requests, each after an
    /// exponential idle gap from a seeded generator shared by both arms, in a seeded random
    /// order per round, until each has `SERVER_REQUESTS` and `SERVER_MIN` has passed (or it
    /// has `--max-samples`), at most `SERVER_CAP` or `--budget` when longer. The speedup is the
    /// ratio of median request latencies with the paired bootstrap over rounds; the record adds
    /// p50/p90/p99 per arm, the SM clock read before each request, and the p99 ratio.
    fn server(&mut self) -> Result<Timing, Failed> {
        let cfg = self.config;
        let setup = self.setup(TimingMode::Server);
        let deadline = cfg.timeouts.call + WARMUP_ALLOWANCE;
        let warm = [
            self.ask(0, setup.clone(), deadline)?,
            self.ask(1, setup, deadline)?,
        ];
        let median_ms = warm.iter().filter_map(|w| w.median_ms).fold(0.0, f64::max);
        let mean_gap_ms = (1e3 / SERVER_QPS).max(median_ms / SERVER_BUSY);
        let wanted = cfg.max_samples.min(SERVER_REQUESTS) as usize;
        // The least time applies to the full request count, not to a run cut by --max-samples.
        let least = if wanted >= SERVER_REQUESTS as usize {
            SERVER_MIN
        } else {
            Duration::ZERO
        };
        let cap = cfg.budget.max(SERVER_CAP);
        let served = self.serve(mean_gap_ms, wanted, least, cap)?;
        Ok(self.server_timing(served, mean_gap_ms, wanted, cap))
    }

    /// Requests in rounds, each arm's block of `SERVER_BLOCK` after seeded exponential gaps, in
    /// a seeded random order, until each arm has `wanted` and `least` has passed (or the cap).
    fn serve(
        &mut self,
        mean_gap_ms: f64,
        wanted: usize,
        least: Duration,
        cap: Duration,
    ) -> Result<Served, Failed> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed_base);
        let mut served = Served::default();
        let started = Instant::now();
        let mut round = 0u32;
        while (served.arms.iter().any(|a| a.samples.len() < wanted) || started.elapsed() < least)
            && (round < 2 || started.elapsed() < cap)
        {
            let order = if rng.gen_bool(0.5) { [0, 1] } else { [1, 0] };
            for arm in order {
                let gaps: Vec<f64> = (0..SERVER_BLOCK)
                    .map(|_| -mean_gap_ms * (1.0 - rng.gen::<f64>()).ln())
                    .collect();
                let waits = Duration::from_secs_f64(gaps.iter().sum::<f64>() / 1e3);
                let reply = self.ask(
                    arm,
                    Time {
                        gaps_ms: Some(gaps),
                        ..Time::default()
                    },
                    self.config.timeouts.call + waits,
                )?;
                let latency = times_of(&reply.latency_ms, "latency_ms")?;
                served.device[arm].extend(samples_of(&reply)?);
                // null where NVML could not be read from the worker.
                served.clocks[arm].extend(reply.sm_mhz.iter().flatten());
                let taken = &mut served.arms[arm];
                taken
                    .rounds
                    .extend(std::iter::repeat_n(round, latency.len()));
                taken.samples.extend(latency);
            }
            round += 1;
        }
        Ok(served)
    }

    /// The server timing: the ratio of median latencies, the p99 ratio, per-arm latency
    /// quantiles, and warnings for a run the cap cut short or a down-clocked GPU.
    fn server_timing(
        &self,
        served: Served,
        mean_gap_ms: f64,
        wanted: usize,
        cap: Duration,
    ) -> Timing {
        let cfg = self.config;
        let Served {
            arms,
            device,
            clocks,
        } = served;
        let mut timing = summarize(
            method(cfg),
            arm_of(&arms[0]),
            arm_of(&arms[1]),
            self.seed_base,
            cfg.delta,
        );
        let fewest = arms.iter().map(|a| a.samples.len()).min().unwrap_or(0);
        timing.stopped = if fewest >= wanted {
            "max_samples"
        } else {
            // Long calls need long gaps to keep the GPU mostly idle; the cap ends them first.
            timing.warnings.push(format!(
                "stopped at the {:.0} s cap with {fewest} of {wanted} requests per arm (mean gap \
                 {mean_gap_ms:.0} ms); a longer --budget takes more",
                cap.as_secs_f64()
            ));
            "budget"
        }
        .into();
        if let Some(max) = self.max_sm_mhz() {
            for (arm, name) in [(0, "reference"), (1, "candidate")] {
                let mhz = median_or_zero(&clocks[arm]);
                if mhz > 0.0 && mhz < SERVER_CLOCK_SHARE * f64::from(max) {
                    timing.warnings.push(format!(
                        "{name} requests started on a down-clocked GPU: median SM clock {mhz:.0} of {max} MHz"
                    ));
                }
            }
        }
        let [a, c] = &arms;
        timing.server = Some(Server {
            mean_gap_ms,
            reference: latency(&a.samples, &device[0], &clocks[0]),
            candidate: latency(&c.samples, &device[1], &clocks[1]),
            p99_speedup: stats::quantile_speedup(
                &a.samples,
                &c.samples,
                0.99,
                BOOTSTRAP_RESAMPLES / 5,
                CI_LEVEL,
                self.seed_base,
            ),
        });
        timing
    }
}

fn latency(requests: &[f64], device: &[f64], sm_mhz: &[f64]) -> Latency {
    let s = stats::Samples::new(requests.to_vec()).ok();
    let q = |p: f64| s.as_ref().map_or(0.0, |s| s.quantile_ms(p));
    Latency {
        requests: requests.len(),
        p50_ms: q(0.5),
        p90_ms: q(0.9),
        p99_ms: q(0.99),
        mean_ms: s.as_ref().map_or(0.0, stats::Samples::mean_ms),
        device_p50_ms: median_or_zero(device),
        device_ms: device.to_vec(),
        sm_mhz_p50: (!sm_mhz.is_empty()).then(|| stats::median(sm_mhz)),
        sm_mhz: sm_mhz.to_vec(),
    }
}

/// Upstream KernelBench's number of timed trials.
const KERNELBENCH_TRIALS: u32 = 100;

/// The candidate's times when its blocks took more wall time than they explain
/// (`timing.wall_envelope`): each sample charged `charge_ms`, the unexplained wall time per call
/// beyond the reference's and the envelope's allowance, so forged times gain at most the
/// allowance, as an honest candidate's own overhead may.
fn charged(taken: &Taken, charge_ms: f64) -> Arm {
    arm_of(&Taken {
        samples: taken.samples.iter().map(|ms| ms + charge_ms).collect(),
        rounds: taken.rounds.clone(),
        ..Taken::default()
    })
}

fn arm_of(taken: &Taken) -> Arm {
    Arm {
        median_ms: stats::median(&taken.samples),
        samples_ms: taken.samples.clone(),
        rounds: taken.rounds.clone(),
        ..Arm::default()
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
        let candidate = &arms[CANDIDATE];
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
            .filter(|(arm, _)| *arm != CANDIDATE)
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

/// Charged times (`timing.wall_envelope`) label nothing FASTER: a forger keeps the allowance (a
/// quarter of the reference's call, or a fifth of its input refresh), and the wall time of
/// blocks that refresh gigabytes varies between processes by as much again (on an H100 a forger
/// of level1/19 hid 2.7 of its 4.27 ms). The speedup stays as charged; the label is INCONCLUSIVE.
fn distrust_charged(timing: &mut Timing) {
    if timing.method == CHARGED && timing.label == stats::Decision::Faster {
        timing.label = stats::Decision::Inconclusive;
    }
}

/// Labels of a forward that synchronizes with the host inside: its times hold host submission,
/// whose speed drifts in ways the rounds do not average out, so the speedup's interval is judged
/// allowing for a systematic relative `error` (the intervals themselves are left as measured).
/// Timing sets the whole `HOST_SPEED_ERROR`; once both arms' busy shares are measured,
/// `host_error` narrows it. The torch.compile arm keeps the whole error (its busy share is not
/// measured).
pub fn allow_host_error(timing: &mut Timing, error: f64) {
    timing.host_error = Some(error);
    timing.label = stats::decide_within(
        timing.speedup_ci_low,
        timing.speedup_ci_high,
        timing.delta,
        error,
    );
    if let Some(c) = timing.compile.as_mut() {
        c.label = stats::decide_within(
            c.speedup_ci_low,
            c.speedup_ci_high,
            timing.delta,
            stats::HOST_SPEED_ERROR,
        );
    }
}

/// Widens the speedup's interval for the process effect: the same reference ran `effect.ratio`
/// times as fast in its own worker as in the candidate's, so the speedup owed to the submission
/// lies anywhere from the one measured to the one measured over that ratio. The interval covers
/// both (each end at its bootstrap bound), and the label is decided again, with any host-speed
/// allowance; a label the effect changes says why.
pub fn allow_process_effect(timing: &mut Timing, effect: ProcessEffect) {
    let was = timing.label;
    timing.speedup_ci_low = timing
        .speedup_ci_low
        .min(timing.speedup_ci_low / effect.ci_high);
    timing.speedup_ci_high = timing
        .speedup_ci_high
        .max(timing.speedup_ci_high / effect.ci_low);
    timing.ci_half_width = half_width(timing);
    timing.label = stats::decide_within(
        timing.speedup_ci_low,
        timing.speedup_ci_high,
        timing.delta,
        timing.host_error.unwrap_or(0.0),
    );
    if timing.label != was {
        timing.warnings.push(format!(
            "the reference itself ran {:.3}x as fast in its own worker ({:.4} ms) as in the candidate's ({:.4} ms): cuDNN and cuBLAS choose algorithms per process, so the interval includes that effect, [{:.3}, {:.3}], and the label is {} rather than {}",
            effect.ratio,
            effect.reference_ms,
            effect.control_ms,
            timing.speedup_ci_low,
            timing.speedup_ci_high,
            timing.label.as_str().to_uppercase(),
            was.as_str().to_uppercase(),
        ));
    }
    timing.process = Some(effect);
}

/// The host-speed error of a forward that synchronizes with the host inside, from each arm's
/// busy share (GPU busy time of one profiled call over the arm's median time): only the time the
/// GPU waits for the host depends on the host's speed, so `HOST_SPEED_ERROR` is scaled by the
/// arms' mean idle share (a forward the GPU is busy for 99 % of gets a 0.25 % error).
pub fn host_error(reference_busy: f64, candidate_busy: f64) -> f64 {
    let idle = |busy: f64| (1.0 - busy).clamp(0.0, 1.0);
    stats::HOST_SPEED_ERROR * (idle(reference_busy) + idle(candidate_busy)) / 2.0
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
fn round_order(round: u32, arm_count: usize) -> Vec<usize> {
    let base: &[usize] = if arm_count > COMPILED {
        &[EAGER, COMPILED, CANDIDATE]
    } else {
        &[EAGER, CANDIDATE]
    };
    let start = round as usize % base.len();
    let half: Vec<usize> = base[start..]
        .iter()
        .chain(&base[..start])
        .copied()
        .collect();
    half.iter().chain(half.iter().rev()).copied().collect()
}

/// The candidate against arm B: the same statistics as against the eager reference, over the
/// rounds all three arms shared.
fn compile_baseline(
    compiled: Arm,
    eager: &Arm,
    candidate: &Arm,
    compile_s: f64,
    seed: u64,
    delta: f64,
) -> CompileBaseline {
    let compile_gain = eager.median_ms / compiled.median_ms;
    let vs = summarize(String::new(), compiled, candidate.clone(), seed, delta);
    CompileBaseline {
        reference: vs.reference,
        compile_s,
        speedup: vs.speedup,
        speedup_ci_low: vs.speedup_ci_low,
        speedup_ci_high: vs.speedup_ci_high,
        label: vs.label,
        compile_gain,
    }
}

fn mean_or_zero(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn median_or_zero(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        stats::median(values)
    }
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
/// in evaluate.rs). Here:
/// each arm's median wall time per sample beyond its reported time, and how much more the
/// candidate's may be; what it exceeds that by is charged to its samples (`charged`).
struct Envelope {
    reference_ms: f64,
    candidate_ms: f64,
    limit_ms: f64,
}

impl Envelope {
    fn of(reference: &Taken, candidate: &Taken, device: Device) -> Envelope {
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
                .max(ENVELOPE_HARNESS_SHARE * median_or_zero(&reference.harness_ms)),
        }
    }

    /// The candidate's unexplained wall time per sample beyond the reference's and the limit.
    fn beyond(&self) -> f64 {
        (self.candidate_ms - self.reference_ms - self.limit_ms).max(0.0)
    }

    fn check(&self) -> Check {
        let (c, r, limit) = (self.candidate_ms, self.reference_ms, self.limit_ms);
        let excess = c - r;
        Check {
            name: "timing.wall_envelope".into(),
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
fn audit_check(reference: &Taken, candidate: &Taken) -> Check {
    let name = "timing.audit".to_string();
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

/// Clock parity: the median NVML SM clock of each arm; when they differ by more than 2 %, the
/// speedup in cycles (time x clock) too, and a warning.
fn clock_parity(timing: &mut Timing, reference: &[f64], candidate: &[f64]) {
    if reference.is_empty() || candidate.is_empty() {
        return;
    }
    let (r, c) = (stats::median(reference), stats::median(candidate));
    timing.reference_sm_mhz = Some(r);
    timing.candidate_sm_mhz = Some(c);
    if r > 0.0 && c > 0.0 && (r / c - 1.0).abs() > CLOCK_PARITY {
        let cycles = timing.speedup * r / c;
        timing.cycle_speedup = Some(cycles);
        timing.warnings.push(format!(
            "clock-confounded: SM clock {r:.0} MHz (reference) vs {c:.0} MHz (candidate); speedup in cycles {cycles:.3}"
        ));
    }
}

/// The samples of a timing reply: finite, non-negative milliseconds, or the worker is broken.
pub fn samples_of(reply: &Timed) -> Result<Vec<f64>, Failed> {
    times_of(&reply.samples_ms, "samples_ms")
}

/// The audit calls' excesses: finite, of either sign (two clocks, microseconds apart).
fn excess_of(reply: &Timed) -> Result<Vec<f64>, Failed> {
    numbers_of(
        &reply.audit_excess_ms,
        "audit_excess_ms",
        |s| s.is_finite(),
        "a non-finite audit excess",
    )
}

fn times_of(values: &Option<Vec<f64>>, key: &str) -> Result<Vec<f64>, Failed> {
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
) -> Result<Vec<f64>, Failed> {
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

fn method(cfg: &Config) -> String {
    match (cfg.mode, cfg.device) {
        (Mode::Offline, Device::Cuda) => "cuda_events_flush_blocker".into(),
        (Mode::KernelBench, Device::Cuda) => "kernelbench_events_write_flush".into(),
        (Mode::Offline, Device::Cpu) => "cpu_perf_counter".into(),
        (Mode::KernelBench, Device::Cpu) => "kernelbench_cpu_perf_counter".into(),
        (Mode::Server, _) => "server_request_latency".into(),
    }
}

fn half_width(timing: &Timing) -> f64 {
    if timing.speedup > 0.0 && timing.speedup_ci_high.is_finite() {
        (timing.speedup_ci_high - timing.speedup_ci_low) / (2.0 * timing.speedup)
    } else {
        f64::INFINITY
    }
}

/// The rank statistics of two arms (Hodges-Lehmann speedup, the one-sided Mann-Whitney p of
/// "faster"), each arm's outlier counts, and the samples' warnings.
fn rank_statistics(
    reference: &mut Arm,
    candidate: &mut Arm,
    warnings: &mut Vec<String>,
) -> (Option<stats::Speedup>, Option<f64>) {
    let arms = stats::Samples::new(reference.samples_ms.clone())
        .and_then(|r| Ok((r, stats::Samples::new(candidate.samples_ms.clone())?)));
    match &arms {
        Ok((r, c)) => {
            reference.outliers = stats::OutlierCounts::from_labels(&stats::tukey_labels(r));
            candidate.outliers = stats::OutlierCounts::from_labels(&stats::tukey_labels(c));
            for (name, arm) in [("reference", r), ("candidate", c)] {
                let text = |w| {
                    serde_json::to_value(w)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                };
                warnings.extend(
                    stats::sample_warnings(arm)
                        .into_iter()
                        .filter_map(text)
                        .map(|w| format!("{name}: {w}")),
                );
            }
            (
                Some(stats::hodges_lehmann(r, c, CI_LEVEL)),
                Some(stats::mann_whitney(r, c).p_faster),
            )
        }
        Err(e) => {
            warnings.push(format!("samples not usable for rank statistics: {e}"));
            (None, None)
        }
    }
}

/// The statistics of one comparison: paired bootstrap over rounds for the speedup and its
/// interval, Hodges-Lehmann and Mann-Whitney as cross-checks, the decision label. Samples the
/// checked types reject (e.g. a 0 ms event time) fall back to an unpaired bootstrap with no
/// cross-checks and an INCONCLUSIVE label.
pub fn summarize(
    method: String,
    mut reference: Arm,
    mut candidate: Arm,
    seed: u64,
    delta: f64,
) -> Timing {
    let paired = stats::Rounds::from_tagged(
        &reference.samples_ms,
        &reference.rounds,
        &candidate.samples_ms,
        &candidate.rounds,
    )
    .map(|rounds| stats::paired_speedup(&rounds, BOOTSTRAP_RESAMPLES, CI_LEVEL, seed).speedup);
    let (s, label) = match &paired {
        Ok(s) => (*s, s.decision(delta)),
        Err(_) => {
            let s = stats::speedup(
                &reference.samples_ms,
                &candidate.samples_ms,
                BOOTSTRAP_RESAMPLES,
                CI_LEVEL,
                seed,
            );
            (s, stats::Decision::Inconclusive)
        }
    };
    let mut warnings = Vec::new();
    let (hodges_lehmann, p_faster) = rank_statistics(&mut reference, &mut candidate, &mut warnings);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut timing = Timing {
        method,
        mean_ratio: mean(&reference.samples_ms) / mean(&candidate.samples_ms),
        reference,
        candidate,
        speedup: s.ratio,
        speedup_ci_low: s.ci_low,
        speedup_ci_high: s.ci_high,
        ci_level: CI_LEVEL,
        label,
        delta,
        hodges_lehmann,
        p_faster,
        warnings,
        rounds_discarded: 0,
        telemetry: Vec::new(),
        stopped: String::new(),
        ci_half_width: 0.0,
        blocker_us: 0.0,
        blocker_overflows: 0,
        reference_sm_mhz: None,
        candidate_sm_mhz: None,
        cycle_speedup: None,
        audit: None,
        server: None,
        burst: None,
        host_error: None,
        cpu: None,
        compile: None,
        process: None,
        sol_ms: None,
        percent_sol: None,
        reference_percent_sol: None,
        invalid: false,
    };
    timing.ci_half_width = half_width(&timing);
    timing
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // call (1.07 ms) would charge it; a fifth of the refresh (2.2 ms) does not.
        let reference = taken(&[4.27; 20], &[11.0, 11.0], &[]);
        let honest = taken(&[4.27; 20], &[12.3, 12.4], &[]);
        let envelope = Envelope::of(&reference, &honest, Device::Cuda);
        assert_eq!(envelope.check().outcome, Outcome::Pass);
        assert!(
            (envelope.limit_ms - 2.2).abs() < 1e-9,
            "{}",
            envelope.limit_ms
        );
        // Times divided by 20 leave 4 ms more unexplained: all beyond the allowance is charged,
        // so such a forger keeps the allowance (here 2.2 of 4.27 ms) and no more.
        let forged = taken(&[0.2135; 20], &[15.0, 15.0], &[]);
        let envelope = Envelope::of(&reference, &forged, Device::Cuda);
        assert!(
            (envelope.beyond() - 1.8).abs() < 1e-9,
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
                reading: None,
            };
            rounds.keep(round, 0.5);
        }
        let (a, c) = (&rounds.arms[EAGER], &rounds.arms[CANDIDATE]);
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
                reading: None,
            };
            rounds.keep(round, blocker);
        }
        let envelope = Envelope::of(&rounds.arms[EAGER], &rounds.arms[CANDIDATE], Device::Cuda);
        assert!(
            (envelope.limit_ms - 0.2 * refresh).abs() < 1e-9,
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

    #[test]
    fn calls_under_ten_microseconds_are_timed_in_bursts() {
        assert_eq!(burst_size(0.056), 1);
        assert_eq!(burst_size(0.010), 1);
        assert_eq!(burst_size(0.008), 3);
        assert_eq!(burst_size(0.002), 10);
        assert_eq!(burst_size(0.0001), BURST_MAX);
        assert_eq!(burst_size(0.0), 1);
        assert_eq!(burst_size(f64::INFINITY), 1);
    }

    #[test]
    fn rounds_are_palindromes_with_a_rotated_start() {
        assert_eq!(round_order(0, 2), [0, 1, 1, 0]);
        assert_eq!(round_order(1, 2), [1, 0, 0, 1]);
        let three: Vec<Vec<usize>> = (0..3).map(|r| round_order(r, 3)).collect();
        assert_eq!(
            three[0],
            [EAGER, COMPILED, CANDIDATE, CANDIDATE, COMPILED, EAGER]
        );
        assert_eq!(
            three[1],
            [COMPILED, CANDIDATE, EAGER, EAGER, CANDIDATE, COMPILED]
        );
        assert_eq!(round_order(3, 3), three[0]);
        // Over a cycle of starts every arm holds every position once.
        for position in 0..6 {
            let mut arms: Vec<usize> = three.iter().map(|o| o[position]).collect();
            arms.sort();
            assert_eq!(arms, [0, 1, 2]);
        }
    }

    #[test]
    fn clock_parity_reports_cycles_only_when_clocks_differ() {
        let arm = |ms: f64| Arm {
            samples_ms: vec![ms; 4],
            rounds: vec![0, 0, 1, 1],
            median_ms: ms,
            ..Arm::default()
        };
        let mut t = summarize("test".into(), arm(2.0), arm(1.0), 1, 0.03);
        clock_parity(&mut t, &[1980.0, 1980.0], &[1975.0]);
        assert_eq!(t.cycle_speedup, None);
        clock_parity(&mut t, &[1980.0], &[1500.0]);
        let cycles = t.cycle_speedup.unwrap();
        assert!((cycles - 2.0 * 1980.0 / 1500.0).abs() < 1e-9);
        assert!(t.warnings.iter().any(|w| w.starts_with("clock-confounded")));
    }

    fn arm(samples_ms: Vec<f64>) -> Arm {
        let rounds = (0..samples_ms.len() as u32).map(|i| i / 4).collect();
        Arm {
            median_ms: stats::median(&samples_ms),
            samples_ms,
            rounds,
            ..Arm::default()
        }
    }

    #[test]
    fn each_arm_carries_its_tukey_outlier_counts() {
        let reference: Vec<f64> = (0..40).map(|i| 2.0 + f64::from(i % 5) * 0.002).collect();
        let mut candidate: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 3) * 0.001).collect();
        candidate[7] = 3.0; // a stall: labelled, never dropped
        let t = summarize("test".into(), arm(reference), arm(candidate), 1, 0.03);
        assert_eq!(t.reference.outliers.severe(), 0);
        assert_eq!(t.candidate.outliers.high_severe, 1);
        assert_eq!(t.candidate.samples_ms.len(), 40);
    }

    #[test]
    fn a_twice_as_fast_candidate_is_labeled_faster() {
        let reference: Vec<f64> = (0..40).map(|i| 2.0 + f64::from(i % 5) * 0.002).collect();
        let candidate: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 3) * 0.001).collect();
        let t = summarize(
            "test".into(),
            arm(reference),
            arm(candidate),
            1,
            stats::DELTA_DEDICATED,
        );
        assert!((t.speedup - 2.004 / 1.001).abs() < 1e-9, "{t:?}");
        assert_eq!(t.label, stats::Decision::Faster);
        let hl = t.hodges_lehmann.unwrap();
        assert!((hl.ratio - 2.0).abs() < 0.02, "{hl:?}");
        assert!(t.p_faster.unwrap() < 1e-6);
        // The same samples on both arms are SAME, never FASTER or SLOWER.
        let same: Vec<f64> = (0..40).map(|i| 1.0 + f64::from(i % 7) * 0.0005).collect();
        let t = summarize(
            "test".into(),
            arm(same.clone()),
            arm(same),
            1,
            stats::DELTA_DEDICATED,
        );
        assert_eq!(t.label, stats::Decision::Same, "{t:?}");
    }

    /// The timing of a candidate `speedup` times as fast as `reference`, sample for sample.
    fn scaled(reference: &[f64], speedup: f64) -> Timing {
        let candidate = reference.iter().map(|r| r / speedup).collect();
        summarize(
            "test".into(),
            arm(reference.to_vec()),
            arm(candidate),
            1,
            stats::DELTA_SHARED,
        )
    }

    #[test]
    fn host_synchronizing_forwards_are_labeled_allowing_for_the_host_speed_error() {
        // An identity of a host-synchronizing network read 1.24 with a tight interval: FASTER
        // without the allowance, INCONCLUSIVE with it (never SAME: the error exceeds the band);
        // 1.5x and 0.6x still clear it.
        let reference: Vec<f64> = (0..40).map(|i| 17.0 + f64::from(i % 5) * 0.1).collect();
        let label = |speedup: f64, error: Option<f64>| {
            let mut t = scaled(&reference, speedup);
            if let Some(error) = error {
                allow_host_error(&mut t, error);
            }
            t.label
        };
        let whole = Some(stats::HOST_SPEED_ERROR);
        assert_eq!(label(1.24, None), stats::Decision::Faster);
        assert_eq!(label(1.24, whole), stats::Decision::Inconclusive);
        assert_eq!(label(1.0, None), stats::Decision::Same);
        assert_eq!(label(1.0, whole), stats::Decision::Inconclusive);
        assert_eq!(label(1.5, whole), stats::Decision::Faster);
        assert_eq!(label(0.6, whole), stats::Decision::Slower);
        // A convolution that synchronizes early but keeps the GPU busy 99 % of the time: its
        // error is a quarter of a percent, and an identity is SAME again.
        let device_bound = host_error(0.99, 0.99);
        assert!((device_bound - 0.0025).abs() < 1e-12);
        assert_eq!(label(1.0, Some(device_bound)), stats::Decision::Same);
        // Fully host-bound arms keep the whole error; busy shares over 1 (concurrent work
        // measured against a median) count as no idle time.
        assert_eq!(host_error(0.0, 0.0), stats::HOST_SPEED_ERROR);
        assert_eq!(host_error(1.3, 0.0), stats::HOST_SPEED_ERROR / 2.0);
    }

    #[test]
    fn the_process_effect_widens_the_interval_to_the_corrected_speedup() {
        // level1/71's identity read 0.952 [0.949, 0.958] in one process pair: the reference
        // itself ran as much slower in the candidate's process, so the corrected speedup is ~1
        // and the label is INCONCLUSIVE, not SLOWER. A 1.2x candidate in processes that run the
        // reference alike stays FASTER; a 1.3x one whose process runs the reference 5 % faster
        // (only part of its speedup is its own) is still FASTER, with the wider interval.
        let effect = |ratio: f64, half: f64| ProcessEffect {
            ratio,
            ci_low: ratio * (1.0 - half),
            ci_high: ratio * (1.0 + half),
            reference_ms: 1.0,
            control_ms: 1.0 / ratio,
            rounds: PROCESS_ROUNDS,
            measured_ci_low: 0.0,
            measured_ci_high: 0.0,
        };
        let judged = |speedup: f64, process: ProcessEffect| {
            let reference: Vec<f64> = (0..40).map(|i| 3.0 + f64::from(i % 5) * 0.001).collect();
            let mut t = scaled(&reference, speedup);
            let before = (t.label, t.speedup_ci_low, t.speedup_ci_high);
            allow_process_effect(&mut t, process);
            (before, t)
        };
        let ((was, low, high), t) = judged(0.952, effect(0.952, 0.002));
        assert_eq!(was, stats::Decision::Slower);
        assert_eq!(t.label, stats::Decision::Inconclusive);
        assert!(t.speedup_ci_low <= low && t.speedup_ci_high > 0.99 && t.speedup_ci_high > high);
        assert!(t
            .warnings
            .iter()
            .any(|w| w.contains("per process") && w.contains("INCONCLUSIVE rather than SLOWER")));
        let ((was, ..), t) = judged(1.2, effect(1.0, 0.003));
        assert_eq!(
            (was, t.label),
            (stats::Decision::Faster, stats::Decision::Faster)
        );
        assert!(t.warnings.iter().all(|w| !w.contains("per process")));
        let ((_, low, high), t) = judged(1.3, effect(1.05, 0.003));
        assert_eq!(t.label, stats::Decision::Faster);
        assert!(t.speedup_ci_low < 0.97 * low && t.speedup_ci_high == high);
        assert_eq!(t.process.as_ref().map(|p| p.ratio), Some(1.05));
        // The label is decided again with the host-speed allowance: 1.2x is within it.
        let (_, mut t) = judged(1.2, effect(1.0, 0.001));
        t.host_error = Some(stats::HOST_SPEED_ERROR);
        allow_process_effect(&mut t, effect(1.0, 0.001));
        assert_eq!(t.label, stats::Decision::Inconclusive);
    }

    #[test]
    fn unusable_samples_give_an_inconclusive_label() {
        let t = summarize(
            "test".into(),
            arm(vec![1.0; 8]),
            arm(vec![0.0; 8]),
            1,
            stats::DELTA_DEDICATED,
        );
        assert_eq!(t.label, stats::Decision::Inconclusive);
        assert!(t.hodges_lehmann.is_none() && t.p_faster.is_none());
        assert_eq!(t.warnings.len(), 1);
    }
}
