//! `--profile ncu`: why a kernel is fast or slow. Where an evaluation passed or was timed, the
//! candidate's forward runs once more under Nsight Compute (`nsight`) in a fresh candidate
//! worker the tool starts (`Alone::under_tool`), confined as any candidate and loaded as its
//! trials were (the task's size), and the reference's forward in a fresh reference worker the
//! same way (trusted: not confined), each call bracketed by cudaProfilerStart and
//! cudaProfilerStop so that only its kernels are profiled, outside every timed round and after
//! them. The tool reads counters only (`--clock-control none`: the clocks stay as the run found
//! them).
//!
//! Each kernel's figures (duration, achieved occupancy, SM and DRAM throughput as a share of
//! peak, FLOPs and DRAM bytes) are kept in `Evaluation::ncu`, the candidate's own kernels marked
//! as its profiled call named them (`reference_ops::Launches::own`). Nothing here decides a
//! verdict or touches a timing: the check `profile.ncu` says what was profiled, or why not
//! (`skip`: the tool failed, or the call did).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::cuda_tools;
use crate::nsight::{self, Kernel, NcuProfile};
use crate::record::{Check, Outcome};
use crate::sanitizer::base_name;
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::{Cause, Verdict};
use crate::worker::request::ProfilerCall;
use crate::worker::{CheckName, Spawn, Stream};

use super::alone::{self, Alone, EXIT_GRACE, LOG_CAP};
use super::backend::Phase;
use super::gathered::Gathered;
use super::load;
use super::spawn::Spawner;
use super::stage::{ask, log_path};

/// The log's name in the exchange folder (the candidate's) or the run's logs (the reference's).
const LOG: &str = "ncu.csv";
/// How much longer than `--timeout-call` the profiled call may take: the tool replays each
/// kernel once per pass its metrics need, with set-up of its own per launch (at most
/// `nsight::MAX_LAUNCHES`), and the call runs twice.
const SLOWDOWN: u32 = 10;

/// What the profiler's runs take: what the stages alone take, and the tool.
pub(super) struct NcuRuns<'w, S: Spawner> {
    pub on: Alone<'w, S>,
    pub tool: &'w Path,
}

/// What one arm's run under the tool left: its kernels, or why there are none.
type Ran = Result<Vec<Kernel>, String>;

