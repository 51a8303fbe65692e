//! The verdict on one evaluation: a closed set with stable strings for CSV and JUnit, and the
//! verdict stage: what ended or decided an evaluation (`Cause`, facts about the submission and
//! its workers) mapped to its verdict and reason (`Cause::decide`, the only place that does),
//! the judgement of a correct submission's kernels (`judge_kernels`) included.

use serde::{Deserialize, Serialize};

use crate::reference_ops::{brief, ReferenceOps};
use crate::worker::{CheckName, ErrorKind, Failure, WorkerError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Correct, with a custom kernel; the timing says how fast.
    Pass,
    /// Correct, but pure PyTorch: no compiled or JIT kernel of its own.
    NoKernel,
    /// Wrong values, shape or dtype, NaN.
    Incorrect,
    /// The values KernelBench checks are right, but the module breaks kbench's module contract,
    /// which KernelBench does not check: it writes into its inputs, returns the same output
    /// storage on every call, follows its parameters only as they were at construction, or
    /// keeps state between calls. The reason names the check and its evidence.
    Contract,
    /// Not judged on its merits: the kernel needs an API or an architecture the installed
    /// toolchain no longer has (the worker says so in a field of its own, `drift`; the reason
    /// starts with `environment: `, naming it).
    Environment,
    /// Python syntax error or an extension that failed to build.
    CompileError,
    /// An exception at import, construction or call (CUDA errors and out-of-memory included).
    RuntimeError,
    /// No answer within the deadline; the worker was killed.
    Timeout,
    /// The worker died without answering (segfault, abort, `os._exit`).
    Crashed,
    /// Caught cheating; the reason names the check and its evidence.
    Cheat,
    /// Not evaluated, with a reason (e.g. the reference does not fit in memory).
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::NoKernel => "no_kernel",
            Verdict::Incorrect => "incorrect",
            Verdict::Contract => "contract",
            Verdict::Environment => "environment",
            Verdict::CompileError => "compile_error",
            Verdict::RuntimeError => "runtime_error",
            Verdict::Timeout => "timeout",
            Verdict::Crashed => "crashed",
            Verdict::Cheat => "cheat",
            Verdict::Skipped => "skipped",
        }
    }

    /// Whether the kernel computes the task's function.
    pub fn is_correct(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::NoKernel)
    }

    /// Whether the submission failed (as opposed to being correct or not evaluated).
    pub fn is_failure(self) -> bool {
        !self.is_correct() && self != Verdict::Skipped
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What ended or decided an evaluation: facts, not yet a verdict. Phases that end early return
/// one; an evaluation that gets through ends with the kernels' evidence.
#[derive(Clone, Debug, PartialEq)]
pub enum Cause {
    /// The build failed: a syntax error or an extension that did not compile (its message).
    BuildFailed(String),
    /// The build failed on known toolchain drift (`Build::drift`): its message.
    Drifted(String),
    /// The build got no reply within its deadline.
    BuildTimedOut(String),
    /// The compile worker died, or could not be started.
    BuildCrashed(String),
    /// An error the candidate's code raised.
    Raised(WorkerError),
    /// The candidate worker gave no reply.
    Silent(Failure),
    /// The trusted reference worker died or stopped answering while a candidate ran: the
    /// candidate may have killed it (or forged its reply).
    ReferenceDied(Failure),
    /// The reference's own error at a step: not the submission's fault.
    ReferenceError(ReferenceStep, WorkerError),
    /// kbench could not set the evaluation up (its workers, the submission's copy); the reason.
    Unready(String),
    /// On the CPU, the task cannot fit the host's memory (`host_memory`); the estimate and the
    /// memory available.
    DoesNotFit(String),
    /// A stage (`"build"`, `"evaluation"`) outlasted its deadline, which only a wait that never
    /// ends reaches (every worker request has its own): kbench stopped waiting for it
    /// (`serve::queue`).
    Abandoned(&'static str, std::time::Duration),
    /// The evaluation did not finish before the service stopped; why.
    Unfinished(String),
    /// The reference's output could not be checked (not finite); the reason names the trial.
    Uncheckable(String),
    /// The candidate's outputs are wrong; the reason names the check where one ran.
    Wrong(String),
    /// The outputs KernelBench checks are right, but the module breaks kbench's module
    /// contract; the reason names the check and its evidence.
    Contract(String),
    /// A timed call's kept output is wrong where the trials' were right; the reason names it.
    TimedOutputWrong(String),
    /// A timing reply that holds no valid times: the worker is broken.
    MalformedTimes(String),
    /// The GPU stayed in slowdown: no clean timing rounds.
    NoCleanRounds,
    /// What ended a named check: its verdict, with the check's name before its reason.
    Within(String, Box<Cause>),
    /// The evaluation got through: what was seen of the kernels decides.
    Kernels(Box<KernelEvidence>),
}

/// Where the reference worker raised its own error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceStep {
    Load,
    Perturb,
    Check,
    Timing,
}

impl Cause {
    /// The verdict and its reason: the one map from what happened to a verdict.
    pub fn decide(&self) -> (Verdict, String) {
        match self {
            Cause::BuildFailed(message) => (Verdict::CompileError, message.clone()),
            Cause::Drifted(message) => (Verdict::Environment, message.clone()),
            Cause::BuildTimedOut(message) => (Verdict::Timeout, format!("build: {message}")),
            Cause::BuildCrashed(message) => (Verdict::Crashed, format!("build: {message}")),
            Cause::Raised(e) => (of_worker_error(e), e.message.clone()),
            Cause::Silent(f) => (of_failure(f), f.to_string()),
            Cause::ReferenceDied(f) => of_reference_death(f),
            Cause::ReferenceError(step, e) => (Verdict::Skipped, of_reference_error(*step, e)),
            Cause::Unready(why) | Cause::Uncheckable(why) | Cause::DoesNotFit(why) => {
                (Verdict::Skipped, why.clone())
            }
            Cause::Abandoned(stage, after) => (
                Verdict::Timeout,
                format!(
                    "{stage}: no result within {:.0} s; kbench stopped waiting for it",
                    after.as_secs_f64()
                ),
            ),
            Cause::Unfinished(why) => (Verdict::Skipped, format!("not finished: {why}")),
            Cause::Wrong(why) => (Verdict::Incorrect, why.clone()),
            Cause::Contract(why) => (Verdict::Contract, why.clone()),
            Cause::TimedOutputWrong(why) => (Verdict::Cheat, why.clone()),
            Cause::MalformedTimes(why) => (Verdict::Crashed, why.clone()),
            Cause::NoCleanRounds => (
                Verdict::Skipped,
                "the GPU stayed in hardware or thermal slowdown: no clean rounds".into(),
            ),
            Cause::Within(check, cause) => {
                let (verdict, reason) = cause.decide();
                (verdict, format!("{check}: {reason}"))
            }
            Cause::Kernels(evidence) => judge_kernels(evidence),
        }
    }

    /// The reason `decide` gives.
    pub fn reason(&self) -> String {
        self.decide().1
    }

    /// Whether either worker ran out of GPU memory.
    pub fn out_of_memory(&self) -> bool {
        match self {
            Cause::Raised(e) | Cause::ReferenceError(_, e) => e.kind == ErrorKind::Oom,
            Cause::Within(_, cause) => cause.out_of_memory(),
            _ => false,
        }
    }

    /// Whether the candidate's code raised at run time (not a build, a wrong output or a
    /// cheat): a clean refusal.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Cause::Raised(e) if of_worker_error(e) == Verdict::RuntimeError)
    }
}

