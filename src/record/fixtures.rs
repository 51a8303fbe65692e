//! The crate's sample run record for tests of what reads a record (the reports, the published
//! comparison, the service's replies): one evaluation of each verdict that matters to the
//! reports, and the cases of the suite aggregates.
#![cfg(test)]

use crate::record::{
    Arm, Build, BuildStatus, Environment, Evaluation, RecordedConfig, RunRecord, Timing, Trial,
};
use crate::submission::Unmatched;
use crate::task::TaskId;
use crate::verdict::Verdict;

fn evaluation(
    number: u32,
    file: &str,
    verdict: Verdict,
    reason: &str,
    timed: Option<(f64, f64)>,
) -> Evaluation {
    let arm = |ms: f64| Arm {
        samples_ms: vec![ms, ms * 1.01, ms * 0.99],
        rounds: vec![0, 0, 1],
        median_ms: ms,
        ..Arm::default()
    };
    Evaluation {
        task: TaskId {
            level: if number > 100 { 2 } else { 1 },
            number: number % 100,
        },
        task_name: format!("{}_Task", number % 100),
        file: file.into(),
        sample: None,
        sha256: "ab".repeat(32),
        verdict,
        reason: reason.into(),
        build: Some(Build {
            status: if verdict == Verdict::CompileError {
                BuildStatus::Failed
            } else {
                BuildStatus::Ok
            },
            message: String::new(),
            log: format!("logs/{file}.build.log"),
            seconds: 1.5,
            cache_hit: verdict == Verdict::NoKernel,
            kernels: vec!["cpp_extension.load_inline:relu".into()],
            artifacts_sha256: String::new(),
            warmed: String::new(),
            warm_note: String::new(),
            pool_compiled: Vec::new(),
            slot_compiled: None,
            cache_note: String::new(),
            compat: Vec::new(),
            drift: None,
            drift_rewritten: None,
        }),
        findings: vec![],
        trials: vec![Trial {
            index: 0,
            correct: verdict.is_correct(),
            uncheckable: false,
            reason: reason.into(),
            max_abs_diff: Some(0.0),
            max_rel_diff: Some(0.0),
            kernelbench_correct: None,
            kernelbench_needed: None,
        }],
        // The incorrect row is one KernelBench's rule passes: kbench is the stricter.
        kernelbench_correct: match verdict {
            Verdict::CompileError | Verdict::Skipped => None,
            Verdict::Timeout => Some(false),
            _ => Some(true),
        },
        kernelbench_needed: None,
        checks: vec![],
        task_flags: vec![],
        timing: timed.map(|(r, c)| {
            // kbench's own constructor, with round numbers where the snapshots read them.
            let mut t =
                crate::timing::summarize("cpu_perf_counter".into(), arm(r), arm(c), 1, 0.01);
            (t.speedup, t.speedup_ci_low, t.speedup_ci_high) = (r / c, r / c * 0.95, r / c * 1.05);
            t.label = crate::stats::decide(t.speedup_ci_low, t.speedup_ci_high, 0.01);
            t.hodges_lehmann = None;
            // Mann-Whitney would be sure with real samples: the ratios are far from 1
            t.p_faster = Some(if r > c { 0.001 } else { 0.5 });
            t.mean_ratio = r / c;
            t.warnings = vec![];
            t.stopped = "precision".into();
            t.ci_half_width = 0.05;
            t
        }),
        profile: None,
        ncu: None,
        logs: vec![],
        phases: super::Phases {
            worker_startup_s: Some(3.0),
            load_s: 0.5,
            correctness_s: f64::from(number % 100) / 100.0,
            timing_s: if timed.is_some() { 1.0 } else { 0.0 },
            gpu_wait_s: 0.25,
            warmup_s: if timed.is_some() { 0.4 } else { 0.0 },
            after_timing_s: if timed.is_some() { 0.3 } else { 0.0 },
            ..Default::default()
        },
        seconds: 2.25,
        sandbox: String::new(),
        served: None,
    }
}

