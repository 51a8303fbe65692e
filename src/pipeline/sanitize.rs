//! `--sanitize`: memory errors the value checks cannot see. Where an evaluation is correct so
//! far (pass, no_kernel, contract), the candidate's kernels run once more on one trial (trial
//! 0's seeds, at the task's small size: the tools slow a kernel down a hundredfold and more;
//! where the trial raised there, again at the run's size) under each of compute-sanitizer's
//! tools side by side (`sanitizer::Tool::ALL`), each in a fresh candidate worker the tool
//! starts with a copy of the build (`Alone::under_tool`), confined as any candidate (the tool
//! runs inside the sandbox and writes its log to the worker's exchange folder), with PyTorch's
//! caching allocator off (`PYTORCH_NO_CUDA_MEMORY_CACHING`: each tensor its own allocation, so
//! an access past one is outside every allocation, where memcheck sees it). The reference never
//! runs under it.
//!
//! A report in a kernel of the submission's own (named as the profiled call named them,
//! `reference_ops::Launches::own`) makes the evaluation `incorrect`: the check of that tool
//! (`sanitizer.memcheck`, ...) fails with the tool's first report (what, kernel, thread and
//! block, address). The libraries' reports are kept apart in the evidence, as are racecheck's
//! warnings (hazards the programming model allows). A tool that cannot finish (its worker
//! raised, or ran past its deadline) says so and decides nothing. Limits: a submission that
//! knows it runs under the tool (its environment says so) can behave otherwise there, as under
//! any dynamic tool, and can write into the log it shares a folder with; `docs/checks.md`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::cuda_tools;
use crate::record::{Check, Outcome};
use crate::sanitizer::{self, Judged, Report, Tool};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::{Cause, Verdict};
use crate::worker::request::Trial;
use crate::worker::{Spawn, Stream};

use super::alone::{self, Alone};
use super::backend::Phase;
use super::gathered::Gathered;
use super::load;
use super::spawn::Spawner;
use super::stage::ask;

/// The log's name in the exchange folder.
const LOG: &str = "sanitizer.log";
/// How much longer than `--timeout-call` the trial's call may take under a tool (at the small
/// size, where a hundredfold slowdown still fits; at the run's size it may not).
const SLOWDOWN: u32 = 5;

/// What the sanitizer's runs take: what the stages alone take, and the tool.
pub(super) struct Sanitize<'w, S: Spawner> {
    pub on: Alone<'w, S>,
    pub tool: &'w Path,
}

