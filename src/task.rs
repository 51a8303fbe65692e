//! Tasks in KernelBench layout: `level1/ level2/ level3/` holding `N_Name.py`, the id from the
//! prefix. Discovery only reads directory entries; it never imports a task.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A task's identity: its level and the numeric prefix of its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    pub level: u32,
    pub number: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.level, self.number)
    }
}

impl FromStr for TaskId {
    type Err = String;

    /// `1/19` or `level1/19`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("'{s}' is not a task id: expected LEVEL/NUMBER, e.g. 1/19");
        let (level, number) = s.trim().split_once('/').ok_or_else(bad)?;
        let level = level.trim_start_matches("level");
        Ok(TaskId {
            level: level.parse().map_err(|_| bad())?,
            number: number.parse().map_err(|_| bad())?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub id: TaskId,
    /// File stem, e.g. `19_ReLU`.
    pub name: String,
    pub path: PathBuf,
}

impl Task {
    /// `level1/19_ReLU`, the name used in reports.
    pub fn label(&self) -> String {
        format!("level{}/{}", self.id.level, self.name)
    }
}

/// The numeric prefix of a KernelBench file or folder name (`19_ReLU.py` -> 19).
pub fn number_prefix(name: &str) -> Option<u32> {
    let digits: String = name.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() || !name[digits.len()..].starts_with('_') {
        return None;
    }
    digits.parse().ok()
}

/// All tasks under `root/levelN/`, sorted by level then number.
pub fn discover(root: &Path) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    for level in 1..=3 {
        let dir = root.join(format!("level{level}"));
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::read(&dir, e))? {
            let path = entry.map_err(|e| Error::read(&dir, e))?.path();
            let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(stem) = file_name.strip_suffix(".py") else {
                continue;
            };
            let Some(number) = number_prefix(stem) else {
                continue;
            };
            tasks.push(Task {
                id: TaskId { level, number },
                name: stem.to_string(),
                path,
            });
        }
    }
    if tasks.is_empty() {
        return Err(Error::Usage(format!(
            "find tasks: {} has no level1/, level2/ or level3/ holding N_Name.py files",
            root.display()
        )));
    }
    tasks.sort_by_key(|t| t.id);
    if let Some(pair) = tasks.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(Error::Usage(format!(
            "load tasks: {} and {} have the same id {}",
            pair[0].path.display(),
            pair[1].path.display(),
            pair[0].id
        )));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_task_ids() {
        assert_eq!(
            "1/19".parse::<TaskId>().unwrap(),
            TaskId {
                level: 1,
                number: 19
            }
        );
        assert_eq!(
            "level2/3".parse::<TaskId>().unwrap(),
            TaskId {
                level: 2,
                number: 3
            }
        );
        assert!("19".parse::<TaskId>().is_err());
        assert!("a/b".parse::<TaskId>().is_err());
    }

    #[test]
    fn number_prefix_needs_digits_then_underscore() {
        assert_eq!(number_prefix("19_ReLU"), Some(19));
        assert_eq!(number_prefix("ReLU"), None);
        assert_eq!(number_prefix("19ReLU"), None);
    }

    #[test]
    fn discovers_sorted_tasks_and_ignores_other_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("level1")).unwrap();
        std::fs::create_dir_all(dir.path().join("level2")).unwrap();
        for f in [
            "level1/19_ReLU.py",
            "level1/2_Mm.py",
            "level2/1_Conv.py",
            "level1/scale.toml",
            "level1/notes.py",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let tasks = discover(dir.path()).unwrap();
        let labels: Vec<_> = tasks.iter().map(Task::label).collect();
        assert_eq!(labels, ["level1/2_Mm", "level1/19_ReLU", "level2/1_Conv"]);
    }

    #[test]
    fn an_empty_tree_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(discover(dir.path()).is_err());
    }
}