impl<S: Spawner> NcuRuns<'_, S> {
    /// Where the evaluation passed or was timed, both arms' kernels under the tool into
    /// `eval.ncu`, and the check `profile.ncu`. Decides nothing.
    pub(super) fn profile(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        eval: &mut Gathered,
        cause: &Cause,
        enter: &dyn Fn(Phase),
    ) {
        if eval.timing.is_none() && cause.decide().0 != Verdict::Pass {
            return;
        }
        enter(Phase::KernelProfiler);
        let started = Instant::now();
        let gate = Arc::clone(&self.on.gate.lock().expect("gate lock"));
        let (candidate, reference) = {
            let _hold = gate.enter(self.on.alone);
            let candidate = self.candidate((task, sub), slot, eval);
            (candidate, self.reference(task, sub, slot, eval))
        };
        let seconds = started.elapsed().as_secs_f64();
        eval.phases.after_timing_s += seconds;
        let own = own_kernels(eval);
        let (check, profiled) = judged((candidate, reference), &own, seconds);
        eval.checks.push(check);
        eval.ncu = profiled;
    }

    /// The candidate's call under the tool, in a fresh confined candidate worker it starts.
    fn candidate(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        eval: &mut Gathered,
    ) -> Ran {
        let how = alone::Tool {
            role: "ncu-candidate",
            log: LOG,
            wrap: &|log, spec| under(self.tool, log, spec),
            size: load::Alone::Sized,
        };
        let left = self
            .on
            .under_tool((task, sub), slot, how, |worker, _| self.call(worker));
        let Some((kept, rel)) = left.kept else {
            return Err(left.ended.map_or_else(String::new, |c| c.reason()));
        };
        eval.logs.push(rel);
        // The tool's log kept beside the worker's, for the record (what it measured, or said).
        if let Ok(bytes) = &left.log {
            if std::fs::write(kept.with_extension("csv"), bytes).is_ok() {
                eval.logs.push(csv_name(&kept, &self.on.workers.config.out));
            }
        }
        kernels(left.ended.map_or(Ok(()), |c| Err(c.reason())), left.log)
    }

    /// The reference's call under the tool, in a fresh reference worker it starts (trusted: run
    /// as kbench runs, its log in the run's logs).
    fn reference(&self, task: &Task, sub: &Submission, slot: usize, eval: &mut Gathered) -> Ran {
        let workers = self.on.workers;
        let (kept, rel) = log_path(&workers.config.out, sub, "ncu-reference");
        let csv = kept.with_extension("csv");
        let spec = workers.reference_spec(slot, &kept);
        let mut worker = workers.launcher.start(&under(self.tool, &csv, spec))?;
        eval.logs.push(rel);
        let called = workers
            .load_reference(task, &mut worker)
            .and_then(|()| self.call(&mut worker))
            .map_err(|c| c.reason());
        S::finish_within(worker, EXIT_GRACE);
        if csv.is_file() {
            eval.logs.push(csv_name(&kept, &workers.config.out));
        }
        let log = std::fs::File::open(&csv).and_then(|f| {
            let mut bytes = Vec::new();
            f.take(LOG_CAP).read_to_end(&mut bytes).map(|_| bytes)
        });
        kernels(called, log)
    }

    /// The profiled call on the profiled call's seeds (`Stream::Profile`), as both roles answer it.
    fn call(&self, worker: &mut S::Worker) -> Result<(), Cause> {
        let cfg = self.on.workers.config;
        let seed = |forward| Stream::Profile { forward }.seed(cfg.seed);
        let call = ProfilerCall {
            seed: seed(false),
            forward_seed: seed(true),
        };
        ask(worker, call, cfg.timeouts.call * SLOWDOWN).map(drop)
    }
}

/// The name the record gives the tool's CSV log beside the worker's log `kept` (under `out`).
fn csv_name(kept: &Path, out: &Path) -> String {
    let csv = kept.with_extension("csv");
    csv.strip_prefix(out).unwrap_or(&csv).display().to_string()
}

/// The worker's command line run by the tool, its CSV log at `log` (as the worker sees it).
fn under(tool: &Path, log: &Path, spec: Spawn) -> Spawn {
    cuda_tools::run_under(tool, nsight::args(log), spec)
}

/// The kernels of a run's log where its call finished; else why not (the log's first line of
/// the tool's own, `==ERROR==`, where it wrote one).
fn kernels(called: Result<(), String>, log: std::io::Result<Vec<u8>>) -> Ran {
    let text = log.map(|b| String::from_utf8_lossy(&b).into_owned());
    let tool_error = text.as_ref().ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("==ERROR=="))
            .map(str::to_string)
    });
    match (called, text) {
        (Err(why), _) => Err(tool_error.map_or(why.clone(), |e| format!("{why} ({e})"))),
        (Ok(()), Err(e)) => Err(format!("its log could not be read: {e}")),
        (Ok(()), Ok(text)) => match nsight::parse(&text) {
            found if found.is_empty() => {
                Err(tool_error.unwrap_or_else(|| "the tool profiled no kernel of the call".into()))
            }
            found => Ok(found),
        },
    }
}

/// The submission's own kernels, as its profiled call named them.
fn own_kernels(eval: &Gathered) -> Vec<String> {
    let launches = eval.profile.iter().flat_map(|p| &p.candidate);
    launches
        .filter(|l| l.own)
        .map(|l| base_name(&l.name))
        .collect()
}

