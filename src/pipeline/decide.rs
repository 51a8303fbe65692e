//! The mapping to the final `Evaluation`'s verdict and reason: a build that failed is its cause;
//! otherwise the cause an evaluation ended with (a breach of the module contract before timing
//! outranks what timing met: `after_breach`), decided by `verdict::Cause::decide` (the only map
//! to a verdict). Runs no worker and reads no file.

use crate::record::{Build, BuildStatus, Check, Evaluation, Outcome, Phases};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::{Cause, Verdict};
use crate::worker::CheckName;

use super::evidence::Judged;

/// The longest reason a report shows; the whole message stays in the worker's log.
const REASON_CHARS: usize = 400;

/// An evaluation before anything ran: `pass` with no reason until `conclude` decides it.
pub(super) fn early(task: &Task, submission: &Submission) -> Evaluation {
    Evaluation {
        task: task.id,
        task_name: task.name.clone(),
        file: submission.file.clone(),
        sample: submission.sample,
        sha256: submission.sha256.clone(),
        verdict: Verdict::Pass,
        reason: String::new(),
        build: None,
        findings: Vec::new(),
        trials: Vec::new(),
        kernelbench_correct: None,
        kernelbench_needed: None,
        checks: Vec::new(),
        task_flags: Vec::new(),
        timing: None,
        profile: None,
        logs: Vec::new(),
        phases: Phases::default(),
        seconds: 0.0,
        sandbox: String::new(),
    }
}

/// The cause a build that failed decides, before any worker of the evaluation starts; None for
/// a build the workers evaluate (an import failure included: the candidate's load says why).
pub(super) fn build_failure(build: &Build) -> Option<Cause> {
    match build.status {
        BuildStatus::Failed if build.drift.is_some() => Some(Cause::Drifted(build.message.clone())),
        BuildStatus::Failed => Some(Cause::BuildFailed(build.message.clone())),
        BuildStatus::Timeout => Some(Cause::BuildTimedOut(build.message.clone())),
        BuildStatus::Crashed => Some(Cause::BuildCrashed(build.message.clone())),
        BuildStatus::Ok | BuildStatus::ImportFailed => None,
    }
}

/// The verdict and the reason `cause` decides, written into `eval`.
pub(super) fn conclude(eval: &mut Evaluation, cause: &Cause) {
    let (verdict, reason) = cause.decide();
    eval.verdict = verdict;
    eval.reason = one_line(&reason);
}

/// What decides an evaluation that breached the module contract with its values right (`why`,
/// `Cause::Contract`'s reason) and was timed and profiled after (`judged`): the breach, whatever
/// the timing or the profiled call met, which its reason then names. The host-speed error the
/// profiled call allows still applies to the timing.
pub(super) fn after_breach(why: String, judged: Result<Judged, Cause>) -> Judged {
    match judged {
        Ok(judged) => Judged {
            cause: Cause::Contract(why),
            ..judged
        },
        Err(cause) => {
            let (verdict, reason) = cause.decide();
            Judged {
                cause: Cause::Contract(format!("{why}; after the breach: {verdict}: {reason}")),
                host_error: None,
            }
        }
    }
}

/// `harness.alone`: the evaluation ran out of GPU memory beside another lane and was run again
/// with the GPU to itself.
pub(super) fn alone_check() -> Check {
    Check {
        name: CheckName::HarnessAlone,
        outcome: Outcome::Warn,
        evidence: "out of GPU memory beside another evaluation: evaluated again with the GPU \
                   to itself"
            .into(),
        seconds: 0.0,
        runs: 1,
    }
}

/// A reason as reports show it: one line (worker messages are made so; this holds it for any
/// text that reaches here), at most `REASON_CHARS` characters.
fn one_line(reason: &str) -> String {
    let line = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(REASON_CHARS) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_one_line() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        let long = "é".repeat(REASON_CHARS + 5);
        assert_eq!(one_line(&long).chars().count(), REASON_CHARS + 3);
    }
}