impl<S: Spawner> Sanitize<'_, S> {
    /// `cause`, or, where it is correct so far and a tool reports an error in a kernel of the
    /// submission's own, that error (`incorrect`, under the check of the first such tool in
    /// `Tool::ALL`'s order); every tool's check joins the evaluation's.
    pub(super) fn sanitize(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        eval: &mut Gathered,
        cause: Cause,
        enter: &dyn Fn(Phase),
    ) -> Cause {
        let (verdict, _) = cause.decide();
        if !matches!(
            verdict,
            Verdict::Pass | Verdict::NoKernel | Verdict::Contract
        ) {
            return cause;
        }
        enter(Phase::Sanitizer);
        let own = own_kernels(eval);
        let started = Instant::now();
        let runs = {
            let gate = Arc::clone(&self.on.gate.lock().expect("gate lock"));
            let _hold = gate.enter(self.on.alone);
            // The tools side by side, each in a worker of its own with a copy of the build.
            std::thread::scope(|scope| {
                let running = Tool::ALL.map(|tool| {
                    scope.spawn(move || {
                        let started = Instant::now();
                        let (ran, log) = self.run(tool, (task, sub), slot);
                        (tool, ran, log, started.elapsed().as_secs_f64())
                    })
                });
                running.map(|run| run.join().expect("a sanitizer run panicked"))
            })
        };
        eval.phases.after_timing_s += started.elapsed().as_secs_f64();
        let mut ran = Vec::new();
        for (tool, run, log, seconds) in runs {
            eval.logs.extend(log);
            ran.push((tool, run, seconds));
        }
        let (checks, cause) = concluded(ran, &own, cause);
        eval.checks.extend(checks);
        cause
    }

    /// One trial under `tool` in a fresh candidate worker it starts, at the task's small size:
    /// the tool's log, or what ended the trial first (with the log as far as it got); and the
    /// worker's logs' names in the record, once it has them. Where the trial raised at the small
    /// size (a kernel made for the task's size may refuse others), it runs again at the run's
    /// size in another worker, the tool's two logs read as one (an error seen in either counts).
    fn run(
        &self,
        tool: Tool,
        (task, sub): (&Task, &Submission),
        slot: usize,
    ) -> (Ran, Vec<String>) {
        let role = format!("sanitizer-{}", tool.name());
        let (small, small_log) = self.once(tool, (task, sub), slot, (&role, load::Alone::Small));
        let refused = match &small.ended {
            Some(raised @ Cause::Raised(_)) if self.on.workers.small_is_another(task) => {
                raised.reason()
            }
            _ => return (small, small_log.into_iter().collect()),
        };
        let role = format!("{role}-sized");
        let (sized, sized_log) = self.once(tool, (task, sub), slot, (&role, load::Alone::Sized));
        let logs = small_log.into_iter().chain(sized_log).collect();
        (small.then(sized, refused), logs)
    }

    /// One trial under `tool`, its worker's log under `role`, loaded at `size`.
    fn once(
        &self,
        tool: Tool,
        (task, sub): (&Task, &Submission),
        slot: usize,
        (role, size): (&str, load::Alone),
    ) -> (Ran, Option<String>) {
        let how = alone::Tool {
            role,
            log: LOG,
            wrap: &|log, spec| under(self.tool, tool, log, spec),
            size,
        };
        let left = self.on.under_tool((task, sub), slot, how, |worker, seen| {
            self.trial(worker, seen)
        });
        let ran = Ran {
            log: left
                .log
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
            ended: left.ended,
            refused: None,
        };
        (ran, left.kept.map(|(_, rel)| rel))
    }

    /// Trial 0's seeds through the candidate once, at the size it loaded at, its outputs kept in
    /// its worker (transport `none`: nothing compares them, the tool watches the call).
    fn trial(&self, worker: &mut S::Worker, seen: &Path) -> Result<(), Cause> {
        let cfg = self.on.workers.config;
        let seed = |forward| Stream::Trial { index: 0, forward }.seed(cfg.seed);
        let trial = Trial {
            seed: seed(false),
            forward_seed: seed(true),
            variant: None,
            deep: false,
            out: seen.join("sanitized-trial.pt"),
            transport: "none".into(),
        };
        ask(worker, trial, cfg.timeouts.call * SLOWDOWN).map(drop)
    }
}

/// The candidate worker's command line run by `tool` (`sanitizer` the executable), its log at
/// `log` (as the worker sees it), with PyTorch's caching allocator off.
fn under(sanitizer: &Path, tool: Tool, log: &Path, spec: Spawn) -> Spawn {
    cuda_tools::run_under(sanitizer, tool.args(log), spec)
        .env("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
}

/// What one tool's run left: its log (or why it could not be read), what ended the trial where
/// it did not finish, and why it ran at the run's size where the small size raised.
struct Ran {
    log: std::io::Result<String>,
    ended: Option<Cause>,
    refused: Option<String>,
}

impl Ran {
    /// This run at the small size, which raised (`refused`), followed by `sized`, the run at the
    /// run's size: the two logs read as one (a report in either counts; either unread, nothing
    /// read), and what ended the second.
    fn then(self, sized: Ran, refused: String) -> Ran {
        Ran {
            log: self.log.and_then(|a| sized.log.map(|b| a + &b)),
            ended: sized.ended,
            refused: Some(refused),
        }
    }
}

/// Each tool's check, and the evaluation's cause: the error of the first tool in `Tool::ALL`'s
/// order that saw one in a kernel of the submission's own (`incorrect` under that tool's
/// check), else `cause`.
fn concluded(ran: Vec<(Tool, Ran, f64)>, own: &[String], cause: Cause) -> (Vec<Check>, Cause) {
    let mut checks = Vec::new();
    let mut first = None;
    for (tool, ran, seconds) in ran {
        let (check, error) = judged(tool, ran, own, seconds);
        checks.push(check);
        if first.is_none() {
            first = error.map(|error| (tool, error));
        }
    }
    let cause = match first {
        Some((tool, error)) => {
            Cause::Within(tool.check().to_string(), Box::new(Cause::Wrong(error)))
        }
        None => cause,
    };
    (checks, cause)
}

/// The submission's own kernels, as its profiled call named them.
fn own_kernels(eval: &Gathered) -> Vec<String> {
    let launches = eval.profile.iter().flat_map(|p| &p.candidate);
    launches.filter(|l| l.own).map(|l| l.name.clone()).collect()
}

/// What the evidence adds after the tool's finding: the libraries' reports and the warnings,
/// counted apart, the size the trial ran at where the small one raised, and an unread log.
fn notes(library: &[Report], warnings: &[Report], ran: &Ran) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(first) = library.first() {
        notes.push(format!(
            "{} report(s) in library kernels, not the submission's (first: {})",
            library.len(),
            first.line()
        ));
    }
    if let Some(first) = warnings.first() {
        notes.push(format!(
            "{} warning(s) in its kernels (first: {})",
            warnings.len(),
            first.line()
        ));
    }
    if let Some(refused) = &ran.refused {
        notes.push(format!(
            "the trial ran at the run's size, having raised at the small size ({refused})"
        ));
    }
    if let Err(e) = &ran.log {
        notes.push(format!("its log could not be read: {e}"));
    }
    notes
}

