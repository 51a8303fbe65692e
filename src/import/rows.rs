//! Fields of a published row as the exports write them (numbers as strings, floats for whole
//! numbers, `"None"` for no code), and the rows of a JSON Lines file or JSON array.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::task::TaskId;
use crate::untrusted;

use super::tree::CORPUS_CAP;

/// The rows of a JSON Lines file (or of a JSON array), each with where it is (`line N` or
/// `row N`); a line that is not JSON is an `Err` with why.
pub fn json_rows(src: &Path) -> Result<Vec<(String, Result<Value, String>)>> {
    let bytes = untrusted::read_regular(src, CORPUS_CAP).map_err(|e| Error::read(src, e))?;
    if bytes.starts_with(b"PAR1") {
        return Err(Error::Usage(format!(
            "read {}: it is Parquet; convert it to JSON Lines first: python -c \"import pandas \
             as pd; pd.read_parquet('IN.parquet').to_json('OUT.jsonl', orient='records', \
             lines=True)\"",
            src.display()
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.trim_start().starts_with('[') {
        let rows: Vec<Value> = serde_json::from_str(&text)
            .map_err(|e| Error::Usage(format!("read {}: not a JSON array: {e}", src.display())))?;
        return Ok(rows
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("row {}", i + 1), Ok(v)))
            .collect());
    }
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let row = serde_json::from_str::<Value>(line)
                .map_err(|e| format!("not JSON: {e}"))
                .and_then(|v| {
                    if v.is_object() {
                        Ok(v)
                    } else {
                        Err("not a JSON object".into())
                    }
                });
            (format!("line {}", i + 1), row)
        })
        .collect())
}

/// A whole number: an integer, an integral float or a numeric string (exports differ).
pub fn whole(row: &Value, key: &str) -> Result<u32, String> {
    let v = &row[key];
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match (n.and_then(|n| u32::try_from(n).ok()), v) {
        (Some(n), _) => Ok(n),
        (None, Value::Null) => Err(format!("no {key}")),
        (None, _) => Err(format!("{key} is not a whole number: {v}")),
    }
}

/// The task of a row, from its level and task-number fields.
pub fn task_id(row: &Value, level: &str, number: &str) -> Result<TaskId, String> {
    let id = TaskId {
        level: whole(row, level)?,
        number: whole(row, number)?,
    };
    if id.level == 0 {
        return Err(format!("{level} is 0"));
    }
    Ok(id)
}

/// A finite number (a number or a numeric string); None when missing, null or NaN.
pub fn number(row: &Value, key: &str) -> Option<f64> {
    match &row[key] {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|f: &f64| f.is_finite())
}

/// A boolean: true/false, 1/0, or their strings in any case.
pub fn boolean(row: &Value, key: &str) -> Option<bool> {
    match &row[key] {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Source code: a non-blank string; null, `""` and `"None"` (CUDA-L1's mark) are no code.
pub fn code(row: &Value, key: &str) -> Option<String> {
    row[key]
        .as_str()
        .filter(|s| !s.trim().is_empty() && s.trim() != "None")
        .map(str::to_string)
}
