//! `kbench merge`: the shards' records joined (`merge::merge` checks they are one run's), every
//! report written again from the merged evaluations, and the gate judged on all of them.

use crate::cli::MergeArgs;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::gate;
use crate::merge;
use crate::report;

pub fn run(args: &MergeArgs) -> Result<Exit> {
    let records = args
        .runs
        .iter()
        .map(|dir| Ok((dir.display().to_string(), merge::read_run(dir)?)))
        .collect::<Result<Vec<_>>>()?;
    let record = merge::merge(records)?;
    let out = &args.out;
    if out.join("results.json").exists() {
        return Err(Error::Usage(format!(
            "write to {}: it holds a run already; choose another --out",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| Error::write(out, e))?;
    report::write_files(&record, out)?;
    let summary = report::summary::summarize_run(&record);
    report::write_summary(&summary, out)?;
    let gate = gate::judge(&record, args.min_speedup);
    print!(
        "{}",
        report::console::final_report(&record, &summary, &gate, out)
    );
    Ok(Exit::gate(gate.failures.is_empty()))
}
