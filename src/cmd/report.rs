//! `kbench report`: one self-contained HTML page for one or more runs' records
//! (`report::html` renders; this finds the runs and where the page and its log links go).

use std::path::{Path, PathBuf};

use crate::atomic_file;
use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::record::RunRecord;
use crate::report;

pub fn run(args: &ReportArgs) -> Result<Exit> {
    let runs = args
        .runs
        .iter()
        .map(|p| RunRecord::read(p))
        .collect::<Result<Vec<_>>>()?;
    let out = match (&args.out, runs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [(dir, _)]) => dir.join("report.html"),
        (None, _) => PathBuf::from("report.html"),
    };
    // A bare file name's parent is empty: the page goes to the working folder.
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
    let page_dir =
        std::path::absolute(parent.unwrap_or(Path::new("."))).map_err(|e| Error::write(&out, e))?;
    let summaries: Vec<_> = runs
        .iter()
        .map(|(_, r)| report::summary::summarize_run(r))
        .collect();
    let mut pages = Vec::new();
    for ((dir, record), summary) in runs.iter().zip(&summaries) {
        let dir = std::path::absolute(dir).map_err(|e| Error::read(dir, e))?;
        // Log links relative to the page when it sits in the run folder, else by full path.
        let base = if dir == page_dir {
            String::new()
        } else {
            format!("{}/", dir.display())
        };
        pages.push(report::html::Run {
            record,
            summary,
            base,
        });
    }
    let page = report::html::render(&pages)?;
    atomic_file::write(&out, page.as_bytes())?;
    eprintln!("wrote {}", out.display());
    Ok(Exit::Passed)
}
