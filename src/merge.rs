//! `kbench merge`: the run records of the shards of one run (`eval --shard I/N`), or of the
//! instances of one service run (`serve --instance NAME`, `instances`: each request once), joined
//! into one, after checking that each record is its run's (`authenticate`: the MAC under the key of
//! the run's `--seed-file` seed, `record_mac`) and that they are one run's: the same settings and
//! seed, the same submission count, each shard once and complete. A refusal says whether the
//! shards are one run's but unfinished (`Refusal::Unfinished`: later it will merge) or not (one
//! run's, all of them, authenticated) at all. The shards' logs are copied only from inside each
//! shard's folder, through no link (`copy_logs`, over `untrusted`).

use std::path::Path;

use crate::error::{Error, Result};
use crate::record::{Evaluation, RunRecord};
use crate::record_mac::{RecordKey, Unsealed};
use crate::untrusted;
use crate::verdict::Verdict;

/// The record's file in each shard's folder.
const RECORD: &str = "results.json";
/// The most a shard's record may hold: far above any run's, far below a machine's memory.
const RECORD_CAP: u64 = 1 << 30;
/// The most a log copied in may hold (workers' logs are capped at 4 MiB, `worker::streams`).
const LOG_CAP: u64 = 16 << 20;

/// Why shards were not merged.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// One run's shards, some of them not finished yet (or not started): a merge after they
    /// finish will succeed.
    Unfinished(String),
    /// Not the shards of one run, not all of them, or not authenticated as its: no later merge
    /// of these folders succeeds.
    Mismatch(String),
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        let (Refusal::Unfinished(why) | Refusal::Mismatch(why)) = refusal;
        Error::Usage(format!("merge the runs: {why}"))
    }
}

/// What merge takes a shard's record on.
pub enum Trust {
    /// `--seed-file`: the run's seed, whose key each record's MAC must verify under, and its
    /// SHA-256 (to say when a record names another seed file).
    Seed { key: RecordKey, sha256: String },
    /// `--unauthenticated`: records taken as they are (the merged record says so).
    Unauthenticated,
    /// Neither: nothing authenticates a record, so none is taken.
    Nothing,
}

impl Trust {
    /// `--seed-file`'s seed (None: `--unauthenticated` when `unauthenticated`, else neither).
    pub fn new(seed: Option<u64>, unauthenticated: bool) -> Trust {
        match seed {
            Some(seed) => Trust::Seed {
                key: RecordKey::from_seed(seed),
                sha256: crate::config::seed_sha256(seed),
            },
            None if unauthenticated => Trust::Unauthenticated,
            None => Trust::Nothing,
        }
    }
}

/// The bytes of shard `name`'s record (`file`, results.json) that merge may read: under
/// `Trust::Seed` the record its MAC authenticates, under `Trust::Unauthenticated` the file as it
/// is. A refusal names the shard, why, and what to do.
pub fn authenticate(
    name: &str,
    file: &[u8],
    trust: &Trust,
) -> std::result::Result<Vec<u8>, Refusal> {
    let refuse = |why: String| Err(Refusal::Mismatch(format!("{name}: {why}")));
    // What the record says of its seed: unauthenticated, so it only words the refusal.
    let claimed = serde_json::from_slice::<serde_json::Value>(file).ok();
    let claim = |field: &str| claimed.as_ref().map(|r| r["config"][field].clone());
    let public_seed = claim("seed").is_some_and(|seed| seed.is_u64());
    if public_seed && !matches!(trust, Trust::Unauthenticated) {
        return refuse(
            "it ran with --seed N, a public seed, so nothing authenticates its record: run the \
             shards with --seed-file FILE and merge them with --seed-file FILE, or merge with \
             --unauthenticated to take their records unchecked"
                .into(),
        );
    }
    match trust {
        Trust::Unauthenticated => Ok(file.to_vec()),
        Trust::Nothing => refuse(
            "nothing authenticates its record: pass the seed file the shards ran with \
             (--seed-file FILE)"
                .into(),
        ),
        Trust::Seed { key, sha256 } => key.open(file).or_else(|why| {
            let other = claim("seed_sha256")
                .and_then(|c| c.as_str().map(str::to_string))
                .filter(|claimed| why == Unsealed::Forged && claimed != sha256)
                .map_or(String::new(), |_| {
                    "; it names another seed file than --seed-file's (seed_sha256 differs)".into()
                });
            refuse(format!("its {RECORD} {why}{other}"))
        }),
    }
}

