//! The verdict on one evaluation: a closed set with stable strings for CSV and JUnit, the verdict
//! of a worker's error or silence, and the judgement of a correct submission's kernels
//! (`judge_kernels`).

use serde::{Deserialize, Serialize};

use crate::worker::{ErrorKind, Failure, WorkerError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Correct, with a custom kernel; the timing says how fast.
    Pass,
    /// Correct, but pure PyTorch: no compiled or JIT kernel of its own.
    NoKernel,
    /// Wrong values, shape or dtype, NaN, or inputs modified.
    Incorrect,
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

/// The verdict for an error the candidate's code raised.
pub fn of_worker_error(error: &WorkerError) -> Verdict {
    match error.kind {
        ErrorKind::Syntax | ErrorKind::Build => Verdict::CompileError,
        ErrorKind::Output => Verdict::Incorrect,
        ErrorKind::Cheat => Verdict::Cheat,
        _ => Verdict::RuntimeError,
    }
}

/// The verdict when the candidate worker gave no reply.
pub fn of_failure(failure: &Failure) -> Verdict {
    match failure {
        Failure::Timeout(_) => Verdict::Timeout,
        Failure::Protocol(why) if why.starts_with(crate::worker::protocol::FORGED) => {
            Verdict::Cheat
        }
        Failure::Exited(_) | Failure::Protocol(_) => Verdict::Crashed,
    }
}

/// The trusted worker died or stopped answering while a candidate ran: the candidate may have
/// killed it, so it fails; a skip would let it through the gate. A line in its reply pipe
/// without its key can only be the candidate's: `cheat`.
pub fn of_reference_death(failure: &Failure) -> (Verdict, String) {
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

/// An extension build that raised inside the submission (which may have caught it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildFailure {
    pub extension: String,
    /// Where the submission was: `import`, `__init__` or `forward`.
    pub phase: String,
    /// One line: `extension 'x' failed to build: <first compiler error>`.
    pub cause: String,
}

/// What the candidate worker saw of a correct submission's kernels, and the profile of one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelEvidence {
    /// Extensions and JIT kernels it loaded (`cpp_extension.load_inline:name`, `triton:fn`).
    pub kernels: Vec<String>,
    pub build_failures: Vec<BuildFailure>,
    /// Kernel names its source defines (`__global__`, `@triton.jit`).
    pub defined: Vec<String>,
    /// From the profiled call (GPU only): device ms in its own kernels, and in all kernels.
    pub custom_ms: Option<f64>,
    pub total_ms: Option<f64>,
    /// Share of GPU time in library kernels, and the most the run's policy allows on this task.
    pub library_share: Option<f64>,
    pub library_limit: Option<f64>,
    pub policy: &'static str,
    /// `kernels.mapped`'s evidence when none of the reported kernels' files is loaded in the
    /// worker (read from outside it): the report is not believed.
    pub unmapped: Option<String>,
}

/// `Pass`, or `NoKernel` with why: no kernel at all (saying which build failed and was caught),
/// kernels built that never ran in the profiled call, or library kernels above the policy.
pub fn judge_kernels(k: &KernelEvidence) -> (Verdict, String) {
    let no_kernel = |why: String| (Verdict::NoKernel, why);
    if k.kernels.is_empty() {
        return no_kernel(match k.build_failures.first() {
            Some(f) => format!(
                "{} (in {}), and the module fell back to PyTorch",
                f.cause, f.phase
            ),
            None => "correct, but no custom kernel (pure PyTorch)".into(),
        });
    }
    if let Some(evidence) = &k.unmapped {
        return no_kernel(format!("kernels.mapped: {evidence}"));
    }
    let ran_nothing = k.custom_ms == Some(0.0) && k.total_ms.is_some_and(|t| t > 0.0);
    if ran_nothing && !k.defined.is_empty() {
        return no_kernel(format!(
            "built {} but none of its kernels ({}) ran in the profiled call: the module computed with PyTorch",
            k.kernels.join(", "),
            k.defined.join(", ")
        ));
    }
    match (k.library_share, k.library_limit) {
        (Some(share), Some(limit)) if share > limit => no_kernel(format!(
            "profile.library_share: {:.0} % of GPU time is in library kernels (cuBLAS, cuDNN, ATen), above the {} policy's {:.0} %",
            share * 100.0,
            k.policy,
            limit * 100.0
        )),
        _ => (Verdict::Pass, String::new()),
    }
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
        };
        assert_eq!(
            of_worker_error(&e(ErrorKind::Syntax)),
            Verdict::CompileError
        );
        assert_eq!(of_worker_error(&e(ErrorKind::Build)), Verdict::CompileError);
        assert_eq!(of_worker_error(&e(ErrorKind::Output)), Verdict::Incorrect);
        assert_eq!(of_worker_error(&e(ErrorKind::Cheat)), Verdict::Cheat);
        assert_eq!(of_worker_error(&e(ErrorKind::Cuda)), Verdict::RuntimeError);
        assert_eq!(
            of_failure(&Failure::Timeout(std::time::Duration::from_secs(1))),
            Verdict::Timeout
        );
        assert_eq!(
            of_failure(&Failure::Exited("signal 11".into())),
            Verdict::Crashed
        );
        let forged = format!("{}: no nonce", crate::worker::protocol::FORGED);
        assert_eq!(of_failure(&Failure::Protocol(forged)), Verdict::Cheat);
    }

    #[test]
    fn kernels_are_judged_from_what_was_built_and_what_ran() {
        let failure = BuildFailure {
            extension: "ext".into(),
            phase: "__init__".into(),
            cause: "extension 'ext' failed to build: nvcc fatal : Unsupported gpu architecture 'compute_70'".into(),
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
        ];
        for (evidence, verdict, reason) in cases {
            let (v, r) = judge_kernels(&evidence);
            assert_eq!(v, verdict, "{evidence:?}: {r}");
            assert!(r.contains(reason), "{r:?} lacks {reason:?}");
        }
    }

    #[test]
    fn strings_match_serde() {
        for v in [
            Verdict::Pass,
            Verdict::NoKernel,
            Verdict::Incorrect,
            Verdict::CompileError,
            Verdict::RuntimeError,
            Verdict::Timeout,
            Verdict::Crashed,
            Verdict::Cheat,
            Verdict::Skipped,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
