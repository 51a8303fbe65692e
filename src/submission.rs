//! Submissions: which file is a candidate for which task. Three layouts are understood:
//! the mirrored layout (`level1/19_ReLU.py`, or a folder `level1/19_ReLU/` of candidates),
//! upstream KernelBench's run layout (`level_1_problem_19_sample_0_kernel.py`, anywhere
//! below the directory) and a single file with an explicit task. Every other `.py` file is
//! reported as unmatched, never dropped silently. Nothing here reads a file's contents
//! beyond hashing it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::task::{level_dir, number_prefix, Task, TaskId};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub task: TaskId,
    pub path: PathBuf,
    /// Path relative to the submission directory (the file name for a single file).
    pub file: String,
    pub sample: Option<u32>,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmatched {
    pub file: String,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Discovery {
    pub submissions: Vec<Submission>,
    pub unmatched: Vec<Unmatched>,
}

/// `level_1_problem_19_sample_0_kernel.py` -> (1, 19, 0).
pub fn run_layout(name: &str) -> Option<(u32, u32, u32)> {
    let rest = name.strip_prefix("level_")?.strip_suffix("_kernel.py")?;
    let (level, rest) = rest.split_once("_problem_")?;
    let (problem, sample) = rest.split_once("_sample_")?;
    Some((
        level.parse().ok()?,
        problem.parse().ok()?,
        sample.parse().ok()?,
    ))
}

fn sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    Ok(format!("{:x}", Sha256::digest(bytes)))
}

/// Which task a file in `dir` belongs to, from its relative path, or why none.
fn classify(rel: &Path) -> std::result::Result<(TaskId, Option<u32>), String> {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if let Some((level, number, sample)) = run_layout(name) {
        return Ok((TaskId { level, number }, Some(sample)));
    }
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    // levelN/<id>_Name.py or levelN/<id>_Name/<anything>.py, at the top of the directory.
    let level = parts.first().and_then(|p| level_dir(p));
    match (level, parts.len()) {
        (Some(level), 2) => number_prefix(name.trim_end_matches(".py"))
            .map(|number| (TaskId { level, number }, None))
            .ok_or_else(|| format!("'{name}' has no numeric task prefix (N_Name.py)")),
        (Some(level), 3) => number_prefix(parts[1])
            .map(|number| (TaskId { level, number }, None))
            .ok_or_else(|| format!("folder '{}' has no numeric task prefix (N_Name/)", parts[1])),
        _ => {
            Err("not in a levelN/ folder and not named level_L_problem_P_sample_S_kernel.py".into())
        }
    }
}

/// Submissions for `tasks` found at `path`: a directory, or one file when `single` names its task.
pub fn discover(path: &Path, tasks: &[Task], single: Option<TaskId>) -> Result<Discovery> {
    let known: HashMap<TaskId, &Task> = tasks.iter().map(|t| (t.id, t)).collect();
    let mut found = Discovery::default();
    if path.is_file() {
        let Some(task) = single else {
            return Err(Error::Usage(format!(
                "evaluate {}: a single file needs --task LEVEL/NUMBER",
                path.display()
            )));
        };
        if !known.contains_key(&task) {
            return Err(Error::Usage(format!(
                "evaluate {}: there is no task {task}",
                path.display()
            )));
        }
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        found.submissions.push(Submission {
            task,
            path: path.to_path_buf(),
            file,
            sample: None,
            sha256: sha256(path)?,
        });
        return Ok(found);
    }
    if !path.is_dir() {
        return Err(Error::Usage(format!(
            "evaluate {}: no such file or directory",
            path.display()
        )));
    }
    if single.is_some() {
        return Err(Error::Usage(
            "use --task with a directory: it applies to a single file".into(),
        ));
    }
    for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
        let entry = entry.map_err(|e| Error::Other(format!("walk {}: {e}", path.display())))?;
        let file_path = entry.path();
        if !entry.file_type().is_file() || file_path.extension().is_none_or(|e| e != "py") {
            continue;
        }
        let rel = file_path.strip_prefix(path).unwrap_or(file_path);
        let file = rel.to_string_lossy().into_owned();
        match classify(rel) {
            Ok((task, sample)) if known.contains_key(&task) => found.submissions.push(Submission {
                task,
                path: file_path.to_path_buf(),
                file,
                sample,
                sha256: sha256(file_path)?,
            }),
            Ok((task, _)) => found.unmatched.push(Unmatched {
                file,
                why: format!("there is no task {task}"),
            }),
            Err(why) => found.unmatched.push(Unmatched { file, why }),
        }
    }
    found
        .submissions
        .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks() -> Vec<Task> {
        [(1, 19, "19_ReLU"), (2, 3, "3_Conv")]
            .into_iter()
            .map(|(level, number, name)| Task {
                id: TaskId { level, number },
                name: name.into(),
                path: PathBuf::from(format!("level{level}/{name}.py")),
            })
            .collect()
    }

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, f).unwrap();
        }
        dir
    }

    #[test]
    fn finds_all_three_layouts_and_reports_the_rest() {
        let dir = tree(&[
            "level1/19_ReLU.py",
            "level1/19_ReLU/honest.py",
            "runs/level_2_problem_3_sample_1_kernel.py",
            "level1/7_Nothing.py",
            "helpers/util.py",
            "README.md",
        ]);
        let d = discover(dir.path(), &tasks(), None).unwrap();
        let got: Vec<_> = d
            .submissions
            .iter()
            .map(|s| (s.task.to_string(), s.file.clone(), s.sample))
            .collect();
        assert_eq!(
            got,
            [
                ("1/19".into(), "level1/19_ReLU.py".into(), None),
                ("1/19".into(), "level1/19_ReLU/honest.py".into(), None),
                (
                    "2/3".into(),
                    "runs/level_2_problem_3_sample_1_kernel.py".into(),
                    Some(1)
                ),
            ]
        );
        let unmatched: Vec<_> = d.unmatched.iter().map(|u| u.file.as_str()).collect();
        assert_eq!(unmatched, ["helpers/util.py", "level1/7_Nothing.py"]);
        assert!(d.unmatched[1].why.contains("no task 1/7"));
        assert_eq!(d.submissions[0].sha256.len(), 64);
    }

    #[test]
    fn a_single_file_needs_its_task() {
        let dir = tree(&["kernel.py"]);
        let file = dir.path().join("kernel.py");
        assert!(discover(&file, &tasks(), None).is_err());
        assert!(discover(
            &file,
            &tasks(),
            Some(TaskId {
                level: 1,
                number: 5
            })
        )
        .is_err());
        let d = discover(
            &file,
            &tasks(),
            Some(TaskId {
                level: 1,
                number: 19,
            }),
        )
        .unwrap();
        assert_eq!(d.submissions.len(), 1);
        assert_eq!(d.submissions[0].file, "kernel.py");
    }
}
