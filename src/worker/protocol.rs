//! The wire format shared with `python/kbench_worker/protocol.py`: one JSON object per line,
//! each carrying the protocol version. Requests are built as JSON values by the caller;
//! replies are parsed here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const VERSION: u32 = 1;

/// An error a worker reports about the code it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerError {
    /// syntax, build, import, no_model_new, load, forward, output, cuda, oom, protocol, ...
    pub kind: String,
    pub message: String,
    #[serde(default)]
    pub fatal: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
}

/// A parsed reply: the body on success, the worker's error otherwise.
#[derive(Debug)]
pub enum Reply {
    Ok(Value),
    Err(WorkerError),
}

/// Add the version to a request.
pub fn request(mut body: Value) -> Value {
    body["v"] = VERSION.into();
    body
}

/// Parse one reply line.
pub fn parse(line: &str) -> Result<Reply, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("reply is not JSON: {e}"))?;
    if value["v"] != VERSION {
        return Err(format!(
            "reply has protocol version {}, expected {VERSION}",
            value["v"]
        ));
    }
    if value["ok"] == true {
        return Ok(Reply::Ok(value));
    }
    let error = serde_json::from_value(value["error"].clone())
        .map_err(|e| format!("malformed error reply: {e}"))?;
    Ok(Reply::Err(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies() {
        assert!(matches!(parse(r#"{"v":1,"ok":true,"x":1}"#), Ok(Reply::Ok(v)) if v["x"] == 1));
        let err = parse(r#"{"v":1,"ok":false,"error":{"kind":"oom","message":"m","fatal":true}}"#)
            .unwrap();
        assert!(matches!(err, Reply::Err(WorkerError { fatal: true, .. })));
        assert!(parse(r#"{"v":2,"ok":true}"#).is_err());
        assert!(parse("not json").is_err());
    }

    #[test]
    fn requests_carry_the_version() {
        assert_eq!(request(serde_json::json!({"cmd": "exit"}))["v"], VERSION);
    }
}
