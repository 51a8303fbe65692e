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

/// A fresh unpredictable token for one request (`harness.result_channel_auth`): the reply must
/// echo it, so a line a submission writes blindly into the worker's reply pipe is not taken
/// for the worker's reply.
pub fn nonce() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Add the version and the request's nonce.
pub fn request(mut body: Value, nonce: &str) -> Value {
    body["v"] = VERSION.into();
    body["nonce"] = nonce.into();
    body
}

/// The prefix of the protocol failure for a reply that does not echo its request's nonce.
pub const FORGED: &str = "harness.result_channel_auth";

/// Parse one reply line to the request that carried `nonce`.
pub fn parse(line: &str, nonce: &str) -> Result<Reply, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("reply is not JSON: {e}"))?;
    if value["v"] != VERSION {
        return Err(format!(
            "reply has protocol version {}, expected {VERSION}",
            value["v"]
        ));
    }
    if value["nonce"] != nonce {
        return Err(format!(
            "{FORGED}: a reply line without the request's nonce (something other than the worker wrote to its reply pipe)"
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
        let n = "ab12";
        assert!(
            matches!(parse(r#"{"v":1,"nonce":"ab12","ok":true,"x":1}"#, n), Ok(Reply::Ok(v)) if v["x"] == 1)
        );
        let err = parse(
            r#"{"v":1,"nonce":"ab12","ok":false,"error":{"kind":"oom","message":"m","fatal":true}}"#,
            n,
        )
        .unwrap();
        assert!(matches!(err, Reply::Err(WorkerError { fatal: true, .. })));
        assert!(parse(r#"{"v":2,"nonce":"ab12","ok":true}"#, n).is_err());
        assert!(parse("not json", n).is_err());
    }

    #[test]
    fn a_reply_without_the_nonce_is_forged() {
        for line in [
            r#"{"v":1,"ok":true}"#,
            r#"{"v":1,"nonce":"other","ok":true}"#,
        ] {
            let why = parse(line, "ab12").unwrap_err();
            assert!(why.starts_with(FORGED), "{why}");
        }
    }

    #[test]
    fn requests_carry_the_version_and_a_fresh_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let r = request(serde_json::json!({"cmd": "exit"}), &a);
        assert_eq!(r["v"], VERSION);
        assert_eq!(r["nonce"], a.as_str());
    }
}
