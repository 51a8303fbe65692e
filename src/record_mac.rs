//! The MAC that lets `kbench merge` take a shard's results.json as its run's own. A run whose seed
//! comes from `--seed-file` holds a key derived from that seed under a label of its own (never
//! the seed itself; never written anywhere); each time the record is written, the HMAC-SHA256 of
//! the record's exact bytes under that key is added as its last member, `record_mac`, in the same
//! atomic write (`report::write_files`), so the record and its MAC are never out of step. Whoever
//! holds the seed file can check that every byte (each evaluation's verdict, speedup and log
//! paths) is as the run wrote it; whoever does not can neither forge a MAC nor edit a record
//! without breaking it. A `--seed N` run has no such key: its seed is public.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The member that holds the MAC: the record's last, written by `seal` and nothing else.
const MEMBER: &str = "record_mac";
/// What the key is for: it keys no other MAC than a run record's.
const LABEL: &[u8] = b"kbench results.json MAC key v1";
/// The hex digits of an HMAC-SHA256.
const HEX_LEN: usize = 64;

/// The key a run's records are sealed and checked with.
#[derive(Clone)]
pub struct RecordKey([u8; 32]);

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordKey(..)")
    }
}

/// Why a record's bytes did not authenticate.
#[derive(Debug, PartialEq)]
pub enum Unsealed {
    /// The record ends in no `record_mac`: written by a run without a seed file (or by a kbench
    /// before MACs), or stripped of it.
    Missing,
    /// The MAC does not verify: the record was edited after it was written, or it was written
    /// under another seed.
    Forged,
}

impl std::fmt::Display for Unsealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unsealed::Missing => "has no MAC (no record_mac at its end)",
            Unsealed::Forged => {
                "has a MAC that does not verify: the record was edited after it was written, or \
                 written under another run's secret (another seed file)"
            }
        })
    }
}

impl RecordKey {
    /// The key of the run whose secret seed is `seed`: HMAC-SHA256 keyed by the seed over the label.
    pub fn from_seed(seed: u64) -> RecordKey {
        let mut mac = Hmac::<Sha256>::new_from_slice(&seed.to_le_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(LABEL);
        RecordKey(mac.finalize().into_bytes().into())
    }

    /// `json` (an object as `serde_json::to_vec_pretty` writes it, ending in `\n}`) with its MAC
    /// added as the last member.
    pub fn seal(&self, json: &[u8]) -> Vec<u8> {
        let open = json
            .strip_suffix(b"\n}")
            .expect("a pretty-printed JSON object ends in a closing brace on its own line");
        let mut sealed = open.to_vec();
        sealed.extend_from_slice(&suffix(&hex(&self.mac(json))));
        sealed
    }

    /// The bytes `seal` was given, when `file` is them sealed under this key.
    pub fn open(&self, file: &[u8]) -> Result<Vec<u8>, Unsealed> {
        let (json, tag) = split(file).ok_or(Unsealed::Missing)?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("any key length");
        mac.update(&json);
        mac.verify_slice(&tag).map_err(|_| Unsealed::Forged)?;
        Ok(json)
    }

    fn mac(&self, json: &[u8]) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("any key length");
        mac.update(json);
        mac.finalize().into_bytes().into()
    }
}

/// What `seal` appends: the member, then the object's closing brace.
fn suffix(hex: &str) -> Vec<u8> {
    format!(",\n  \"{MEMBER}\": \"{hex}\"\n}}").into_bytes()
}

/// A sealed file's JSON as it was before sealing, and the MAC it ends in; None unless it ends in
/// exactly the member `seal` writes.
fn split(file: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let tail_len = suffix(&"0".repeat(HEX_LEN)).len();
    let at = file.len().checked_sub(tail_len)?;
    let (open, tail) = file.split_at(at);
    let hex_at = tail_len - HEX_LEN - "\"\n}".len();
    let digits = &tail[hex_at..hex_at + HEX_LEN];
    if suffix(&String::from_utf8_lossy(digits)) != tail {
        return None;
    }
    let tag = (0..HEX_LEN)
        .step_by(2)
        .map(|i| u8::from_str_radix(std::str::from_utf8(&digits[i..i + 2]).ok()?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(([open, b"\n}"].concat(), tag))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &[u8] = b"{\n  \"verdict\": \"runtime_error\",\n  \"speedup\": 0.8\n}";

    #[test]
    fn a_sealed_record_opens_only_unchanged_and_under_its_own_key() {
        let key = RecordKey::from_seed(7);
        let sealed = key.seal(RECORD);
        let parsed: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
        assert_eq!(
            parsed["verdict"], "runtime_error",
            "still the record: {parsed}"
        );
        assert_eq!(parsed[MEMBER].as_str().map(str::len), Some(HEX_LEN));
        let edited = String::from_utf8(sealed.clone())
            .unwrap()
            .replace("runtime_error", "pass");
        let stripped = RECORD.to_vec();
        let mut appended = sealed.clone();
        appended.push(b'\n');
        // (the file, the key it is opened with, what opening it gives)
        type Case<'a> = (&'a [u8], RecordKey, Result<&'a [u8], Unsealed>);
        let cases: [Case; 6] = [
            (&sealed, RecordKey::from_seed(7), Ok(RECORD)),
            (
                edited.as_bytes(),
                RecordKey::from_seed(7),
                Err(Unsealed::Forged),
            ),
            (&sealed, RecordKey::from_seed(8), Err(Unsealed::Forged)),
            (&stripped, RecordKey::from_seed(7), Err(Unsealed::Missing)),
            (&appended, RecordKey::from_seed(7), Err(Unsealed::Missing)),
            (b"}", RecordKey::from_seed(7), Err(Unsealed::Missing)),
        ];
        for (i, (file, key, expected)) in cases.into_iter().enumerate() {
            assert_eq!(key.open(file), expected.map(<[u8]>::to_vec), "case {i}");
        }
    }

    #[test]
    fn the_key_is_the_seeds_under_a_label_never_the_seed_and_never_printed() {
        let key = RecordKey::from_seed(7);
        assert_ne!(key.0[..8], 7u64.to_le_bytes());
        assert_ne!(key.0, RecordKey::from_seed(8).0);
        assert_eq!(key.0, RecordKey::from_seed(7).0);
        assert_eq!(format!("{key:?}"), "RecordKey(..)");
    }
}