/// The tool's check, and the error that makes the evaluation `incorrect` where one of its
/// reports is in a kernel of the submission's own.
fn judged(tool: Tool, ran: Ran, own: &[String], seconds: f64) -> (Check, Option<String>) {
    let Judged {
        own: errors,
        library,
        warnings,
    } = sanitizer::judge(
        sanitizer::parse(ran.log.as_deref().unwrap_or_default()),
        own,
    );
    let notes = notes(&library, &warnings, &ran);
    let (outcome, evidence, error) = match (errors.first(), &ran.ended) {
        (Some(first), _) => {
            let more = match errors.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            let error = format!("{}{more}", first.line());
            (Outcome::Fail, error.clone(), Some(error))
        }
        (None, Some(cause)) => (
            Outcome::Skip,
            format!("did not finish under {}: {}", tool.name(), cause.reason()),
            None,
        ),
        // A log the candidate could have replaced (a link, a FIFO, gone): no report is no pass.
        (None, None) if ran.log.is_err() => (
            Outcome::Skip,
            format!(
                "{}'s log could not be read: nothing it found can be told",
                tool.name()
            ),
            None,
        ),
        (None, None) if own.is_empty() => (
            Outcome::Skip,
            "no kernel of the submission's own was profiled: nothing of its own to check".into(),
            None,
        ),
        (None, None) if !warnings.is_empty() => (
            Outcome::Warn,
            "no error in the submission's kernels".to_string(),
            None,
        ),
        (None, None) => (
            Outcome::Pass,
            format!("no report in the submission's {} kernel(s)", own.len()),
            None,
        ),
    };
    let evidence = std::iter::once(evidence)
        .chain(notes)
        .collect::<Vec<_>>()
        .join("; ");
    let check = Check {
        name: tool.check(),
        outcome,
        evidence,
        seconds,
        runs: 1,
    };
    (check, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sanitizer::tests::MEMCHECK as OOB;

    fn ran(log: &str, ended: Option<Cause>) -> Ran {
        Ran {
            log: Ok(log.into()),
            ended,
            refused: None,
        }
    }

    #[test]
    fn only_an_error_in_the_submission_s_own_kernel_decides() {
        let own = ["relu_scratch_off_by_one(float const*, float*, float*, long, int)".to_string()];
        let raised = || Some(Cause::Unready("the trial raised".into()));
        // (the run, its own kernels, the check's outcome, whether it makes the evaluation incorrect)
        let unreadable = Ran {
            log: Err(std::io::Error::other("a symbolic link, not followed")),
            ended: None,
            refused: None,
        };
        let cases: [(Ran, &[String], Outcome, bool); 6] = [
            (ran(OOB, None), &own, Outcome::Fail, true),
            // An error in its kernel decides even where the tool's run then failed.
            (ran(OOB, raised()), &own, Outcome::Fail, true),
            // The same report where no kernel of its own ran is a library's: nothing to check.
            (ran(OOB, None), &[], Outcome::Skip, false),
            (
                ran("========= ERROR SUMMARY: 0 errors\n", None),
                &own,
                Outcome::Pass,
                false,
            ),
            (ran("", raised()), &own, Outcome::Skip, false),
            // The candidate shares the log's folder: a log it replaced with a link or removed
            // reads as nothing found, never as a pass.
            (unreadable, &own, Outcome::Skip, false),
        ];
        for (n, (ran, own, outcome, wrong)) in cases.into_iter().enumerate() {
            let (check, error) = judged(Tool::Memcheck, ran, own, 1.0);
            assert_eq!(check.outcome, outcome, "case {n}: {}", check.evidence);
            assert_eq!(error.is_some(), wrong, "case {n}");
            if wrong {
                let e = error.unwrap();
                assert!(
                    e.starts_with(
                        "Invalid __global__ write of size 4 bytes in relu_scratch_off_by_one"
                    ),
                    "{e}"
                );
                assert!(e.contains("by thread (232,0,0) in block (3,0,0)"), "{e}");
            }
        }
        let (check, _) = judged(Tool::Memcheck, ran(OOB, None), &[], 1.0);
        assert!(
            check.evidence.contains("1 report(s) in library kernels"),
            "{}",
            check.evidence
        );
    }

    /// A kernel that errs at the small size and then raises (a submission refusing the small
    /// size after its bad launch, or to be watched at the run's size instead) is judged on both
    /// logs: the first run's error decides though the second ran clean; a log it replaced with a
    /// link leaves nothing read, never a pass.
    #[test]
    fn a_run_again_at_the_run_s_size_keeps_what_the_small_size_showed() {
        let own = ["relu_scratch_off_by_one(float const*, float*, float*, long, int)".to_string()];
        let clean = "========= ERROR SUMMARY: 0 errors\n";
        let raised = || Some(Cause::Unready("the trial raised".into()));
        let refused = || "forward: RuntimeError: rows8".to_string();
        let (check, error) = judged(
            Tool::Memcheck,
            ran(OOB, raised()).then(ran(clean, None), refused()),
            &own,
            1.0,
        );
        assert_eq!(check.outcome, Outcome::Fail, "{}", check.evidence);
        assert!(error.is_some());
        assert!(
            check.evidence.contains(
                "the trial ran at the run's size, having raised at the small size \
                 (forward: RuntimeError: rows8)"
            ),
            "{}",
            check.evidence
        );
        let unreadable = Ran {
            log: Err(std::io::Error::other("a symbolic link, not followed")),
            ended: raised(),
            refused: None,
        };
        let (check, error) = judged(
            Tool::Memcheck,
            unreadable.then(ran(clean, None), refused()),
            &own,
            1.0,
        );
        assert_eq!(check.outcome, Outcome::Skip, "{}", check.evidence);
        assert!(error.is_none());
        let (check, _) = judged(
            Tool::Memcheck,
            ran(clean, raised()).then(ran(clean, None), refused()),
            &own,
            1.0,
        );
        assert_eq!(check.outcome, Outcome::Pass, "{}", check.evidence);
    }

    #[test]
    fn every_tool_is_judged_and_the_first_to_see_an_error_decides() {
        let own = ["relu_scratch_off_by_one(float const*, float*, float*, long, int)".to_string()];
        let clean = "========= ERROR SUMMARY: 0 errors\n";
        let ran = |log: &str| ran(log, None);
        // Racecheck and initcheck both see the error: racecheck comes first in `Tool::ALL`.
        let runs = vec![
            (Tool::Memcheck, ran(clean), 1.0),
            (Tool::Racecheck, ran(OOB), 1.0),
            (Tool::Initcheck, ran(OOB), 1.0),
            (Tool::Synccheck, ran(clean), 1.0),
        ];
        // A cause correct so far: a contract breach, which an error outranks.
        let so_far = || Cause::Contract("a breach".into());
        let (checks, cause) = concluded(runs, &own, so_far());
        let outcomes: Vec<_> = checks.iter().map(|c| (c.name.clone(), c.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                (Tool::Memcheck.check(), Outcome::Pass),
                (Tool::Racecheck.check(), Outcome::Fail),
                (Tool::Initcheck.check(), Outcome::Fail),
                (Tool::Synccheck.check(), Outcome::Pass),
            ]
        );
        let Cause::Within(check, wrong) = cause else {
            panic!("not incorrect: {cause:?}");
        };
        assert_eq!(check, "sanitizer.racecheck");
        assert!(matches!(*wrong, Cause::Wrong(_)));
        let clean_runs = Tool::ALL.map(|tool| (tool, ran(clean), 1.0));
        let (_, cause) = concluded(clean_runs.into(), &own, so_far());
        assert!(matches!(cause, Cause::Contract(_)), "{cause:?}");
    }

    #[test]
    fn the_worker_runs_under_the_tool_with_the_caching_allocator_off() {
        let spec = cuda_tools::testing::candidate();
        let wrapped = under(
            Path::new("/cuda/bin/compute-sanitizer"),
            Tool::Initcheck,
            Path::new("/dev/shm/sanitizer.log"),
            spec,
        );
        assert_eq!(wrapped.python, "/cuda/bin/compute-sanitizer");
        assert_eq!(
            cuda_tools::testing::worker_tail(&wrapped),
            ["python3", "-m", "kbench_worker", "candidate"]
        );
        assert!(wrapped
            .args
            .windows(2)
            .any(|w| w == ["--tool", "initcheck"]));
        assert!(wrapped
            .env
            .contains(&("PYTORCH_NO_CUDA_MEMORY_CACHING".into(), "1".into())));
    }
}
