//! The wire format shared with `python/kbench_worker/wire/protocol.py`: one JSON object per line,
//! each carrying the protocol version. Requests are typed in `request`, each with its reply's
//! struct (each worker role answers from its table of commands, `commands()` in its module; a
//! pytest checks them against what kbench sends and reads); replies are parsed here. Before any request a worker gets a key of its own (`key_line`); every
//! reply line is `<HMAC-SHA256 of the JSON under that key, hex> <JSON>`, so a line written into a
//! trusted worker's reply pipe by anything without its key is refused.

use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use super::check_name::CheckName;
use super::request::Request;

pub const VERSION: u32 = 1;

/// What a worker's error is about: `kind` on the wire, as `wire/protocol.py`'s `error()` and
/// `wire/errors.py`'s `classify` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The submission does not parse.
    Syntax,
    /// An extension build failed.
    Build,
    /// Importing the submission raised (not a build).
    Import,
    NoModelNew,
    /// The candidate's load (import, constructor) raised.
    Load,
    /// The candidate's forward raised.
    Forward,
    /// The outputs are of the wrong type, or a runtime check proved them wrong.
    Output,
    /// A CUDA error: the worker is not reused.
    Cuda,
    Oom,
    /// Outputs could not cross between the workers (CUDA IPC or the file).
    Transfer,
    /// A runtime check caught the submission cheating.
    Cheat,
    /// A runtime check found the module breaking kbench's module contract (outside a trial,
    /// whose comparison decides first: `Shipped::contract`).
    Contract,
    /// A request the worker does not understand.
    Protocol,
    /// The trusted reference worker's own code raised.
    Reference,
    /// The static checker, the task inspector, the probe or the roofline measurement failed.
    Check,
    Inspect,
    Probe,
    Ceilings,
    /// A kind this kbench does not know (a worker of another version): a runtime error.
    #[serde(other)]
    Other,
}

/// An error a worker reports about the code it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WorkerError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default)]
    pub fatal: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
    /// A build that failed on known toolchain drift: what of the toolchain moved (the worker's
    /// `cause.drifted`), which makes it `environment`'s, not the kernel's. The message says it
    /// too, for people; the verdict reads this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// The runtime check whose finding the error is (wrong outputs a check proved), where one
    /// ran it: the message names it too, for people; kbench reads this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckName>,
}

/// A parsed reply: the body on success (JSON, or a command's typed reply), the worker's error
/// otherwise.
#[derive(Debug)]
pub enum Reply<T = Value> {
    Ok(T),
    Err(WorkerError),
}