/// The check `profile.ncu`, and what was profiled: both arms' kernels where the candidate's
/// were (the reference's may be missing: its failure is said).
fn judged(
    (candidate, reference): (Ran, Ran),
    own: &[String],
    seconds: f64,
) -> (Check, Option<NcuProfile>) {
    let (outcome, evidence, profiled) = match candidate {
        Ok(mut kernels) => {
            for k in &mut kernels {
                k.own = own.contains(&base_name(&k.name));
            }
            let mine = kernels.iter().filter(|k| k.own).count();
            let (theirs, said) = match reference {
                Ok(theirs) => {
                    let said = theirs.len().to_string();
                    (theirs, said)
                }
                Err(why) => (Vec::new(), format!("not profiled ({why})")),
            };
            let capped = [&kernels, &theirs]
                .iter()
                .any(|k| k.len() >= nsight::MAX_LAUNCHES);
            let cap = if capped {
                format!(
                    " (the first {} launches of a call only)",
                    nsight::MAX_LAUNCHES
                )
            } else {
                String::new()
            };
            let evidence = format!(
                "{} kernel launch(es) profiled, {mine} of the submission's own; the reference's: {said}{cap}",
                kernels.len()
            );
            let profiled = NcuProfile {
                candidate: kernels,
                reference: theirs,
            };
            (Outcome::Pass, evidence, Some(profiled))
        }
        Err(why) => (Outcome::Skip, format!("not profiled: {why}"), None),
    };
    let check = Check {
        name: CheckName::ProfileNcu,
        outcome,
        evidence,
        seconds,
        runs: 1,
    };
    (check, profiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str) -> Kernel {
        Kernel {
            name: name.into(),
            duration_ns: Some(1000.0),
            ..Kernel::default()
        }
    }

    #[test]
    fn the_candidate_s_own_kernels_are_marked_and_failures_said() {
        let own = ["relu_kernel".to_string()];
        let launches = || {
            Ok(vec![
                kernel("relu_kernel(const float *, float *, long)"),
                kernel("void at::native::vectorized_elementwise_kernel<4>(int)"),
            ])
        };
        let (check, profiled) = judged((launches(), launches()), &own, 1.0);
        assert_eq!(check.outcome, Outcome::Pass, "{}", check.evidence);
        let profiled = profiled.unwrap();
        let marks: Vec<bool> = profiled.candidate.iter().map(|k| k.own).collect();
        assert_eq!(marks, [true, false]);
        assert!(
            profiled.reference.iter().all(|k| !k.own),
            "the reference has none of its own"
        );
        // (the arms' runs, the outcome, what the evidence says)
        let cases: [(Ran, Ran, Outcome, &str); 3] = [
            (
                launches(),
                Err("ERR_NVGPUCTRPERM".into()),
                Outcome::Pass,
                "the reference's: not profiled (ERR_NVGPUCTRPERM)",
            ),
            (
                Err("the call raised".into()),
                launches(),
                Outcome::Skip,
                "not profiled: the call raised",
            ),
            (
                Err("no kernel".into()),
                Err("no kernel".into()),
                Outcome::Skip,
                "not profiled",
            ),
        ];
        for (candidate, reference, outcome, says) in cases {
            let (check, profiled) = judged((candidate, reference), &own, 1.0);
            assert_eq!(check.outcome, outcome);
            assert_eq!(profiled.is_some(), outcome == Outcome::Pass);
            assert!(check.evidence.contains(says), "{}", check.evidence);
        }
    }

    #[test]
    fn a_log_becomes_kernels_only_where_the_call_finished() {
        let log = |s: &str| Ok(s.as_bytes().to_vec());
        let error = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\n";
        let raised = || Err("the call raised".to_string());
        assert_eq!(
            kernels(raised(), log(error)).unwrap_err(),
            "the call raised (==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters)"
        );
        assert!(kernels(Ok(()), log(error))
            .unwrap_err()
            .contains("ERR_NVGPUCTRPERM"));
        assert_eq!(
            kernels(Ok(()), log("")).unwrap_err(),
            "the tool profiled no kernel of the call"
        );
    }

    #[test]
    fn the_worker_runs_under_the_tool() {
        let spec = cuda_tools::testing::candidate();
        let wrapped = under(
            Path::new("/cuda/bin/ncu"),
            Path::new("/dev/shm/ncu.csv"),
            spec,
        );
        assert_eq!(wrapped.python, "/cuda/bin/ncu");
        assert_eq!(
            cuda_tools::testing::worker_tail(&wrapped),
            ["python3", "-m", "kbench_worker", "candidate"]
        );
        assert!(wrapped
            .args
            .windows(2)
            .any(|w| w == ["--clock-control", "none"]));
    }
}
