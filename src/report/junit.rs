//! junit.xml for CI systems: a suite per level, a test case per evaluation; failures are the
//! verdicts and the invalid timings that fail the gate, skipped evaluations are skipped. No
//! timestamps: the same record always gives the same file.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::error::{Error, Result};
use crate::record::RunRecord;

pub fn render(record: &RunRecord) -> Result<String> {
    let mut report = Report::new("kbench");
    let mut levels: Vec<u32> = record.evaluations.iter().map(|e| e.task.level).collect();
    levels.dedup();
    levels.sort();
    levels.dedup();
    for level in levels {
        let mut suite = TestSuite::new(format!("level{level}"));
        for e in record.evaluations.iter().filter(|e| e.task.level == level) {
            let invalid = e.timing.as_ref().filter(|t| t.invalid);
            let mut status = if e.verdict.is_failure() || invalid.is_some() {
                TestCaseStatus::non_success(NonSuccessKind::Failure)
            } else if e.verdict.is_correct() {
                TestCaseStatus::success()
            } else {
                TestCaseStatus::skipped()
            };
            if let Some(t) = invalid.filter(|_| e.verdict.is_correct()) {
                let why = t.warnings.iter().find(|w| w.contains("speed of light"));
                status
                    .set_type("invalid_timing")
                    .set_message(why.map_or("timing invalid", String::as_str));
            } else if !e.verdict.is_correct() {
                status
                    .set_type(e.verdict.as_str())
                    .set_message(e.reason.as_str());
            }
            let mut case = TestCase::new(e.file.as_str(), status);
            case.set_classname(e.label())
                .set_time(Duration::from_secs_f64(e.seconds));
            if let Some(t) = &e.timing {
                let sol = t
                    .percent_sol
                    .map(|p| format!("; {p:.0}% SOL"))
                    .unwrap_or_default();
                case.set_system_out(format!(
                    "verdict {}; speedup {:.3} (95% CI {:.3}-{:.3}); reference {:.4} ms, kernel {:.4} ms{sol}",
                    e.verdict, t.speedup, t.speedup_ci_low, t.speedup_ci_high, t.reference.median_ms, t.candidate.median_ms
                ));
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .map_err(|e| Error::Other(format!("write JUnit: {e}")))
}
