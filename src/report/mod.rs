//! Reports made from the run record: results.json, results.csv, junit.xml, and the console.
//! Reporters read the record; none of them runs or changes an evaluation.

pub mod console;
pub mod csv;
pub mod json;
pub mod junit;
pub mod summary;

use std::path::Path;

use crate::error::{Error, Result};
use crate::record::RunRecord;

/// Write `bytes` to `path` through a temporary file and a rename, so a reader (or a crash)
/// never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| Error::write(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::write(path, e))
}

/// Rewrite every file report in `out` from the record (cheap: a few hundred rows).
pub fn write_files(record: &RunRecord, out: &Path) -> Result<()> {
    write_atomic(&out.join("results.json"), &json::render(record)?)?;
    write_atomic(&out.join("results.csv"), &csv::render(record)?)?;
    write_atomic(&out.join("junit.xml"), junit::render(record)?.as_bytes())
}
