//! `kbench merge`: the run records of the shards of one run (`eval --shard I/N`) joined into
//! one, after checking that they are one run's: the same settings and seed, the same
//! submission count, each shard once and complete. A refusal says whether the shards are one
//! run's but unfinished (`Refusal::Unfinished`: later it will merge) or not one run's at all.

use std::path::Path;

use crate::error::{Error, Result};
use crate::record::RunRecord;

/// Why shards were not merged.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// One run's shards, some of them not finished yet (or not started): a merge after they
    /// finish will succeed.
    Unfinished(String),
    /// Not the shards of one run, or not all of them: no later merge of these folders succeeds.
    Mismatch(String),
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        let (Refusal::Unfinished(why) | Refusal::Mismatch(why)) = refusal;
        Error::Usage(format!("merge the runs: {why}"))
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
    let mut merged = first.clone();
    merged.shard = None;
    merged.run_id = run_id;
    merged.command = command;
    merged.started_at = records
        .iter()
        .map(|(_, r)| r.started_at.clone())
        .min()
        .unwrap_or_default();
    merged.evaluations = records
        .iter()
        .flat_map(|(_, r)| r.evaluations.iter().cloned())
        .collect();
    merged
        .evaluations
        .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
    Ok(merged)
}

/// Copy every evaluation's logs from its shard's folder into `out`, at the same relative paths,
/// so the merged folder's reports link to files inside it. A log that is gone is left out.
pub fn copy_logs(shards: &[(std::path::PathBuf, RunRecord)], out: &Path) -> Result<()> {
    for (dir, record) in shards {
        for log in record.evaluations.iter().flat_map(|e| &e.logs) {
            let (from, to) = (dir.join(log), out.join(log));
            if !from.is_file() {
                continue;
            }
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::write(parent, e))?;
            }
            std::fs::copy(&from, &to).map_err(|e| Error::write(&to, e))?;
        }
    }
    Ok(())
}

/// Read one shard's `results.json` from its output folder.
pub fn read_run(dir: &Path) -> Result<RunRecord> {
    let path = dir.join("results.json");
    let bytes = std::fs::read(&path).map_err(|e| Error::read(&path, e))?;
    crate::report::json::parse(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_record;
    use crate::shard::Shard;

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
}
