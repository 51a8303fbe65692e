//! The verdict on one evaluation: a closed set with stable strings for CSV and JUnit.

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

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