/// The run records of all shards of one run joined into one; refuses anything else. The merged
/// record's `run_id` and `command` are the merge's own.
pub fn merge(
    records: Vec<(String, RunRecord)>,
    run_id: String,
    command: Vec<String>,
) -> std::result::Result<RunRecord, Refusal> {
    let mismatch = |why: String| Err(Refusal::Mismatch(why));
    let Some((first_name, first)) = records.first() else {
        return mismatch("no run given".into());
    };
    if records.iter().any(|(_, r)| r.instance.is_some()) {
        return instances(records, run_id, command);
    }
    let Some(base) = first.shard else {
        return mismatch(format!(
            "{first_name} is not a shard (run with --shard I/N)"
        ));
    };
    if first.config.seed.is_none() && first.config.seed_sha256.is_none() {
        return mismatch(format!(
            "{first_name} drew a secret seed of its own; shards of one run need --seed or --seed-file"
        ));
    }
    let mut seen = vec![false; base.count as usize];
    let mut unfinished = Vec::new();
    for (name, record) in &records {
        let Some(shard) = record.shard else {
            return mismatch(format!("{name} is not a shard (run with --shard I/N)"));
        };
        if shard.count != base.count || shard.total != base.total {
            return mismatch(format!(
                "{name} is shard {shard} of {} submissions, {first_name} shard {base} of {}",
                shard.total, base.total
            ));
        }
        if record.config != first.config {
            return mismatch(format!(
                "{name} ran with other settings or another seed than {first_name}: {}",
                record.config.differences(&first.config).join(", ")
            ));
        }
        if record.schema_version != first.schema_version {
            return mismatch(format!(
                "{name} has another record schema than {first_name}"
            ));
        }
        if std::mem::replace(&mut seen[shard.index as usize], true) {
            return mismatch(format!("shard {shard} is given twice ({name})"));
        }
        if record.evaluations.len() != shard.selected {
            unfinished.push(format!(
                "{name} (shard {shard}) holds {} of its {} evaluations: finish it with --resume",
                record.evaluations.len(),
                shard.selected
            ));
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return mismatch(format!("shard {missing}/{} is missing", base.count));
    }
    if !unfinished.is_empty() {
        return Err(Refusal::Unfinished(unfinished.join("; ")));
    }
    let mut merged = joined(&records, run_id, command);
    merged.evaluations = records
        .iter()
        .flat_map(|(_, r)| r.evaluations.iter().cloned())
        .collect();
    merged
        .evaluations
        .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
    Ok(merged)
}

/// The records of a service's instances (`serve --instance`) joined into one run: one run's
/// (the same settings and seed, each instance once), each request once. A request judged by
/// two instances (the second asked after the first was lost) keeps one result: a judged one
/// over one left unfinished, then the first instance's by name (`repeated_requests` names
/// them).
fn instances(
    mut records: Vec<(String, RunRecord)>,
    run_id: String,
    command: Vec<String>,
) -> std::result::Result<RunRecord, Refusal> {
    if let Some((name, _)) =
        (records.iter()).find(|(_, r)| r.instance.is_none() || r.shard.is_some())
    {
        return Err(Refusal::Mismatch(format!(
            "{name} is not an instance of a service run (serve --instance)"
        )));
    }
    records.sort_by(|(_, a), (_, b)| a.instance.cmp(&b.instance));
    let (first_name, first) = &records[0];
    if first.config.seed.is_none() && first.config.seed_sha256.is_none() {
        return Err(Refusal::Mismatch(format!(
            "{first_name} drew a secret seed of its own; instances of one run need --seed-file"
        )));
    }
    for pair in records.windows(2) {
        let ((a_name, a), (b_name, b)) = (&pair[0], &pair[1]);
        let why = match () {
            _ if a.instance == b.instance => {
                format!(
                    "instance {:?} is given twice ({a_name}, {b_name})",
                    b.instance
                )
            }
            _ if a.config != b.config => format!(
                "{b_name} ran with other settings or another seed than {a_name}: {}",
                b.config.differences(&a.config).join(", ")
            ),
            _ if a.schema_version != b.schema_version => {
                format!("{b_name} has another record schema than {a_name}")
            }
            _ => continue,
        };
        return Err(Refusal::Mismatch(why));
    }
    let mut merged = joined(&records, run_id, command);
    let mut kept: Vec<Evaluation> = Vec::new();
    let mut by_request = std::collections::HashMap::new();
    for eval in records.iter().flat_map(|(_, r)| r.evaluations.iter()) {
        let Some(request) = request(eval) else {
            kept.push(eval.clone());
            continue;
        };
        match by_request.get(&request) {
            None => {
                by_request.insert(request, kept.len());
                kept.push(eval.clone());
            }
            Some(&at) if unfinished(&kept[at]) && !unfinished(eval) => kept[at] = eval.clone(),
            Some(_) => {}
        }
    }
    kept.sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
    merged.evaluations = kept;
    Ok(merged)
}

/// The merged record's head: the first record's settings and environment, neither shard nor
/// instance, the merge's own run id and command, and the earliest start; its evaluations are
/// the caller's to join.
fn joined(records: &[(String, RunRecord)], run_id: String, command: Vec<String>) -> RunRecord {
    let mut merged = records[0].1.clone();
    merged.shard = None;
    merged.instance = None;
    merged.run_id = run_id;
    merged.command = command;
    merged.started_at = records
        .iter()
        .map(|(_, r)| r.started_at.clone())
        .min()
        .unwrap_or_default();
    merged
}

fn request_id(eval: &Evaluation) -> Option<&str> {
    eval.served.as_ref()?.id.as_deref()
}

/// What makes two rows one request: its id, task and source (one id given to two sources, by a
/// client's mistake, is two requests: both are kept, and `repeated_requests` names them).
fn request(eval: &Evaluation) -> Option<(&str, crate::task::TaskId, &str)> {
    Some((request_id(eval)?, eval.task, eval.sha256.as_str()))
}

/// A request the service stopped before it was judged (recorded as skipped).
fn unfinished(eval: &Evaluation) -> bool {
    eval.verdict == Verdict::Skipped
}

/// The request ids more than one of `records` holds, with the instances that do: the results
/// `merge` kept one of.
pub fn repeated_requests(records: &[(std::path::PathBuf, RunRecord)]) -> Vec<String> {
    type Holders<'a> = Vec<(String, &'a str)>;
    let mut holders: std::collections::BTreeMap<&str, Holders> = Default::default();
    for (_, record) in records {
        let name = record.instance.clone().unwrap_or_default();
        for eval in &record.evaluations {
            if let Some(id) = request_id(eval) {
                holders
                    .entry(id)
                    .or_default()
                    .push((name.clone(), &eval.sha256));
            }
        }
    }
    let named = |held: &Holders| {
        held.iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" and ")
    };
    holders
        .into_iter()
        .filter(|(_, held)| held.len() > 1)
        .map(|(id, held)| {
            if held.iter().all(|(_, sha)| *sha == held[0].1) {
                format!("request {id}: judged by {}, one result kept", named(&held))
            } else {
                format!(
                    "request id {id} was given to different sources (judged by {}): each kept",
                    named(&held)
                )
            }
        })
        .collect()
}

