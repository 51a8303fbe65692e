//! `kbench merge`: the shards' records read as `--seed-file` or `--unauthenticated` allows and
//! joined (`merge::merge` checks they are one run's), every report written again from the merged
//! evaluations with the shards' logs copied in, and the gate judged on all of them. With
//! `--if-complete`, shards not finished yet are a wait.

use std::path::{Path, PathBuf};

use crate::cli::MergeArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::gate;
use crate::merge::{self, Trust};
use crate::record::RunRecord;
use crate::report;

pub fn run(args: &MergeArgs) -> Result<Exit> {
    let seed = args
        .seed_file
        .as_deref()
        .map(config::read_seed)
        .transpose()?;
    let trust = Trust::new(seed, args.unauthenticated);
    let Some(shards) = read_shards(args, &trust)? else {
        return Ok(Exit::Passed);
    };
    let named = shards
        .iter()
        .map(|(dir, r)| (dir.display().to_string(), r.clone()))
        .collect();
    let run_id = chrono::Local::now()
        .format("merge-%Y%m%d-%H%M%S")
        .to_string();
    let mut record = match merge::merge(named, run_id, std::env::args().collect()) {
        Err(merge::Refusal::Unfinished(why)) if args.if_complete => {
            eprintln!("kbench merge: not yet: {why}");
            return Ok(Exit::Passed);
        }
        merged => merged?,
    };
    for repeated in merge::repeated_requests(&shards) {
        eprintln!("kbench merge: {repeated}");
    }
    if matches!(trust, Trust::Unauthenticated) {
        eprintln!(
            "kbench merge: --unauthenticated: the shards' records were taken unchecked; the \
             merged record says so"
        );
        record.unauthenticated = true;
    }
    let out = &args.out;
    let summary = write(&record, &shards, out, args.replace)?;
    let gate = gate::judge(&record, &args.gate);
    print!(
        "{}",
        report::console::final_report(&record, &summary, &gate, out)
    );
    Ok(Exit::gate(gate.passed()))
}

/// Each shard's folder and record, taken as `trust` allows; none (said on stderr) when
/// `--if-complete` and a shard has written no results.json yet.
fn read_shards(args: &MergeArgs, trust: &Trust) -> Result<Option<Vec<(PathBuf, RunRecord)>>> {
    let mut shards = Vec::new();
    for dir in &args.runs {
        match merge::read_run(dir, trust) {
            Ok(record) => shards.push((dir.clone(), record)),
            Err(e) if args.if_complete && !dir.join("results.json").exists() => {
                eprintln!("kbench merge: not yet: {e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(shards))
}

/// The merged run's reports and logs in `out`. A run already there is refused unless
/// `replace`; then the new one is written beside it and moved into place, so a merge that
/// fails half-way leaves the previous merged run whole.
fn write(
    record: &RunRecord,
    shards: &[(PathBuf, RunRecord)],
    out: &Path,
    replace: bool,
) -> Result<report::summary::RunSummary> {
    let replacing = out.join("results.json").exists();
    if replacing && !replace {
        return Err(Error::Usage(format!(
            "write to {}: it holds a run already; choose another --out, or --replace it",
            out.display()
        )));
    }
    let target = if replacing {
        out.with_extension("merging")
    } else {
        out.to_path_buf()
    };
    if replacing {
        let _ = std::fs::remove_dir_all(&target);
    }
    std::fs::create_dir_all(&target).map_err(|e| Error::write(&target, e))?;
    for skipped in merge::copy_logs(shards, &target)? {
        eprintln!("kbench merge: {skipped}");
    }
    report::write_files(record, &target)?;
    let summary = report::summary::summarize_run(record);
    report::write_summary(&summary, &target)?;
    report::write_html(record, &summary, &target)?;
    if replacing {
        std::fs::remove_dir_all(out).map_err(|e| Error::write(out, e))?;
        std::fs::rename(&target, out).map_err(|e| Error::write(out, e))?;
    }
    Ok(summary)
}