/// The verdict for an error the candidate's code raised.
fn of_worker_error(error: &WorkerError) -> Verdict {
    match error.kind {
        ErrorKind::Build if error.drift.is_some() => Verdict::Environment,
        ErrorKind::Syntax | ErrorKind::Build => Verdict::CompileError,
        ErrorKind::Output => Verdict::Incorrect,
        ErrorKind::Contract => Verdict::Contract,
        ErrorKind::Cheat => Verdict::Cheat,
        _ => Verdict::RuntimeError,
    }
}

/// The verdict when the candidate worker gave no reply.
fn of_failure(failure: &Failure) -> Verdict {
    match failure {
        Failure::Timeout(_) => Verdict::Timeout,
        Failure::Forged(_) => Verdict::Cheat,
        Failure::Exited(_) | Failure::Protocol(_) => Verdict::Crashed,
    }
}

/// The trusted worker died or stopped answering while a candidate ran: the candidate may have
/// killed it, so it fails; a skip would let it through the gate. A line in its reply pipe
/// without its key can only be the candidate's: `cheat`.
fn of_reference_death(failure: &Failure) -> (Verdict, String) {
    match of_failure(failure) {
        Verdict::Cheat => (
            Verdict::Cheat,
            format!("the reference worker's reply was forged while the candidate ran: {failure}"),
        ),
        _ => (
            Verdict::Crashed,
            format!("the reference worker died while the candidate ran: {failure}"),
        ),
    }
}

/// Why the reference's own error skips the evaluation: out of memory at load means the task
/// does not fit.
fn of_reference_error(step: ReferenceStep, e: &WorkerError) -> String {
    let m = &e.message;
    match step {
        ReferenceStep::Load if e.kind == ErrorKind::Oom => {
            format!("the reference does not fit: {m}")
        }
        ReferenceStep::Load => format!("the reference failed to load: {m}"),
        ReferenceStep::Perturb => {
            format!("the reference failed to perturb its parameters: {m}")
        }
        ReferenceStep::Check => format!("the reference failed: {m}"),
        ReferenceStep::Timing => format!("the reference failed while timed: {m}"),
    }
}

