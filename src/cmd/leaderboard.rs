//! `kbench leaderboard`: one run per submitter ranked into one CSV (`report::leaderboard`
//! ranks and renders; this names each submitter by its run folder).

use std::io::Write;

use crate::atomic_file;
use crate::cli::LeaderboardArgs;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::record::RunRecord;
use crate::report;

pub fn run(args: &LeaderboardArgs) -> Result<Exit> {
    let runs = args
        .runs
        .iter()
        .map(|p| {
            let (dir, record) = RunRecord::read(p)?;
            let dir = std::path::absolute(&dir).map_err(|e| Error::read(&dir, e))?;
            let submitter = dir
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned());
            Ok((submitter, record))
        })
        .collect::<Result<Vec<_>>>()?;
    let entries: Vec<report::leaderboard::Entry<'_>> = runs
        .iter()
        .map(|(submitter, record)| report::leaderboard::Entry {
            submitter: submitter.clone(),
            record,
        })
        .collect();
    let board = report::leaderboard::render(&entries)?;
    match &args.out {
        Some(out) => atomic_file::write(out, &board)?,
        None => std::io::stdout()
            .write_all(&board)
            .map_err(|e| Error::Other(format!("write the board: {e}")))?,
    }
    Ok(Exit::Passed)
}