/// Copy every evaluation's logs from its shard's folder into `out`, at the same relative paths,
/// so the merged folder's reports link to files inside it. A log that is gone is left out. A log
/// that is not a plain relative path (absolute, `..`), that lies through a symbolic link, that
/// is not a regular file or is over `LOG_CAP`, or whose place in `out` is taken, is not copied:
/// each such is returned, saying why, for the caller to warn of.
pub fn copy_logs(shards: &[(std::path::PathBuf, RunRecord)], out: &Path) -> Result<Vec<String>> {
    let mut skipped = Vec::new();
    for (dir, record) in shards {
        for log in record.evaluations.iter().flat_map(|e| &e.logs) {
            if let Some(why) = copy_log(dir, Path::new(log), out)? {
                skipped.push(format!("{}: log {log:?} not copied: {why}", dir.display()));
            }
        }
    }
    Ok(skipped)
}

/// Copy the log `rel` from `dir` into `out`; the refusal, when `untrusted` refused to read or
/// create it (a log that is gone is no refusal, nor copied).
fn copy_log(dir: &Path, rel: &Path, out: &Path) -> Result<Option<std::io::Error>> {
    use std::io::ErrorKind::{AlreadyExists, InvalidData, InvalidInput, NotFound};
    let refused =
        |e: &std::io::Error| matches!(e.kind(), AlreadyExists | InvalidData | InvalidInput);
    let bytes = match untrusted::read_regular_beneath(dir, rel, LOG_CAP) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == NotFound => return Ok(None),
        Err(e) if refused(&e) => return Ok(Some(e)),
        Err(e) => return Err(Error::read(dir.join(rel), e)),
    };
    match untrusted::create_new_beneath(out, rel, &bytes) {
        Ok(()) => Ok(None),
        Err(e) if refused(&e) => Ok(Some(e)),
        Err(e) => Err(Error::write(out.join(rel), e)),
    }
}