/// An extension build that raised inside the submission (which may have caught it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BuildFailure {
    pub extension: String,
    /// Where the submission was: `import`, `__init__` or `forward`.
    pub phase: String,
    /// One line: `extension 'x' failed to build: <first compiler error>`, after the drift's
    /// `environment: ...; ` where there is one.
    pub cause: String,
    /// Known toolchain drift the build failed on (as `WorkerError::drift`).
    #[serde(default)]
    pub drift: Option<String>,
}

/// What a build the module fell back from on known toolchain drift did when the compile pool
/// built the submission once more with the drift rewritten (`--compat`'s rewrite): the
/// toolchain is the cause only where it then builds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Rewritten {
    /// The rewrites made, each `what (N places)`.
    pub rewrites: Vec<String>,
    /// The kernel's own failure with the drift rewritten (a build that raised again, or a build
    /// that failed); None where every build succeeded.
    pub own: Option<String>,
}

/// What the candidate worker saw of a correct submission's kernels, and the profile of one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelEvidence {
    /// Extensions and JIT kernels it loaded (`cpp_extension.load_inline:name`, `triton:fn`).
    pub kernels: Vec<String>,
    pub build_failures: Vec<BuildFailure>,
    /// Where a build failure met toolchain drift: what the build with the drift rewritten did
    /// (`Build::drift_rewritten`); None where it was not tried.
    pub drift_rewritten: Option<Rewritten>,
    /// Kernel names its source defines (`__global__`, `@triton.jit`).
    pub defined: Vec<String>,
    /// From the profiled call (GPU only): device ms in its own kernels, and in all kernels.
    pub custom_ms: Option<f64>,
    pub total_ms: Option<f64>,
    /// Share of GPU time in library kernels, and the most the run's policy allows on this task.
    pub library_share: Option<f64>,
    pub library_limit: Option<f64>,
    /// The reference's profiled call against the candidate's (`profile.reference_ops`), and the
    /// most library share the run's policy allows where the candidate ran every kernel launch of
    /// the reference's (at every level; None under `any`).
    pub reference_ops: Option<ReferenceOps>,
    pub reuse_limit: Option<f64>,
    pub policy: &'static str,
    /// `kernels.mapped`'s evidence when none of the reported kernels' files is loaded in the
    /// worker (read from outside it): the report is not believed.
    pub unmapped: Option<String>,
    /// `profile.library_output`'s evidence when library ops alone made every output in the
    /// traced calls (None under `--library-policy any`, where it is a warning).
    pub library_made: Option<String>,
}

/// A module with no kernel that fell back from build failure `f`: `NoKernel`, or `Environment`
/// where the build met toolchain drift and, built again with the drift rewritten (`rewritten`,
/// where tried), builds.
fn fell_back(f: &BuildFailure, rewritten: Option<&Rewritten>) -> (Verdict, String) {
    let fell = format!("(in {}), and the module fell back to PyTorch", f.phase);
    match (&f.drift, rewritten) {
        (None, _) => (Verdict::NoKernel, format!("{} {fell}", f.cause)),
        (Some(_), Some(Rewritten { rewrites, own: Some(own) })) => (
            Verdict::NoKernel,
            format!(
                "with the toolchain's drift rewritten ({}) the build still fails, for the kernel's own reason: {own} {fell}",
                rewrites.join(", ")
            ),
        ),
        (Some(_), Some(Rewritten { rewrites, own: None })) => {
            // The drift's words first (`environment: ...`), as a failed build's message has them.
            let (said, rest) = f.cause.split_once("; ").unwrap_or((&f.cause, ""));
            let rewrites = rewrites.join(", ");
            (
                Verdict::Environment,
                format!("{said}; with the drift rewritten it builds ({rewrites}): run with --compat to judge it; {rest} {fell}"),
            )
        }
        (Some(_), None) => (Verdict::Environment, format!("{} {fell}", f.cause)),
    }
}

/// The least GPU time in a profiled call on which the library share is judged: below it a few
/// library launches that do none of the task's work (a fill, a copy of the output) are a large
/// share (CUDA-L1's level1/32 kernel: 53 % of 4 µs).
const LIBRARY_JUDGED_FROM_MS: f64 = 0.02;

