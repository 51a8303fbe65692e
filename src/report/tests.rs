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
