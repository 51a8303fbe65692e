//! The reports' snapshots and round trips on the sample record.

use std::path::Path;

use super::*;
use crate::record::fixtures::sample_record;
use crate::record::RunRecord;

#[test]
fn csv_snapshot() {
    insta::assert_snapshot!(String::from_utf8(csv::render(&sample_record()).unwrap()).unwrap());
}

#[test]
fn json_snapshot() {
    insta::assert_snapshot!(String::from_utf8(json::render(&sample_record()).unwrap()).unwrap());
}

#[test]
fn junit_snapshot() {
    insta::assert_snapshot!(junit::render(&sample_record()).unwrap());
}

#[test]
fn summary_snapshot() {
    let record = sample_record();
    let gate = crate::gate::judge(
        &record,
        &crate::cli::GateArgs {
            min_speedup: Some(1.5),
            ..Default::default()
        },
    );
    insta::assert_snapshot!(console::final_report(
        &record,
        &summary::summarize_run(&record),
        &gate,
        Path::new("reports/run-test")
    ));
}

#[test]
fn the_summary_says_why_a_task_is_excluded_and_why_its_aggregates_show_dashes() {
    let mut record = sample_record();
    record.evaluations.truncate(1);
    let gate = crate::gate::judge(&record, &Default::default());
    let text = console::final_report(
        &record,
        &summary::summarize_run(&record),
        &gate,
        Path::new("run"),
    );
    assert!(
        text.contains("no flag counts them): level1/12_Task (identity).\n"),
        "{text}"
    );
    assert!(
        text.contains("fast_p and geomean show -: every task is excluded.\n"),
        "{text}"
    );
}

#[test]
fn summary_json_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    write_summary(&summary::summarize_run(&sample_record()), dir.path()).unwrap();
    insta::assert_snapshot!(std::fs::read_to_string(dir.path().join("summary.json")).unwrap());
}

#[test]
fn json_round_trips() {
    let record = sample_record();
    let back = RunRecord::parse(&json::render(&record).unwrap()).unwrap();
    assert_eq!(back.evaluations, record.evaluations);
    assert_eq!(back.config, record.config);
}

/// A record names its checks by the strings it always wrote; one of an older kbench may name
/// a check this one does not know, and reads and writes back unchanged (`kbench merge`,
/// `kbench report`).
#[test]
fn check_names_round_trip_known_or_not() {
    use crate::record::{Check, Outcome};
    use crate::worker::CheckName;
    let mut record = sample_record();
    let check = |name: CheckName| Check {
        name,
        outcome: Outcome::Pass,
        evidence: String::new(),
        seconds: 0.0,
        runs: 1,
    };
    record.evaluations[0].checks = vec![
        check(CheckName::OutputsIndependence),
        check(CheckName::Unknown("outputs.kept_copy".into())),
    ];
    let text = json::render(&record).unwrap();
    let written = String::from_utf8(text.clone()).unwrap();
    assert!(
        written.contains(r#""name": "outputs.independence""#),
        "{written}"
    );
    assert!(
        written.contains(r#""name": "outputs.kept_copy""#),
        "{written}"
    );
    let back = RunRecord::parse(&text).unwrap();
    assert_eq!(back.evaluations, record.evaluations);
    assert_eq!(json::render(&back).unwrap(), text);
}

/// Drift is a field of the build record; one of an older kbench has it only in its message's
/// words, reads with none, and keeps the verdict it was given (`kbench merge` and `kbench
/// report` decide nothing again).
#[test]
fn an_older_build_record_reads_without_drift_and_keeps_its_verdict() {
    use crate::verdict::Verdict;
    let mut record = sample_record();
    let eval = &mut record.evaluations[0];
    eval.verdict = Verdict::Environment;
    let build = eval.build.as_mut().unwrap();
    build.message = "environment: the installed nvcc no longer supports compute_70 (--compat raises it); extension 'x' failed to build".into();
    build.drift =
        Some("the installed nvcc no longer supports compute_70 (--compat raises it)".into());
    let text = String::from_utf8(json::render(&record).unwrap()).unwrap();
    assert!(text.contains(r#""drift": "the installed nvcc"#), "{text}");
    let mut older: serde_json::Value = serde_json::from_str(&text).unwrap();
    let removed = older["evaluations"][0]["build"]
        .as_object_mut()
        .unwrap()
        .remove("drift");
    assert!(removed.is_some());
    let back = RunRecord::parse(older.to_string().as_bytes()).unwrap();
    assert_eq!(back.evaluations[0].build.as_ref().unwrap().drift, None);
    assert_eq!(back.evaluations[0].verdict, Verdict::Environment);
}

#[test]
fn empty_csv_has_a_header() {
    let mut record = sample_record();
    record.evaluations.clear();
    let text = String::from_utf8(csv::render(&record).unwrap()).unwrap();
    assert!(text.starts_with("level,problem_id,task,submission"));
}

#[test]
fn write_files_writes_all_three() {
    let dir = tempfile::tempdir().unwrap();
    write_files(&sample_record(), dir.path()).unwrap();
    for f in ["results.json", "results.csv", "junit.xml"] {
        assert!(dir.path().join(f).metadata().unwrap().len() > 0, "{f}");
    }
}

#[test]
fn results_json_is_sealed_in_the_same_write_when_the_run_has_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = crate::record_mac::RecordKey::from_seed(7);
    let mut record = sample_record();
    record.key = Some(key.clone());
    write_files(&record, dir.path()).unwrap();
    let written = std::fs::read(dir.path().join("results.json")).unwrap();
    let json = key.open(&written).unwrap();
    assert_eq!(json, json::render(&record).unwrap());
    let read = RunRecord::parse(&written).unwrap();
    assert_eq!(read.evaluations, record.evaluations);
    assert!(read.key.is_none(), "the key is never written");
    record.key = None;
    write_files(&record, dir.path()).unwrap();
    let unsealed = std::fs::read(dir.path().join("results.json")).unwrap();
    assert!(key.open(&unsealed).is_err());
}