/// `Pass`, or `NoKernel` with why: no kernel at all (saying which build failed and was caught),
/// kernels built that never ran in the profiled call, library kernels above the policy, the
/// reference's own kernel launches, every one, beside kernels of its own that took a small share,
/// or library ops that made every output in the traced calls (`profile.library_output`).
/// A module that fell back because its build met known toolchain drift is `Environment`: its
/// kernel was not judged. Unless the build with the drift rewritten fails too: then the failure
/// is the kernel's own, and the module is `NoKernel` with it.
fn judge_kernels(k: &KernelEvidence) -> (Verdict, String) {
    let no_kernel = |why: String| (Verdict::NoKernel, why);
    if k.kernels.is_empty() {
        return match k.build_failures.first() {
            Some(f) => fell_back(f, k.drift_rewritten.as_ref()),
            None => no_kernel("correct, but no custom kernel (pure PyTorch)".into()),
        };
    }
    if let Some(evidence) = &k.unmapped {
        return no_kernel(format!("{}: {evidence}", CheckName::KernelsMapped));
    }
    let ran_nothing = k.custom_ms == Some(0.0) && k.total_ms.is_some_and(|t| t > 0.0);
    if ran_nothing && !k.defined.is_empty() {
        return no_kernel(format!(
            "built {} but none of its kernels ({}) ran in the profiled call: the module computed with PyTorch",
            k.kernels.join(", "),
            k.defined.join(", ")
        ));
    }
    let judged = k.total_ms.is_none_or(|t| t >= LIBRARY_JUDGED_FROM_MS);
    match (k.library_share, k.library_limit) {
        (Some(share), Some(limit)) if share > limit && judged => no_kernel(format!(
            "{}: {:.0} % of GPU time is in library kernels (cuBLAS, cuDNN, ATen), above the {} policy's {:.0} %",
            CheckName::ProfileLibraryShare,
            share * 100.0,
            k.policy,
            limit * 100.0
        )),
        _ => match (judge_reuse(k, judged), &k.library_made) {
            ((Verdict::Pass, _), Some(evidence)) => {
                no_kernel(format!("{}: {evidence}", CheckName::ProfileLibraryOutput))
            }
            (judged, _) => judged,
        },
    }
}

