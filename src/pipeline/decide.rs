//! The final `Evaluation`, made once from what the stages gathered, with its verdict and
//! reason: a build that failed is its cause; otherwise the cause an evaluation ended with (a
//! breach of the module contract before timing outranks what timing met: `after_breach`),
//! decided by `verdict::Cause::decide` (the only map to a verdict). Runs no worker and reads no
//! file.

use crate::record::{Build, BuildStatus, Check, Evaluation, Outcome};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Cause;
use crate::worker::CheckName;

use super::evidence::Judged;
use super::gathered::Gathered;

/// The longest reason a report shows; the whole message stays in the worker's log.
const REASON_CHARS: usize = 400;

/// The evaluation of `submission` to `task`, made once at its end: what its stages gathered
/// (`gathered`), its `build` where it got that far, the sandbox's label, the seconds it took,
/// and the verdict and reason `cause` decides. What the run adds from outside the workers
/// (`annotate`) comes after.
pub(super) fn evaluation(
    (task, submission): (&Task, &Submission),
    build: Option<Build>,
    sandbox: String,
    gathered: Gathered,
    cause: &Cause,
    seconds: f64,
) -> Evaluation {
    let (verdict, reason) = cause.decide();
    let Gathered {
        logs,
        trials,
        kernelbench_correct,
        kernelbench_needed,
        checks,
        timing,
        profile,
        ncu,
        phases,
        slot_compiled,
    } = gathered;
    let build = build.map(|build| match slot_compiled {
        Some(names) => Build {
            slot_compiled: Some(names),
            ..build
        },
        None => build,
    });
    Evaluation {
        task: task.id,
        task_name: task.name.clone(),
        file: submission.file.clone(),
        sample: submission.sample,
        sha256: submission.sha256.clone(),
        verdict,
        reason: one_line(&reason),
        build,
        findings: Vec::new(),
        trials,
        kernelbench_correct,
        kernelbench_needed,
        checks,
        task_flags: Vec::new(),
        timing,
        profile,
        ncu,
        logs,
        phases,
        seconds,
        sandbox,
        served: None,
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

/// The cause with what the build adds to the kernels' evidence: what a build the module fell
/// back from on toolchain drift did once more with the drift rewritten
/// (`Build::drift_rewritten`), which decides whether the drift or the kernel is the cause.
pub(super) fn with_build(cause: Cause, build: &Build) -> Cause {
    match cause {
        Cause::Kernels(mut evidence) => {
            evidence.drift_rewritten = build.drift_rewritten.clone();
            Cause::Kernels(evidence)
        }
        Cause::Within(check, cause) => Cause::Within(check, Box::new(with_build(*cause, build))),
        other => other,
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
