//! The answer to an evaluation request: the verdict, its class (how the gate treats it), its
//! reason, KernelBench's own verdict, the speedup with its interval, the checks, the timings,
//! where the result was recorded, and the whole evaluation as the record holds it.

use std::path::Path;

use serde_json::{json, Value};

use crate::record::{ContractRule, Evaluation};
use crate::verdict::Verdict;

/// How the gate of a run under `contract` treats `verdict`: `correct` (passes), `failed`
/// (fails it), `warned` (a `contract` verdict under `--contract kernelbench`) or `skipped`.
pub fn class(verdict: Verdict, contract: ContractRule) -> &'static str {
    if verdict == Verdict::Contract && contract == ContractRule::Kernelbench {
        "warned"
    } else if verdict.is_correct() {
        "correct"
    } else if verdict.is_failure() {
        "failed"
    } else {
        "skipped"
    }
}

/// The reply to the request `eval` answers, recorded in `record` under a run of `contract`.
pub fn render(eval: &Evaluation, contract: ContractRule, record: &Path) -> Value {
    let timing = eval.timing.as_ref().filter(|t| t.counts());
    json!({
        "task": eval.label(),
        "file": eval.file,
        "sha256": eval.sha256,
        "verdict": eval.verdict,
        "class": class(eval.verdict, contract),
        "reason": eval.reason,
        "kernelbench_correct": eval.kernelbench_correct,
        "speedup": timing.map(|t| t.speedup),
        "interval": timing.map(|t| [t.speedup_ci_low, t.speedup_ci_high]),
        "label": timing.map(|t| t.label),
        "checks": eval.checks,
        "timings": {
            "seconds": eval.seconds,
            "build_s": eval.build.as_ref().map(|b| b.seconds),
            "build_cached": eval.build.as_ref().map(|b| b.cache_hit),
            "phases": eval.phases,
        },
        "record": record,
        "evaluation": eval,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_evaluation;

    #[test]
    fn the_class_follows_the_gate() {
        for (verdict, contract, expected) in [
            (Verdict::Pass, ContractRule::Kbench, "correct"),
            (Verdict::NoKernel, ContractRule::Kbench, "correct"),
            (Verdict::Incorrect, ContractRule::Kbench, "failed"),
            (Verdict::Timeout, ContractRule::Kernelbench, "failed"),
            (Verdict::Contract, ContractRule::Kbench, "failed"),
            (Verdict::Contract, ContractRule::Kernelbench, "warned"),
            (Verdict::Skipped, ContractRule::Kbench, "skipped"),
        ] {
            assert_eq!(class(verdict, contract), expected, "{verdict}");
        }
    }

    #[test]
    fn a_timed_result_carries_its_speedup_and_an_untimed_one_none() {
        for (end, timed) in [("honest.py", true), ("23_Softmax.py", false)] {
            let eval = sample_evaluation(end);
            let reply = render(&eval, ContractRule::Kbench, Path::new("results.json"));
            assert_eq!(reply["verdict"], json!(eval.verdict), "{end}");
            assert_eq!(reply["speedup"].is_number(), timed, "{end}");
            assert_eq!(reply["interval"].is_array(), timed, "{end}");
            assert_eq!(reply["evaluation"]["file"], json!(eval.file));
        }
    }
}
