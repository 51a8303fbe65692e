//! results.json: the run record as it is, pretty-printed (`RunRecord::parse` reads it back).

use crate::error::{Error, Result};
use crate::record::RunRecord;

pub fn render(record: &RunRecord) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(record)
        .map_err(|e| Error::Other(format!("serialize the run record: {e}")))
}