/// Read one shard's `results.json` from its output folder (a regular file, no link), taken as
/// `trust` allows.
pub fn read_run(dir: &Path, trust: &Trust) -> Result<RunRecord> {
    let bytes = untrusted::read_regular_beneath(dir, Path::new(RECORD), RECORD_CAP)
        .map_err(|e| Error::read(dir.join(RECORD), e))?;
    let json = authenticate(&dir.display().to_string(), &bytes, trust)?;
    RunRecord::parse(&json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;
    use crate::shard::Shard;
    use std::os::unix::fs::symlink;

    /// The sample record split into `count` complete shards with a shared seed.
    fn shards(count: u32) -> Vec<(String, RunRecord)> {
        let mut whole = sample_record();
        whole.config.seed = Some(7);
        let total = whole.evaluations.len();
        (0..count)
            .map(|index| {
                let mut r = whole.clone();
                r.evaluations = whole
                    .evaluations
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i % count as usize == index as usize)
                    .map(|(_, e)| e.clone())
                    .collect();
                r.shard = Some(Shard {
                    index,
                    count,
                    total,
                    selected: r.evaluations.len(),
                });
                (format!("run{index}"), r)
            })
            .collect()
    }

    #[test]
    fn merging_complete_shards_gives_the_whole_run() {
        let mut runs = shards(3);
        runs.reverse();
        let merged = merge(
            runs,
            "run-merged".into(),
            vec!["kbench".into(), "merge".into()],
        )
        .unwrap();
        let mut whole = sample_record();
        whole
            .evaluations
            .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
        assert_eq!(merged.evaluations, whole.evaluations);
        assert_eq!(merged.shard, None);
        assert_eq!(merged.run_id, "run-merged");
        assert_eq!(merged.command, ["kbench", "merge"]);
    }

    #[test]
    fn mismatched_shards_are_refused() {
        let refused = |runs: Vec<(String, RunRecord)>, why: &str| {
            let refusal = merge(runs, String::new(), Vec::new()).unwrap_err();
            assert!(matches!(refusal, Refusal::Mismatch(_)), "{refusal:?}");
            let err = Error::from(refusal).to_string();
            assert!(err.contains(why), "{err}");
        };
        refused(shards(3)[..2].to_vec(), "shard 2/3 is missing");
        let mut twice = shards(3);
        twice[1] = twice[0].clone();
        refused(twice, "given twice");
        let mut other = shards(3);
        other[2].1.config.trials += 1;
        refused(other, "trials 2 against 1");
        let mut seeds = shards(3);
        seeds[1].1.config.seed = Some(8);
        refused(seeds, "seed 8 against 7");
        let mut secret = shards(2);
        for (_, r) in &mut secret {
            r.config.seed = None;
        }
        refused(secret, "secret seed");
        let mut plain = shards(1);
        plain[0].1.shard = None;
        refused(plain, "not a shard");
    }

    /// Two instances' records of the sample's first two evaluations, each a request with an id;
    /// request "r0" judged by both, "a" leaving it unfinished when it stopped.
    fn two_instances() -> Vec<(String, RunRecord)> {
        let mut whole = sample_record();
        whole.config.seed = Some(7);
        let served = |id: &str, instance: &str| crate::record::Served {
            id: Some(id.into()),
            instance: instance.into(),
            node: "node1".into(),
            gpu: Some(0),
        };
        let mut a = whole.clone();
        let mut b = whole.clone();
        a.instance = Some("a".into());
        b.instance = Some("b".into());
        let mut unfinished = whole.evaluations[0].clone();
        unfinished.verdict = Verdict::Skipped;
        unfinished.file = "level1/19_ReLU/a.000000.py".into();
        unfinished.served = Some(served("r0", "a"));
        let mut judged = whole.evaluations[0].clone();
        judged.file = "level1/19_ReLU/b.000000.py".into();
        judged.served = Some(served("r0", "b"));
        let mut other = whole.evaluations[1].clone();
        other.served = Some(served("r1", "a"));
        a.evaluations = vec![unfinished, other];
        b.evaluations = vec![judged];
        vec![("b".into(), b), ("a".into(), a)]
    }

    #[test]
    fn instances_merge_into_one_run_each_request_once() {
        let runs = two_instances();
        let paths: Vec<_> = runs.iter().map(|(n, r)| (n.into(), r.clone())).collect();
        let merged = merge(runs, "m".into(), Vec::new()).unwrap();
        let ids: Vec<_> = merged
            .evaluations
            .iter()
            .map(|e| request_id(e).unwrap())
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        let r0 = merged
            .evaluations
            .iter()
            .find(|e| request_id(e) == Some("r0"));
        assert_eq!(r0.unwrap().served.as_ref().unwrap().instance, "b");
        assert_ne!(r0.unwrap().verdict, Verdict::Skipped);
        assert_eq!(merged.instance, None);
        assert_eq!(
            repeated_requests(&paths),
            ["request r0: judged by b and a, one result kept"]
        );
        // One id given to two sources is two requests: both kept, and said.
        let mut clash = two_instances();
        clash[0].1.evaluations[0].sha256 = "cd".repeat(32);
        let paths: Vec<_> = clash.iter().map(|(n, r)| (n.into(), r.clone())).collect();
        let merged = merge(clash, "m".into(), Vec::new()).unwrap();
        assert_eq!(merged.evaluations.len(), 3);
        assert!(repeated_requests(&paths)[0].contains("given to different sources"));
        // Not one run's: an instance twice, other settings, a record of no instance.
        let refused = |runs: Vec<(String, RunRecord)>, why: &str| {
            let err = Error::from(merge(runs, String::new(), Vec::new()).unwrap_err());
            assert!(err.to_string().contains(why), "{err}");
        };
        let mut twice = two_instances();
        twice[0].1.instance = Some("a".into());
        refused(twice, "instance Some(\"a\") is given twice");
        let mut other = two_instances();
        other[1].1.config.trials += 1;
        refused(other, "other settings");
        let mut plain = two_instances();
        plain[1].1.instance = None;
        refused(plain, "is not an instance");
        let mut secret = two_instances();
        for (_, r) in &mut secret {
            r.config.seed = None;
        }
        refused(secret, "secret seed");
    }

    #[test]
    fn unfinished_shards_are_told_apart_from_a_mismatch() {
        let mut short = shards(2);
        short[0].1.evaluations.pop();
        let refusal = merge(short, String::new(), Vec::new()).unwrap_err();
        let Refusal::Unfinished(why) = refusal else {
            panic!("{refusal:?}");
        };
        assert!(why.contains("run0 (shard 0/2)"), "{why}");
        assert!(why.contains("finish it with --resume"), "{why}");
    }

    #[test]
    fn only_the_differing_settings_are_named() {
        let a = sample_record().config;
        let mut b = a.clone();
        assert!(a.differences(&b).is_empty());
        b.trials += 1;
        b.seed_sha256 = Some("ab".into());
        let names = a.differences(&b);
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names[0].starts_with("seed_sha256 unset against \"ab\""),
            "{names:?}"
        );
        assert!(names[1].starts_with("trials "), "{names:?}");
    }

    /// `record`'s results.json as a run with `seed` in a seed file writes it, unsealed.
    fn from_seed_file(mut record: RunRecord, seed: u64) -> Vec<u8> {
        record.config.seed = None;
        record.config.seed_sha256 = Some(crate::config::seed_sha256(seed));
        crate::report::json::render(&record).unwrap()
    }

    #[test]
    fn a_shard_record_is_taken_only_as_its_mac_allows() {
        let record = shards(1).remove(0).1;
        let json = from_seed_file(record.clone(), 7);
        let sealed = RecordKey::from_seed(7).seal(&json);
        // The attack: a failing row of a sealed record edited to pass.
        let text = String::from_utf8(sealed.clone()).unwrap();
        let edited = text.replacen("\"verdict\": \"incorrect\"", "\"verdict\": \"pass\"", 1);
        assert_ne!(edited, text);
        let other_run = RecordKey::from_seed(8).seal(&from_seed_file(record.clone(), 8));
        let public = crate::report::json::render(&record).unwrap();
        let seed = |s| Trust::new(Some(s), false);
        // (a name, what the shard holds, how merge takes it, Ok or the refusal's words)
        type Case<'a> = (&'a str, &'a [u8], Trust, Result<(), &'a str>);
        let cases: [Case; 8] = [
            ("sealed", &sealed, seed(7), Ok(())),
            (
                "edited row",
                edited.as_bytes(),
                seed(7),
                Err("a MAC that does not verify"),
            ),
            ("no MAC", &json, seed(7), Err("has no MAC")),
            (
                "another run's",
                &other_run,
                seed(7),
                Err("another seed file"),
            ),
            (
                "public seed",
                &public,
                seed(7),
                Err("--seed N, a public seed"),
            ),
            (
                "public, no flag",
                &public,
                Trust::new(None, false),
                Err("--unauthenticated"),
            ),
            (
                "sealed, no flag",
                &sealed,
                Trust::new(None, false),
                Err("--seed-file FILE"),
            ),
            ("public, unchecked", &public, Trust::new(None, true), Ok(())),
        ];
        for (case, file, trust, expected) in cases {
            match (authenticate("shard-0", file, &trust), expected) {
                (Ok(json), Ok(())) => {
                    RunRecord::parse(&json).unwrap();
                }
                (Err(Refusal::Mismatch(why)), Err(words)) => {
                    assert!(why.starts_with("shard-0: "), "{case}: {why}");
                    assert!(why.contains(words), "{case}: {why}");
                }
                (got, _) => panic!("{case}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_shard_folder_without_an_authentic_record_is_refused_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let json = from_seed_file(shards(1).remove(0).1, 7);
        std::fs::write(tmp.path().join(RECORD), &json).unwrap();
        let err = read_run(tmp.path(), &Trust::new(Some(7), false)).unwrap_err();
        assert!(err.to_string().contains("has no MAC"), "{err}");
        std::fs::write(
            tmp.path().join("real.json"),
            RecordKey::from_seed(7).seal(&json),
        )
        .unwrap();
        std::fs::remove_file(tmp.path().join(RECORD)).unwrap();
        symlink("real.json", tmp.path().join(RECORD)).unwrap();
        let err = read_run(tmp.path(), &Trust::new(Some(7), false)).unwrap_err();
        assert!(err.to_string().contains("a symbolic link"), "{err}");
    }

    #[test]
    fn logs_are_copied_only_from_inside_the_shard_and_never_written_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let (shard, out) = (tmp.path().join("shard"), tmp.path().join("out"));
        let outside = tmp.path().join("outside.log");
        std::fs::create_dir_all(shard.join("logs")).unwrap();
        std::fs::write(&outside, "secret").unwrap();
        std::fs::write(shard.join("logs/ok.log"), "fine").unwrap();
        symlink(&outside, shard.join("logs/link.log")).unwrap();
        symlink(tmp.path(), shard.join("linked")).unwrap();
        let fifo = std::ffi::CString::new(shard.join("logs/fifo.log").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut record = sample_record();
        let absolute = outside.display().to_string();
        // (the log path a shard's record names, why it is not copied)
        let refused = [
            (absolute.as_str(), "not a plain relative path"),
            ("../outside.log", "not a plain relative path"),
            (
                "logs/link.log",
                "a symbolic link (not followed), not a regular file",
            ),
            (
                "linked/outside.log",
                "linked: a symbolic link (not followed), not a folder",
            ),
            ("logs/fifo.log", "a FIFO, not a regular file"),
        ];
        record.evaluations[0].logs = ["logs/ok.log", "logs/gone.log"]
            .into_iter()
            .chain(refused.iter().map(|(log, _)| *log))
            .map(String::from)
            .collect();
        std::fs::create_dir(&out).unwrap();
        let shards = [(shard.clone(), record)];
        let skipped = copy_logs(&shards, &out).unwrap();
        assert_eq!(skipped.len(), refused.len(), "{skipped:#?}");
        for ((log, why), said) in refused.iter().zip(&skipped) {
            assert!(said.contains(&format!("{log:?} not copied: ")), "{said}");
            assert!(said.contains(why), "{said}");
        }
        assert_eq!(std::fs::read(out.join("logs/ok.log")).unwrap(), b"fine");
        let written: Vec<_> = walkdir::WalkDir::new(&out).into_iter().collect();
        assert_eq!(written.len(), 3, "out, logs, ok.log: {written:?}");
        // Nothing written beside the shard and out, the file outside untouched.
        let mut beside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        beside.sort();
        assert_eq!(beside, ["out", "outside.log", "shard"]);
        assert_eq!(std::fs::read(&outside).unwrap(), b"secret");

        // A link in the merged folder is not written through either.
        let out = tmp.path().join("out2");
        std::fs::create_dir(&out).unwrap();
        symlink(&shard, out.join("logs")).unwrap();
        let skipped = copy_logs(&shards, &out).unwrap();
        assert!(
            skipped
                .iter()
                .any(|s| s.contains("\"logs/ok.log\" not copied: logs: a symbolic link")),
            "{skipped:#?}"
        );
        assert_eq!(std::fs::read(shard.join("logs/ok.log")).unwrap(), b"fine");
    }
}
