//! results.json: the run record as it is, pretty-printed.

use crate::error::{Error, Result};
use crate::record::{RunRecord, SCHEMA_VERSION};

pub fn render(record: &RunRecord) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(record)
        .map_err(|e| Error::Other(format!("serialize the run record: {e}")))
}

/// Read a record written by a run of this schema (for --resume).
pub fn parse(bytes: &[u8]) -> Result<RunRecord> {
    let record: RunRecord = serde_json::from_slice(bytes)
        .map_err(|e| Error::Other(format!("read results.json: {e}")))?;
    if record.schema_version != SCHEMA_VERSION {
        return Err(Error::Usage(format!(
            "resume: results.json has schema {}, this kbench writes {SCHEMA_VERSION}",
            record.schema_version
        )));
    }
    Ok(record)
}
