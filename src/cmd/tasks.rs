//! The tasks a command works on (`list`, `eval`): `--tasks DIR` or the bundled tree, found by
//! `task::discover`, optionally one level of them.

use std::path::PathBuf;

use crate::bundled;
use crate::cli::TaskSource;
use crate::config;
use crate::error::{Error, Result};
use crate::task::{self, Task};

/// The tasks of `--tasks DIR` (or the bundled ones), filtered by `--level`.
pub fn load(source: &TaskSource) -> Result<(PathBuf, Vec<Task>)> {
    let root = match &source.tasks {
        Some(dir) => std::path::absolute(dir).map_err(|e| Error::read(dir, e))?,
        None => bundled::tasks_root(&config::cache_dir())?,
    };
    let found = task::discover(&root)?;
    for line in &found.skipped {
        eprintln!("kbench: {line}");
    }
    let mut tasks = found.tasks;
    if let Some(level) = source.level {
        tasks.retain(|t| t.id.level == level);
        if tasks.is_empty() {
            return Err(Error::Usage(format!(
                "find tasks: {} has no task of level {level}",
                root.display()
            )));
        }
    }
    Ok((root, tasks))
}