impl Reply {
    /// The body read as the reply of the command `cmd`: one that does not fit is a protocol
    /// failure.
    pub fn read<T: DeserializeOwned>(self, cmd: &str) -> Result<Reply<T>, String> {
        match self {
            Reply::Ok(v) => serde_json::from_value(v)
                .map(Reply::Ok)
                .map_err(|e| format!("malformed {cmd} reply: {e}")),
            Reply::Err(e) => Ok(Reply::Err(e)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `n` fresh unpredictable bytes, as hex.
fn random_hex(n: usize) -> String {
    use rand::RngCore;
    let mut bytes = vec![0u8; n];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex(&bytes)
}

/// A fresh unpredictable token for one request (`harness.result_channel_auth`): the reply must
/// echo it, so a line a submission writes blindly into the worker's reply pipe is not taken
/// for the worker's reply.
pub fn nonce() -> String {
    random_hex(16)
}

/// A fresh key for one worker's replies (hex). Only kbench and the worker hold it: it travels
/// on the request pipe, never in the environment or on the command line.
pub fn key() -> String {
    random_hex(32)
}

/// The first line a worker reads: its reply key.
pub fn key_line(key: &str) -> String {
    serde_json::json!({"v": VERSION, "key": key}).to_string() + "\n"
}

/// HMAC-SHA256 under a worker's key (its hex text as the key bytes, as the worker uses it).
fn mac(key: &str) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes a key of any length")
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A request's line (without its newline): its fields, the version and the request's nonce.
pub fn request(body: &Request, nonce: &str) -> String {
    let mut line = serde_json::to_value(body).expect("requests serialize to a JSON object");
    line["v"] = VERSION.into();
    line["nonce"] = nonce.into();
    line.to_string()
}

/// The check a forged reply fails, named at the start of its reason.
pub const FORGED: CheckName = CheckName::HarnessResultChannelAuth;

/// Why a reply line was not taken.
#[derive(Debug, PartialEq)]
pub enum Unread {
    /// The worker did not write it: not signed with its key, or without the request's nonce.
    Forged(String),
    /// The worker wrote it, but it is not the protocol.
    Malformed(String),
}

/// Parse one reply line, signed with `key`, to the request that carried `nonce`.
pub fn parse(line: &str, nonce: &str, key: &str) -> Result<Reply, Unread> {
    let line = line.trim_end_matches('\n');
    let signed = line.split_once(' ').and_then(|(tag, json)| {
        let mut m = mac(key);
        m.update(json.as_bytes());
        m.verify_slice(&unhex(tag)?).ok().map(|()| json)
    });
    let Some(json) = signed else {
        return Err(Unread::Forged(format!(
            "{FORGED}: a reply line not signed with the worker's key (something other than the worker wrote to its reply pipe)"
        )));
    };
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Unread::Malformed(format!("reply is not JSON: {e}")))?;
    if value["v"] != VERSION {
        return Err(Unread::Malformed(format!(
            "reply has protocol version {}, expected {VERSION}",
            value["v"]
        )));
    }
    if value["nonce"] != nonce {
        return Err(Unread::Forged(format!(
            "{FORGED}: a reply line without the request's nonce (something other than the worker wrote to its reply pipe)"
        )));
    }
    if value["ok"] == true {
        return Ok(Reply::Ok(value));
    }
    let error = serde_json::from_value(value["error"].clone())
        .map_err(|e| Unread::Malformed(format!("malformed error reply: {e}")))?;
    Ok(Reply::Err(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0f1e2d3c";

    /// Every error kind the Python workers write (`error("kind", ...)`, `classify(exc, "phase")`,
    /// `kind="..."`) is one `ErrorKind` knows: none reads as `Other`.
    #[test]
    fn kbench_knows_every_error_kind_the_workers_write() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/worker/python/kbench_worker");
        let mut kinds = Vec::new();
        let mut dirs = vec![dir];
        let mut sources = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "py") {
                    sources.push(std::fs::read_to_string(path).unwrap());
                }
            }
        }
        for source in sources {
            for marker in ["error(\"", "classify(exc, \"", "kind=\""] {
                for (at, _) in source.match_indices(marker) {
                    let rest = &source[at + marker.len()..];
                    kinds.push(rest[..rest.find('"').unwrap()].to_string());
                }
            }
        }
        assert!(kinds.len() > 15, "{kinds:?}");
        for kind in kinds {
            let parsed: ErrorKind = serde_json::from_value(serde_json::json!(kind)).unwrap();
            assert_ne!(parsed, ErrorKind::Other, "the workers write kind {kind:?}");
        }
        let unknown: ErrorKind = serde_json::from_value(serde_json::json!("newer")).unwrap();
        assert_eq!(unknown, ErrorKind::Other);
    }

    /// A reply line as the worker writes it (kbench_worker/wire/protocol.py).
    fn signed(json: &str, key: &str) -> String {
        let mut m = mac(key);
        m.update(json.as_bytes());
        format!("{} {json}\n", hex(&m.finalize().into_bytes()))
    }

    #[test]
    fn parses_replies() {
        let n = "ab12";
        let p = |json: &str| parse(&signed(json, KEY), n, KEY);
        assert!(
            matches!(p(r#"{"v":1,"nonce":"ab12","ok":true,"x":1}"#), Ok(Reply::Ok(v)) if v["x"] == 1)
        );
        let err = p(
            r#"{"v":1,"nonce":"ab12","ok":false,"error":{"kind":"oom","message":"m","fatal":true}}"#,
        )
        .unwrap();
        assert!(matches!(
            err,
            Reply::Err(WorkerError {
                kind: ErrorKind::Oom,
                fatal: true,
                ..
            })
        ));
        assert!(p(r#"{"v":2,"nonce":"ab12","ok":true}"#).is_err());
        assert!(p("not json").is_err());
    }

    /// A body read as its command's reply: the fields it has, or a protocol failure naming the
    /// command; an error reply stays one.
    #[test]
    fn reads_bodies_as_their_commands_replies() {
        #[derive(Debug, Deserialize)]
        struct Timed {
            samples_ms: Vec<f64>,
        }
        let n = "ab12";
        let p = |json: &str| parse(&signed(json, KEY), n, KEY).unwrap();
        let ok = p(r#"{"v":1,"nonce":"ab12","ok":true,"samples_ms":[0.5]}"#);
        assert!(matches!(ok.read::<Timed>("time"), Ok(Reply::Ok(t)) if t.samples_ms == [0.5]));
        let bad = p(r#"{"v":1,"nonce":"ab12","ok":true,"samples_ms":"fast"}"#);
        let why = bad.read::<Timed>("time").unwrap_err();
        assert!(why.starts_with("malformed time reply: "), "{why}");
        let err = p(r#"{"v":1,"nonce":"ab12","ok":false,"error":{"kind":"oom","message":"m"}}"#);
        assert!(matches!(err.read::<Timed>("time"), Ok(Reply::Err(e)) if e.kind == ErrorKind::Oom));
    }

    #[test]
    fn a_reply_without_the_nonce_is_forged() {
        for line in [
            r#"{"v":1,"ok":true}"#,
            r#"{"v":1,"nonce":"other","ok":true}"#,
        ] {
            let failure = parse(&signed(line, KEY), "ab12", KEY).unwrap_err();
            assert!(
                matches!(&failure, Unread::Forged(why) if why.starts_with(FORGED.as_str())),
                "{failure:?}"
            );
        }
    }

    /// The right nonce is not enough: a line unsigned, signed with another key, or altered after
    /// signing is refused.
    #[test]
    fn a_reply_without_the_key_is_forged() {
        let json = r#"{"v":1,"nonce":"ab12","ok":true,"correct":true}"#;
        let good = signed(json, KEY);
        let altered = good.replace("true}", "false}");
        for line in [
            format!("{json}\n"),
            signed(json, "another key"),
            altered,
            format!("zz {json}\n"),
        ] {
            let failure = parse(&line, "ab12", KEY).unwrap_err();
            assert!(
                matches!(&failure, Unread::Forged(why) if why.starts_with(FORGED.as_str())),
                "{line}: {failure:?}"
            );
        }
        assert!(parse(&good, "ab12", KEY).is_ok());
    }

    #[test]
    fn keys_are_fresh_and_travel_as_json() {
        let (a, b) = (key(), key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        let line: Value = serde_json::from_str(&key_line(&a)).unwrap();
        assert_eq!(line["key"], a.as_str());
        assert_eq!(line["v"], VERSION);
    }

    #[test]
    fn requests_carry_the_version_and_a_fresh_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let r: Value =
            serde_json::from_str(&request(&Request::Exit(Default::default()), &a)).unwrap();
        assert_eq!(r["cmd"], "exit");
        assert_eq!(r["v"], VERSION);
        assert_eq!(r["nonce"], a.as_str());
    }
}
