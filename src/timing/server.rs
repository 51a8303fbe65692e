//! `--mode server`: isolated requests after seeded idle gaps, the ratio of median request
//! latencies, per-arm latency quantiles and the p99 ratio. It schedules the requests and reads
//! their replies; the statistics are `summary`'s.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::arms::{arm_of, ArmId, Taken};
use super::replies::{samples_of, times_of};
use super::session::{Failed, Session, WARMUP_ALLOWANCE};
use super::summary::{median_or_zero, method, summarize, BOOTSTRAP_RESAMPLES, CI_LEVEL};
use crate::record::{Latency, Server, Timing};
use crate::stats;
use crate::worker::request::{Time, TimingMode};
use crate::worker::Link;

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

/// `--mode server`'s requests per arm (`ArmId::index` of A and C): latencies (as samples),
/// device times and SM clocks.
#[derive(Default)]
struct Served {
    arms: [Taken; 2],
    device: [Vec<f64>; 2],
    clocks: [Vec<f64>; 2],
}

impl<L: Link> Session<'_, L> {
    /// The server scenario (docs/design/timing.md): each arm gets blocks of requests, each after an
    /// exponential idle gap from a seeded generator shared by both arms, in a seeded random
    /// order per round, until each has `SERVER_REQUESTS` and `SERVER_MIN` has passed (or it
    /// has `--max-samples`), at most `SERVER_CAP` or `--budget` when longer. The speedup is the
    /// ratio of median request latencies with the paired bootstrap over rounds; the record adds
    /// p50/p90/p99 per arm, the SM clock read before each request, and the p99 ratio.
    pub(super) fn server(&mut self) -> Result<Timing, Failed> {
        let cfg = self.config;
        let setup = self.setup(TimingMode::Server);
        let deadline = cfg.timeouts.call + WARMUP_ALLOWANCE;
        let warm = [
            self.warm(ArmId::Eager, setup.clone(), deadline)?,
            self.warm(ArmId::Candidate, setup, deadline)?,
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
            let order = if rng.gen_bool(0.5) {
                [ArmId::Eager, ArmId::Candidate]
            } else {
                [ArmId::Candidate, ArmId::Eager]
            };
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
                served.device[arm.index()].extend(samples_of(&reply)?);
                // null where NVML could not be read from the worker.
                served.clocks[arm.index()].extend(reply.sm_mhz.iter().flatten());
                let taken = &mut served.arms[arm.index()];
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
            arm_of(&arms[ArmId::Eager.index()]),
            arm_of(&arms[ArmId::Candidate.index()]),
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
            for (arm, name) in [(ArmId::Eager, "reference"), (ArmId::Candidate, "candidate")] {
                let mhz = median_or_zero(&clocks[arm.index()]);
                if mhz > 0.0 && mhz < SERVER_CLOCK_SHARE * f64::from(max) {
                    timing.warnings.push(format!(
                        "{name} requests started on a down-clocked GPU: median SM clock {mhz:.0} of {max} MHz"
                    ));
                }
            }
        }
        let [a, c] = &arms;
        let (eager, candidate) = (ArmId::Eager.index(), ArmId::Candidate.index());
        timing.server = Some(Server {
            mean_gap_ms,
            reference: latency(&a.samples, &device[eager], &clocks[eager]),
            candidate: latency(&c.samples, &device[candidate], &clocks[candidate]),
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
