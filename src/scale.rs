//! The named task sizes (`--scale`): `full`, and each name of the `scale.toml` beside the task
//! files (`small` in the bundled tree). A folder of tasks without one has `small` too, derived
//! from each task's facts. A name no task has is refused before anything runs: a misspelt
//! scale would otherwise end every evaluation on it, one worker at a time.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};
use crate::task::Task;

/// Refuse `--scale NAME` when none of `tasks` has it, saying which scales they have.
pub fn check(name: Option<&str>, tasks: &[Task]) -> Result<()> {
    let Some(name) = name else { return Ok(()) };
    let mut names = BTreeSet::from(["full".to_string()]);
    let folders: BTreeSet<&Path> = tasks.iter().filter_map(|t| t.path.parent()).collect();
    for folder in folders {
        names.extend(in_folder(folder)?);
    }
    if names.contains(name) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "use --scale {name}: no task has that scale; the tasks have {}",
        names.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

/// The scale names of the tasks in `folder`: those of its `scale.toml` (a table per task, a
/// table of constants per scale), else `small` (derived).
fn in_folder(folder: &Path) -> Result<BTreeSet<String>> {
    let path = folder.join("scale.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(BTreeSet::from(["small".to_string()]))
        }
        Err(e) => return Err(Error::read(&path, e)),
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| Error::Usage(format!("read {}: {e}", path.display())))?;
    Ok(table
        .values()
        .filter_map(toml::Value::as_table)
        .flat_map(|scales| scales.keys().cloned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;

    fn task(path: &Path) -> Task {
        Task {
            id: TaskId {
                level: 1,
                number: 1,
            },
            name: "1_X".into(),
            path: path.to_path_buf(),
        }
    }

    #[test]
    fn a_scale_no_task_has_is_refused_with_the_scales_there_are() {
        let dir = tempfile::tempdir().unwrap();
        let (with, without) = (dir.path().join("level1"), dir.path().join("level2"));
        std::fs::create_dir_all(&with).unwrap();
        std::fs::create_dir_all(&without).unwrap();
        std::fs::write(
            with.join("scale.toml"),
            "[\"1_X\"]\nsmall = { N = 4 }\nmedium = { N = 64 }\n",
        )
        .unwrap();
        let tasks = [task(&with.join("1_X.py"))];
        for (name, ok) in [
            (None, true),
            (Some("full"), true),
            (Some("small"), true),
            (Some("medium"), true),
            (Some("tiny"), false),
        ] {
            assert_eq!(check(name, &tasks).is_ok(), ok, "{name:?}");
        }
        let refused = check(Some("tiny"), &tasks).unwrap_err().to_string();
        assert_eq!(
            refused,
            "use --scale tiny: no task has that scale; the tasks have full, medium, small"
        );
        // a folder without scale.toml has the derived small size only
        let tasks = [task(&without.join("1_X.py"))];
        assert!(check(Some("small"), &tasks).is_ok());
        assert!(check(Some("medium"), &tasks).is_err());
    }
}