/// `profile.reference_ops`: a candidate that ran every kernel launch of the reference's did the
/// reference's work with the reference's kernels; where its own kernels also took less than the
/// library limit's complement of its GPU time, they only added to that work (the reuse
/// exemption levels 2-3 get, a library GEMM with the rest fused, is for kernels that replace
/// some of the reference's).
fn judge_reuse(k: &KernelEvidence, judged: bool) -> (Verdict, String) {
    let (Some(ops), Some(share), Some(limit), Some(total)) =
        (&k.reference_ops, k.library_share, k.reuse_limit, k.total_ms)
    else {
        return (Verdict::Pass, String::new());
    };
    if !(ops.covered() && share > limit && judged) {
        return (Verdict::Pass, String::new());
    }
    const NAMED: usize = 3;
    let mut names: Vec<String> = ops.kernels.iter().take(NAMED).map(|n| brief(n)).collect();
    if ops.kernels.len() > NAMED {
        names.push(format!("{} more", ops.kernels.len() - NAMED));
    }
    (
        Verdict::NoKernel,
        format!(
            "{}: the candidate's call ran every kernel launch of the reference's ({} of {} kernel(s)), and its own kernels took {:.0} % of its {:.3} ms GPU time, below the {} policy's {:.0} %: the reference's ops did the work ({})",
            CheckName::ProfileReferenceOps,
            ops.launches,
            ops.kernels.len(),
            (1.0 - share) * 100.0,
            total,
            k.policy,
            (1.0 - limit) * 100.0,
            names.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_errors_map_to_verdicts() {
        let e = |kind: ErrorKind| WorkerError {
            kind,
            message: String::new(),
            fatal: false,
            traceback: None,
            drift: None,
            check: None,
        };
        assert_eq!(
            of_worker_error(&e(ErrorKind::Syntax)),
            Verdict::CompileError
        );
        assert_eq!(of_worker_error(&e(ErrorKind::Build)), Verdict::CompileError);
        assert_eq!(of_worker_error(&e(ErrorKind::Output)), Verdict::Incorrect);
        assert_eq!(of_worker_error(&e(ErrorKind::Cheat)), Verdict::Cheat);
        assert_eq!(of_worker_error(&e(ErrorKind::Contract)), Verdict::Contract);
        assert_eq!(of_worker_error(&e(ErrorKind::Cuda)), Verdict::RuntimeError);
        assert_eq!(
            of_failure(&Failure::Timeout(std::time::Duration::from_secs(1))),
            Verdict::Timeout
        );
        assert_eq!(
            of_failure(&Failure::Exited("signal 11".into())),
            Verdict::Crashed
        );
        assert_eq!(of_failure(&forged()), Verdict::Cheat);
        // A protocol error the worker made itself is a crash, whatever its text says.
        let misread = format!("{}: no nonce", crate::worker::protocol::FORGED);
        assert_eq!(of_failure(&Failure::Protocol(misread)), Verdict::Crashed);
    }

    fn error(kind: ErrorKind, message: &str) -> WorkerError {
        WorkerError {
            kind,
            message: message.into(),
            fatal: false,
            traceback: None,
            drift: None,
            check: None,
        }
    }

    /// A build error on known toolchain drift, as the worker sends it: the drift in its field,
    /// and in the message's words.
    fn drifted(drift: &str, rest: &str) -> WorkerError {
        WorkerError {
            drift: Some(drift.into()),
            ..error(ErrorKind::Build, &format!("environment: {drift}; {rest}"))
        }
    }

    fn died() -> Failure {
        Failure::Exited("signal 9".into())
    }

    fn hung() -> Failure {
        Failure::Timeout(std::time::Duration::from_secs(2))
    }

    fn forged() -> Failure {
        Failure::Forged(format!("{}: no nonce", crate::worker::protocol::FORGED))
    }

    /// Each cause's verdict, and the start of its reason.
    fn decides(cases: Vec<(Cause, Verdict, &str)>) {
        for (cause, verdict, reason) in cases {
            let (v, r) = cause.decide();
            assert_eq!(v, verdict, "{cause:?}: {r}");
            assert!(
                r.starts_with(reason),
                "{r:?} does not start with {reason:?}"
            );
        }
    }

    #[test]
    fn what_the_build_and_the_candidate_did_decides() {
        use Cause as C;
        use ErrorKind as K;
        use Verdict as V;
        decides(vec![
            (
                C::BuildFailed("SyntaxError: x".into()),
                V::CompileError,
                "SyntaxError: x",
            ),
            (
                C::BuildTimedOut("no reply".into()),
                V::Timeout,
                "build: no reply",
            ),
            (
                C::BuildCrashed("exited".into()),
                V::Crashed,
                "build: exited",
            ),
            (
                C::Raised(error(K::Syntax, "line 3")),
                V::CompileError,
                "line 3",
            ),
            (C::Raised(error(K::Build, "nvcc")), V::CompileError, "nvcc"),
            (
                C::Drifted("environment: the installed nvcc no longer supports compute_70 (--compat raises it); extension 'x' failed to build: nvcc fatal".into()),
                V::Environment,
                "environment: the installed nvcc no longer supports compute_70",
            ),
            (
                C::Raised(drifted("the kernel uses AT_DISPATCH on x.type(), which torch 2.11 removed (use x.scalar_type())", "extension 'x' failed to build")),
                V::Environment,
                "environment: the kernel uses AT_DISPATCH on x.type()",
            ),
            (
                // The type decides, not the words: a message that says `environment: ` without
                // the worker's drift is the kernel's own failure.
                C::BuildFailed("environment: the installed nvcc no longer supports compute_70 (--compat raises it); extension 'x' failed to build: nvcc fatal".into()),
                V::CompileError,
                "environment: the installed nvcc",
            ),
            (
                C::Raised(error(K::Build, "environment: x; extension 'x' failed to build")),
                V::CompileError,
                "environment: x;",
            ),
            (
                C::Raised(error(K::Contract, "forward: RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.")),
                V::Contract,
                "forward: RuntimeError: Error: accessing tensor output of CUDAGraphs",
            ),
            (
                C::Raised(error(K::Output, "a tuple")),
                V::Incorrect,
                "a tuple",
            ),
            (
                C::Raised(error(K::Cheat, "inputs.modified")),
                V::Cheat,
                "inputs.modified",
            ),
            (
                C::Raised(error(K::Forward, "boom")),
                V::RuntimeError,
                "boom",
            ),
            (
                C::Raised(error(K::Oom, "out of memory")),
                V::RuntimeError,
                "out of memory",
            ),
            (C::Silent(hung()), V::Timeout, "no reply within 2 s"),
            (
                C::Silent(died()),
                V::Crashed,
                "worker exited without replying (signal 9)",
            ),
            (C::Silent(forged()), V::Cheat, "protocol error: "),
            (
                C::Abandoned("build", std::time::Duration::from_secs(90)),
                V::Timeout,
                "build: no result within 90 s; kbench stopped",
            ),
            (
                C::Abandoned("evaluation", std::time::Duration::from_secs(7)),
                V::Timeout,
                "evaluation: no result within 7 s",
            ),
            (
                C::Unfinished("the service stopped".into()),
                V::Skipped,
                "not finished: the service stopped",
            ),
            (
                C::Kernels(Box::default()),
                V::NoKernel,
                "correct, but no custom",
            ),
        ]);
        assert!(C::Raised(error(K::Cuda, "m")).is_refusal());
        assert!(!C::Raised(error(K::Output, "m")).is_refusal());
        assert!(!C::Silent(died()).is_refusal());
    }

    #[test]
    fn the_reference_fails_the_candidate_only_when_it_dies() {
        use Cause as C;
        use ErrorKind as K;
        use ReferenceStep as S;
        use Verdict as V;
        let died_while = "the reference worker died while the candidate ran: ";
        decides(vec![
            (C::ReferenceDied(died()), V::Crashed, died_while),
            (C::ReferenceDied(hung()), V::Crashed, died_while),
            (
                C::ReferenceDied(forged()),
                V::Cheat,
                "the reference worker's reply was forged while the candidate ran: protocol error",
            ),
            (
                C::ReferenceError(S::Load, error(K::Oom, "m")),
                V::Skipped,
                "the reference does not fit: m",
            ),
            (
                C::ReferenceError(S::Load, error(K::Reference, "m")),
                V::Skipped,
                "the reference failed to load: m",
            ),
            (
                C::ReferenceError(S::Perturb, error(K::Oom, "m")),
                V::Skipped,
                "the reference failed to perturb its parameters: m",
            ),
            (
                C::ReferenceError(S::Check, error(K::Transfer, "m")),
                V::Skipped,
                "the reference failed: m",
            ),
            (
                C::ReferenceError(S::Timing, error(K::Reference, "m")),
                V::Skipped,
                "the reference failed while timed: m",
            ),
            (C::Unready("no worker".into()), V::Skipped, "no worker"),
            (
                C::DoesNotFit("needs 9 GiB".into()),
                V::Skipped,
                "needs 9 GiB",
            ),
        ]);
    }

    #[test]
    fn checks_and_timing_decide() {
        use Cause as C;
        use Verdict as V;
        let timed = "timing.timed_output_check: timed call 4: x";
        decides(vec![
            (
                C::Uncheckable("trial 0: inf".into()),
                V::Skipped,
                "trial 0: inf",
            ),
            (
                C::Wrong("trial 1: max_abs_diff 3".into()),
                V::Incorrect,
                "trial 1: max_abs_diff 3",
            ),
            (C::TimedOutputWrong(timed.into()), V::Cheat, timed),
            (
                C::Contract("trial 0: inputs.integrity: forward modified its input(s) [0]".into()),
                V::Contract,
                "trial 0: inputs.integrity: forward modified its input(s) [0]",
            ),
            (C::MalformedTimes("bad".into()), V::Crashed, "bad"),
            (
                C::NoCleanRounds,
                V::Skipped,
                "the GPU stayed in hardware or thermal slowdown: no clean rounds",
            ),
            (
                C::Within(
                    "inputs.shape_perturbation (N=5)".into(),
                    Box::new(C::Silent(died())),
                ),
                V::Crashed,
                "inputs.shape_perturbation (N=5): worker exited without replying",
            ),
            (
                C::Within("c".into(), Box::new(C::Wrong("differs".into()))),
                V::Incorrect,
                "c: differs",
            ),
        ]);
    }

    #[test]
    fn kernels_are_judged_from_what_was_built_and_what_ran() {
        let failure = BuildFailure {
            extension: "ext".into(),
            phase: "__init__".into(),
            cause: "extension 'ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70'".into(),
            drift: None,
        };
        let drift = "the installed nvcc no longer supports compute_70 (--compat raises it)";
        let drifted_failure = BuildFailure {
            cause: format!("environment: {drift}; {}", failure.cause),
            drift: Some(drift.into()),
            ..failure.clone()
        };
        let built = || KernelEvidence {
            kernels: vec!["cpp_extension.load_inline:ext".into()],
            defined: vec!["relu_kernel".into()],
            policy: "partial",
            ..KernelEvidence::default()
        };
        let cases: Vec<(KernelEvidence, Verdict, &str)> = vec![
            (KernelEvidence::default(), Verdict::NoKernel, "pure PyTorch"),
            (
                KernelEvidence {
                    build_failures: vec![failure.clone()],
                    ..KernelEvidence::default()
                },
                Verdict::NoKernel,
                "extension 'ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70' (in __init__), and the module fell back to PyTorch",
            ),
            (
                KernelEvidence {
                    build_failures: vec![BuildFailure {
                        cause: format!("environment: {drift}; {}", failure.cause),
                        drift: Some(drift.into()),
                        ..failure.clone()
                    }],
                    ..KernelEvidence::default()
                },
                Verdict::Environment,
                "environment: the installed nvcc no longer supports compute_70 (--compat raises it); extension 'ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70' (in __init__), and the module fell back to PyTorch",
            ),
            (
                // The words without the worker's drift: the kernel's own failure.
                KernelEvidence {
                    build_failures: vec![BuildFailure {
                        cause: format!("environment: {drift}; {}", failure.cause),
                        ..failure.clone()
                    }],
                    ..KernelEvidence::default()
                },
                Verdict::NoKernel,
                "environment: the installed nvcc",
            ),
            (
                // Built again with the drift rewritten, it builds: the toolchain is the cause.
                KernelEvidence {
                    build_failures: vec![drifted_failure.clone()],
                    drift_rewritten: Some(Rewritten {
                        rewrites: vec!["compute_70 -> compute_75 (1 place)".into()],
                        own: None,
                    }),
                    ..KernelEvidence::default()
                },
                Verdict::Environment,
                "environment: the installed nvcc no longer supports compute_70 (--compat raises it); with the drift rewritten it builds (compute_70 -> compute_75 (1 place)): run with --compat to judge it; extension 'ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70' (in __init__), and the module fell back to PyTorch",
            ),
            (
                // Built again with the drift rewritten, it fails still: the kernel's own failure.
                KernelEvidence {
                    build_failures: vec![drifted_failure.clone()],
                    drift_rewritten: Some(Rewritten {
                        rewrites: vec!["x.type() -> x.scalar_type() (1 place)".into()],
                        own: Some("extension 'ext' failed to build: error: redefinition of 'PyInit_ext'".into()),
                    }),
                    ..KernelEvidence::default()
                },
                Verdict::NoKernel,
                "with the toolchain's drift rewritten (x.type() -> x.scalar_type() (1 place)) the build still fails, for the kernel's own reason: extension 'ext' failed to build: error: redefinition of 'PyInit_ext' (in __init__), and the module fell back to PyTorch",
            ),
            (built(), Verdict::Pass, ""),
            (
                KernelEvidence {
                    unmapped: Some("no shared object of the build is mapped".into()),
                    ..built()
                },
                Verdict::NoKernel,
                "kernels.mapped: no shared object",
            ),
            (
                KernelEvidence {
                    library_made: Some("library ops made every output".into()),
                    ..built()
                },
                Verdict::NoKernel,
                "profile.library_output: library ops made every output",
            ),
            (
                KernelEvidence {
                    custom_ms: Some(0.0),
                    total_ms: Some(1.5),
                    ..built()
                },
                Verdict::NoKernel,
                "built cpp_extension.load_inline:ext but none of its kernels (relu_kernel) ran",
            ),
            (
                // No kernel name found in the source: the profile cannot tell, so no claim.
                KernelEvidence {
                    custom_ms: Some(0.0),
                    total_ms: Some(1.5),
                    defined: vec![],
                    ..built()
                },
                Verdict::Pass,
                "",
            ),
            (
                KernelEvidence {
                    custom_ms: Some(0.1),
                    total_ms: Some(1.0),
                    library_share: Some(0.9),
                    library_limit: Some(0.5),
                    ..built()
                },
                Verdict::NoKernel,
                "90 % of GPU time is in library kernels",
            ),
            (
                KernelEvidence {
                    custom_ms: Some(0.1),
                    total_ms: Some(1.0),
                    library_share: Some(0.9),
                    library_limit: None,
                    ..built()
                },
                Verdict::Pass,
                "",
            ),
            (
                // A 4 µs call: its library share is not judged.
                KernelEvidence {
                    custom_ms: Some(0.0019),
                    total_ms: Some(0.004),
                    library_share: Some(0.53),
                    library_limit: Some(0.5),
                    ..built()
                },
                Verdict::Pass,
                "",
            ),
        ];
        for (evidence, verdict, reason) in cases {
            let (v, r) = judge_kernels(&evidence);
            assert_eq!(v, verdict, "{evidence:?}: {r}");
            assert!(r.contains(reason), "{r:?} lacks {reason:?}");
        }
    }

    /// `profile.reference_ops` over synthetic profiles of a level-2 GEMM + bias + ReLU task
    /// (the partial policy: no library limit at level 2, the reuse limit everywhere).
    #[test]
    fn the_reference_ops_rerun_with_a_trivial_kernel_of_its_own_are_no_kernel() {
        use crate::reference_ops::{compare, Launches};
        let k = |name: &str, launches: u32, ms: f64| Launches {
            name: name.into(),
            launches,
            ms,
            own: false,
        };
        let (gemm, add, relu) = (
            "sm90_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "void at::native::vectorized_elementwise_kernel<4, clamp_min_scalar_kernel_impl>",
        );
        let reference = [k(gemm, 1, 2.7), k(add, 1, 0.02), k(relu, 1, 0.02)];
        // The candidate's profile: its kernels, and the ms of its own among `total`.
        let evidence = |candidate: &[Launches], own_ms: f64, reuse_limit: Option<f64>| {
            let total: f64 = candidate.iter().map(|c| c.ms).sum::<f64>() + own_ms;
            KernelEvidence {
                kernels: vec!["cpp_extension.load_inline:ext".into()],
                defined: vec!["copy_kernel".into()],
                custom_ms: Some(own_ms),
                total_ms: Some(total),
                library_share: Some((total - own_ms) / total),
                library_limit: None,
                reference_ops: Some(compare(&reference, candidate)),
                reuse_limit,
                policy: "partial",
                ..KernelEvidence::default()
            }
        };
        let reused = [k(gemm, 1, 2.7), k(add, 1, 0.02), k(relu, 1, 0.02)];
        let cases: Vec<(&str, KernelEvidence, Verdict, &str)> = vec![
            (
                "the reference's ops spelled differently, then a copy kernel",
                evidence(&reused, 0.02, Some(0.5)),
                Verdict::NoKernel,
                "profile.reference_ops: the candidate's call ran every kernel launch of the reference's (3 of 3 kernel(s)), and its own kernels took 1 % of its 2.760 ms GPU time, below the partial policy's 50 %: the reference's ops did the work (sm90_xmma_gemm",
            ),
            (
                "a cuBLAS GEMM and a fused bias + ReLU epilogue of its own",
                evidence(&[k(gemm, 1, 2.7)], 0.03, Some(0.5)),
                Verdict::Pass,
                "",
            ),
            (
                "one of the reference's kernels launched fewer times",
                evidence(&[k(gemm, 1, 2.7), k(add, 1, 0.02)], 0.02, Some(0.5)),
                Verdict::Pass,
                "",
            ),
            (
                "the reference's ops and kernels of its own that take most of the time",
                evidence(&reused, 3.0, Some(0.5)),
                Verdict::Pass,
                "",
            ),
            (
                "the policy `any` judges no library use",
                evidence(&reused, 0.02, None),
                Verdict::Pass,
                "",
            ),
            (
                "below the least GPU time judged (20 µs)",
                KernelEvidence {
                    total_ms: Some(0.015),
                    ..evidence(&reused, 0.001, Some(0.5))
                },
                Verdict::Pass,
                "",
            ),
            (
                "a reference that launched no kernel",
                KernelEvidence {
                    reference_ops: Some(compare(&[], &reused)),
                    ..evidence(&reused, 0.02, Some(0.5))
                },
                Verdict::Pass,
                "",
            ),
            (
                "no reference profile (the reference's profiled call failed)",
                KernelEvidence {
                    reference_ops: None,
                    ..evidence(&reused, 0.02, Some(0.5))
                },
                Verdict::Pass,
                "",
            ),
            (
                "no kernel of its own ran, and its source names none: the rule decides",
                KernelEvidence {
                    defined: vec![],
                    ..evidence(&reused, 0.0, Some(0.5))
                },
                Verdict::NoKernel,
                "its own kernels took 0 % of its 2.740 ms GPU time",
            ),
            (
                "no kernel of its own ran, and its source names one: the earlier rule says so",
                evidence(&reused, 0.0, Some(0.5)),
                Verdict::NoKernel,
                "none of its kernels (copy_kernel) ran in the profiled call",
            ),
        ];
        for (what, evidence, verdict, reason) in cases {
            let (v, r) = judge_kernels(&evidence);
            assert_eq!(v, verdict, "{what}: {r}");
            assert!(r.contains(reason), "{what}: {r:?} lacks {reason:?}");
        }
    }

    #[test]
    fn running_out_of_gpu_memory_is_seen_in_either_worker_and_within_a_check() {
        let e = |kind: ErrorKind| WorkerError {
            kind,
            message: "CUDA out of memory".into(),
            fatal: false,
            traceback: None,
            drift: None,
            check: None,
        };
        assert!(Cause::Raised(e(ErrorKind::Oom)).out_of_memory());
        assert!(Cause::ReferenceError(ReferenceStep::Check, e(ErrorKind::Oom)).out_of_memory());
        let within = Cause::Within(
            "inputs.mean_shift".into(),
            Box::new(Cause::Raised(e(ErrorKind::Oom))),
        );
        assert!(within.out_of_memory());
        // The kind decides, not the words.
        assert!(!Cause::Raised(e(ErrorKind::Cuda)).out_of_memory());
        assert!(!Cause::Wrong("CUDA out of memory".into()).out_of_memory());
    }

    #[test]
    fn strings_match_serde() {
        for v in [
            Verdict::Pass,
            Verdict::NoKernel,
            Verdict::Incorrect,
            Verdict::Contract,
            Verdict::Environment,
            Verdict::CompileError,
            Verdict::RuntimeError,
            Verdict::Timeout,
            Verdict::Crashed,
            Verdict::Cheat,
            Verdict::Skipped,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
            // Every class but the two correct ones and a skip fails by default.
            assert_eq!(
                v.is_failure(),
                !matches!(v, Verdict::Pass | Verdict::NoKernel | Verdict::Skipped)
            );
        }
    }
}
