//! The run's file reports written into its folder, each in one atomic write.

use std::path::Path;

use crate::atomic_file::write as write_atomic;
use crate::error::{Error, Result};
use crate::record::RunRecord;

use super::{csv, html, json, junit, summary};

/// Rewrite every file report in `out` from the record (cheap: a few hundred rows); results.json
/// sealed with its MAC in the same write when the record has a key (`record_mac`).
pub fn write_files(record: &RunRecord, out: &Path) -> Result<()> {
    let json = json::render(record)?;
    let json = match &record.key {
        Some(key) => key.seal(&json),
        None => json,
    };
    write_atomic(&out.join("results.json"), &json)?;
    write_atomic(&out.join("results.csv"), &csv::render(record)?)?;
    write_atomic(&out.join("junit.xml"), junit::render(record)?.as_bytes())
}

/// Write summary.json: the suite aggregates and the time split (`summary::summarize_run`). Once,
/// at the end of a run: unlike the other reports it bootstraps every passing task again.
pub fn write_summary(summary: &summary::RunSummary, out: &Path) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(summary)
        .map_err(|e| Error::Other(format!("serialize the summary: {e}")))?;
    write_atomic(&out.join("summary.json"), &bytes)
}

/// Write report.html beside the run's other reports (its log links are relative to `out`).
pub fn write_html(record: &RunRecord, summary: &summary::RunSummary, out: &Path) -> Result<()> {
    let page = html::render(&[html::Run {
        record,
        summary,
        base: String::new(),
    }])?;
    write_atomic(&out.join("report.html"), page.as_bytes())
}