fn flagged(mut e: Evaluation, flag: &str) -> Evaluation {
    e.task_flags = vec![flag.into()];
    e
}

/// With the speed-of-light columns filled in: T_SOL 0.5 ms.
fn at_sol(mut e: Evaluation) -> Evaluation {
    let t = e.timing.as_mut().expect("timed");
    t.sol_ms = Some(0.5);
    t.percent_sol = Some(50.0);
    t.reference_percent_sol = Some(25.0);
    e
}

/// The sample record's evaluation of the file whose name ends with `end`.
pub fn sample_evaluation(end: &str) -> Evaluation {
    sample_record()
        .evaluations
        .into_iter()
        .find(|e| e.file.ends_with(end))
        .expect("in the sample record")
}

/// The timing of the sample record's passing "honest.py" file, for tests that alter it.
pub fn honest_timing(record: &mut RunRecord) -> &mut Timing {
    record
        .evaluations
        .iter_mut()
        .find(|e| e.file.ends_with("honest.py"))
        .and_then(|e| e.timing.as_mut())
        .expect("the sample record has a timed honest.py")
}

/// One evaluation of each verdict that matters to the reports, and the cases of the suite
/// aggregates: a task with several files (level1/19), a degenerate task (level1/12).
pub fn sample_record() -> RunRecord {
    RunRecord {
        schema_version: super::SCHEMA_VERSION,
        kbench_version: "0.0.0-test".into(),
        run_id: "run-test".into(),
        started_at: "2026-01-01T00:00:00+00:00".into(),
        environment: Environment {
            os: "linux x86_64".into(),
            torch: Some("2.11.0".into()),
            ..Environment::default()
        },
        config: RecordedConfig {
            tasks: "bundled".into(),
            device: "cpu".into(),
            precision: "fp32".into(),
            atol: 1e-4,
            rtol: 1e-4,
            trials: 1,
            ci_target: 0.01,
            max_samples: 3,
            budget_s: 10.0,
            mode: "offline".into(),
            seed: Some(42),
            seed_sha256: None,
            library_policy: "partial".into(),
            compile_baseline: false,
            process_check_always: false,
            compat: false,
            contract: Default::default(),
            overrides: serde_json::json!({"scale": "small", "set": {}}),
            kernelbench_tolerance: Some(1e-4),
            kernelbench_eval: false,
            sanitize: false,
            profile: None,
        },
        evaluations: vec![
            flagged(
                evaluation(12, "level1/12_Diag.py", Verdict::Pass, "", Some((2.0, 0.8))),
                "identity",
            ),
            at_sol(evaluation(
                19,
                "level1/19_ReLU/honest.py",
                Verdict::Pass,
                "",
                Some((2.0, 1.0)),
            )),
            evaluation(
                19,
                "level1/19_ReLU/tiled.py",
                Verdict::Pass,
                "",
                Some((2.0, 1.6)),
            ),
            evaluation(
                19,
                "level1/19_ReLU/wrong, \"quoted\".py",
                Verdict::Incorrect,
                "trial 0: output 0 differs",
                None,
            ),
            evaluation(
                23,
                "level1/23_Softmax.py",
                Verdict::Timeout,
                "no reply within 10 s",
                None,
            ),
            evaluation(105, "level2/5_Conv.py", Verdict::Pass, "", Some((1.6, 1.0))),
            evaluation(
                176,
                "level2/76_Gemm.py",
                Verdict::NoKernel,
                "pure PyTorch",
                Some((1.0, 1.0)),
            ),
            evaluation(
                177,
                "level2/77_X.py",
                Verdict::Skipped,
                "the reference does not fit",
                None,
            ),
        ],
        unmatched: vec![Unmatched {
            file: "notes.py".into(),
            why: "not in a levelN/ folder".into(),
        }],
        published: None,
        command: vec!["kbench".into(), "eval".into(), "submissions/".into()],
        shard: None,
        unauthenticated: false,
        instance: None,
        key: None,
    }
}
