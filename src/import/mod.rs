//! `kbench import FORMAT SRC OUT`: kernels as their authors published them (CUDA-L1's JSON
//! Lines, upstream KernelBench run directories, Sakana AI CUDA Engineer rows, CUDA-L2's and
//! good-kernels' checkouts) turned into the task tree of the references they were timed against
//! (`OUT/tasks/levelN/ID_Name.py`), the submissions in the mirrored layout
//! (`OUT/submissions/levelN/...`) and their published results (`OUT/published.csv`). A bad row is skipped with why; it never stops the import.
//!
//! A corpus is untrusted: its files are read through no symbolic link, never blocking and up to
//! a cap (`untrusted`); a link, FIFO, socket or device in it is not read, but named on stderr and
//! in the report (`Import::unread`); and OUT's files are created new, never through a link.

pub mod cuda_l1;
pub mod cuda_l2;
pub mod good_kernels;
pub mod kernelbench_run;
pub mod sakana;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::published::PublishedRow;
use crate::task::{number_prefix, TaskId};
use crate::untrusted;

/// The most a corpus file (JSON Lines, `eval_results.json`, a published table) may hold.
pub const CORPUS_CAP: u64 = 4 << 30;
/// The most one kernel's source file may hold.
pub const SOURCE_CAP: u64 = 16 << 20;

/// A row left out, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skip {
    /// Where in the source: `line 12`, a file name.
    pub at: String,
    pub why: String,
}

struct TaskFile {
    name: String,
    code: String,
    /// The row that gave it, for conflicts.
    at: String,
}

/// What an importer read, before anything is written.
pub struct Import {
    /// Names of the tasks bundled with kbench, which win over names made from a row.
    names: BTreeMap<TaskId, String>,
    tasks: BTreeMap<TaskId, TaskFile>,
    /// Path under `submissions/` -> code.
    pub submissions: BTreeMap<String, String>,
    pub rows: Vec<PublishedRow>,
    /// The same submissions' results in a server scenario, where the source publishes one:
    /// `published-server.csv`, for `kbench eval --mode server --published`.
    pub server_rows: Vec<PublishedRow>,
    /// Other files the source's facts go to: path under OUT -> content.
    pub files: BTreeMap<String, String>,
    pub skipped: Vec<Skip>,
    /// Entries of the source not read: symbolic links and anything not a regular file (FIFOs,
    /// sockets, devices), or a file over its cap.
    pub unread: Vec<Skip>,
    /// Flags of `kbench eval` this source's evaluation needs, in the command `report` prints.
    pub eval_flags: Vec<&'static str>,
    /// Lines `report` ends with.
    pub notes: Vec<String>,
}

impl Default for Import {
    fn default() -> Self {
        Import {
            names: crate::bundled::task_names(),
            tasks: BTreeMap::new(),
            submissions: BTreeMap::new(),
            rows: Vec::new(),
            server_rows: Vec::new(),
            files: BTreeMap::new(),
            skipped: Vec::new(),
            unread: Vec::new(),
            eval_flags: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// `text` as a file or folder name: letters, digits, `_`, `-` and `.` kept, the rest `_`.
pub fn file_name(text: &str) -> String {
    let name: String = text
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    let name = name.trim_start_matches('.').to_string();
    if name.is_empty() {
        "kernel".into()
    } else {
        name
    }
}

impl Import {
    /// The task's name: the bundled task's, else the one a previous row gave, else `fallback`
    /// (made from the row; prefixed with the task's number when it lacks it).
    pub fn task_name(&self, id: TaskId, fallback: &str) -> String {
        if let Some(name) = self.names.get(&id) {
            return name.clone();
        }
        if let Some(task) = self.tasks.get(&id) {
            return task.name.clone();
        }
        let name = file_name(fallback);
        if number_prefix(&name) == Some(id.number) {
            name
        } else {
            format!("{}_{name}", id.number)
        }
    }

    /// Add the reference a row was timed against; a second row of the task must agree (up to
    /// trailing white space).
    pub fn add_task(&mut self, id: TaskId, name: &str, code: &str, at: &str) -> Result<(), String> {
        let normal = |code: &str| -> Vec<String> {
            let lines = code.trim_end().lines();
            lines.map(|l| l.trim_end().to_string()).collect()
        };
        match self.tasks.get(&id) {
            Some(seen) if normal(&seen.code) != normal(code) => Err(format!(
                "its reference differs from the one {} gave for task {id}",
                seen.at
            )),
            Some(_) => Ok(()),
            None => {
                self.tasks.insert(
                    id,
                    TaskFile {
                        name: name.into(),
                        code: code.into(),
                        at: at.into(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Add a submission: `levelN/NAME.py`, or with `candidate` `levelN/NAME/CANDIDATE.py`
    /// (numbered `_2`, `_3`, ... where taken). Returns its path under `submissions/`.
    pub fn add_submission(
        &mut self,
        id: TaskId,
        name: &str,
        candidate: Option<&str>,
        code: String,
    ) -> String {
        let base = match candidate {
            None => format!("level{}/{name}", id.level),
            Some(c) => format!("level{}/{name}/{}", id.level, file_name(c)),
        };
        let mut path = format!("{base}.py");
        let mut n = 1;
        while self.submissions.contains_key(&path) {
            n += 1;
            path = format!("{base}_{n}.py");
        }
        self.submissions.insert(path.clone(), code);
        path
    }

    pub fn skip(&mut self, at: impl Into<String>, why: impl Into<String>) {
        self.skipped.push(Skip {
            at: at.into(),
            why: why.into(),
        });
    }

    /// An entry of the source not read (`untrusted` refused it, or it is a link or not a
    /// regular file), said on stderr now and in the report.
    pub fn unread(&mut self, at: impl Into<String>, why: impl std::fmt::Display) {
        let skip = Skip {
            at: at.into(),
            why: format!("not read: {why}"),
        };
        eprintln!("kbench import: {}: {}", skip.at, skip.why);
        self.unread.push(skip);
    }

    /// Write the tree, the submissions and published.csv into `out` (missing or empty), each
    /// file created new (`untrusted::create_new_beneath`).
    pub fn write(&self, out: &Path) -> Result<()> {
        if out.read_dir().is_ok_and(|mut d| d.next().is_some()) {
            return Err(Error::Usage(format!(
                "import into {}: it is not empty",
                out.display()
            )));
        }
        std::fs::create_dir_all(out).map_err(|e| Error::write(out, e))?;
        let write = |rel: &str, bytes: &[u8]| {
            untrusted::create_new_beneath(out, Path::new(rel), bytes)
                .map_err(|e| Error::write(out.join(rel), e))
        };
        for (id, task) in &self.tasks {
            let path = format!("tasks/level{}/{}.py", id.level, task.name);
            write(&path, task.code.as_bytes())?;
        }
        for (path, code) in &self.submissions {
            write(&format!("submissions/{path}"), code.as_bytes())?;
        }
        for (path, text) in &self.files {
            write(path, text.as_bytes())?;
        }
        if !self.server_rows.is_empty() {
            let csv = crate::published::render_csv(&self.server_rows)?;
            write("published-server.csv", &csv)?;
        }
        write("published.csv", &crate::published::render_csv(&self.rows)?)
    }

    /// What was written and skipped, and the command that evaluates it.
    pub fn report(&self, src: &Path, format: &str, out: &Path) -> String {
        let without: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.submission.is_empty())
            .map(|r| format!("{}/{}", r.level, r.problem_id))
            .collect();
        let mut text = format!(
            "imported {} row(s) of {} ({format}) into {}: {} task file(s) in tasks/, {} \
             submission(s) in submissions/, published.csv\n",
            self.rows.len(),
            src.display(),
            out.display(),
            self.tasks.len(),
            self.submissions.len(),
        );
        if !without.is_empty() {
            text.push_str(&format!(
                "{} row(s) published no code (in published.csv, nothing to evaluate): {}\n",
                without.len(),
                without.join(" ")
            ));
        }
        if !self.skipped.is_empty() {
            text.push_str(&format!("skipped {} row(s):\n", self.skipped.len()));
            for s in &self.skipped {
                text.push_str(&format!("  {}: {}\n", s.at, s.why));
            }
        }
        if !self.unread.is_empty() {
            text.push_str(&format!(
                "left {} entry(ies) of the source unread (links and anything not a regular file \
                 are never followed or opened):\n",
                self.unread.len()
            ));
            for s in &self.unread {
                text.push_str(&format!("  {}: {}\n", s.at, s.why));
            }
        }
        let tasks = if self.tasks.is_empty() {
            " (the source holds no references: add --tasks DIR for the tree it was timed \
             against, or the bundled tasks are used)"
                .to_string()
        } else {
            format!(" --tasks {}", out.join("tasks").display())
        };
        let flags: String = self.eval_flags.iter().map(|f| format!(" {f}")).collect();
        text.push_str(&format!(
            "evaluate with: kbench eval {} --published {}{tasks}{flags}\n",
            out.join("submissions").display(),
            out.join("published.csv").display(),
        ));
        for note in &self.notes {
            text.push_str(&format!("{note}\n"));
        }
        text
    }
}

/// The rows of a JSON Lines file (or of a JSON array), each with where it is (`line N` or
/// `row N`); a line that is not JSON is an `Err` with why.
pub fn json_rows(src: &Path) -> Result<Vec<(String, Result<Value, String>)>> {
    let bytes = untrusted::read_regular(src, CORPUS_CAP).map_err(|e| Error::read(src, e))?;
    if bytes.starts_with(b"PAR1") {
        return Err(Error::Usage(format!(
            "read {}: it is Parquet; convert it to JSON Lines first: python -c \"import pandas \
             as pd; pd.read_parquet('IN.parquet').to_json('OUT.jsonl', orient='records', \
             lines=True)\"",
            src.display()
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.trim_start().starts_with('[') {
        let rows: Vec<Value> = serde_json::from_str(&text)
            .map_err(|e| Error::Usage(format!("read {}: not a JSON array: {e}", src.display())))?;
        return Ok(rows
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("row {}", i + 1), Ok(v)))
            .collect());
    }
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let row = serde_json::from_str::<Value>(line)
                .map_err(|e| format!("not JSON: {e}"))
                .and_then(|v| {
                    if v.is_object() {
                        Ok(v)
                    } else {
                        Err("not a JSON object".into())
                    }
                });
            (format!("line {}", i + 1), row)
        })
        .collect())
}

/// A whole number: an integer, an integral float or a numeric string (exports differ).
pub fn whole(row: &Value, key: &str) -> Result<u32, String> {
    let v = &row[key];
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match (n.and_then(|n| u32::try_from(n).ok()), v) {
        (Some(n), _) => Ok(n),
        (None, Value::Null) => Err(format!("no {key}")),
        (None, _) => Err(format!("{key} is not a whole number: {v}")),
    }
}

/// The task of a row, from its level and task-number fields.
pub fn task_id(row: &Value, level: &str, number: &str) -> Result<TaskId, String> {
    let id = TaskId {
        level: whole(row, level)?,
        number: whole(row, number)?,
    };
    if id.level == 0 {
        return Err(format!("{level} is 0"));
    }
    Ok(id)
}

/// A finite number (a number or a numeric string); None when missing, null or NaN.
pub fn number(row: &Value, key: &str) -> Option<f64> {
    match &row[key] {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|f: &f64| f.is_finite())
}

/// A boolean: true/false, 1/0, or their strings in any case.
pub fn boolean(row: &Value, key: &str) -> Option<bool> {
    match &row[key] {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Source code: a non-blank string; null, `""` and `"None"` (CUDA-L1's mark) are no code.
pub fn code(row: &Value, key: &str) -> Option<String> {
    row[key]
        .as_str()
        .filter(|s| !s.trim().is_empty() && s.trim() != "None")
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_read_as_exports_write_them() {
        let row = json!({"a": 3, "b": 3.0, "c": "3", "d": 3.5, "e": null, "s": "x",
                         "t": "True", "f": false, "n": "nan", "none": "None", "blank": " "});
        assert_eq!(whole(&row, "a"), Ok(3));
        assert_eq!(whole(&row, "b"), Ok(3));
        assert_eq!(whole(&row, "c"), Ok(3));
        assert!(whole(&row, "d").unwrap_err().contains("not a whole number"));
        assert_eq!(whole(&row, "missing"), Err("no missing".into()));
        assert_eq!(number(&row, "d"), Some(3.5));
        assert_eq!(number(&row, "n"), None);
        assert_eq!(number(&row, "e"), None);
        assert_eq!(boolean(&row, "t"), Some(true));
        assert_eq!(boolean(&row, "f"), Some(false));
        assert_eq!(boolean(&row, "s"), None);
        assert_eq!(code(&row, "s").as_deref(), Some("x"));
        assert_eq!(code(&row, "none"), None);
        assert_eq!(code(&row, "blank"), None);
        let id = task_id(&json!({"l": 2, "n": 7}), "l", "n").unwrap();
        assert_eq!(id.to_string(), "2/7");
        assert_eq!(
            task_id(&json!({"l": 0, "n": 7}), "l", "n"),
            Err("l is 0".into())
        );
    }

    #[test]
    fn names_prefer_the_bundled_tasks_and_paths_never_collide() {
        let mut import = Import::default();
        let relu = TaskId {
            level: 1,
            number: 19,
        };
        assert_eq!(import.task_name(relu, "anything"), "19_ReLU");
        let new = TaskId {
            level: 4,
            number: 7,
        };
        assert_eq!(import.task_name(new, "my op/v2"), "7_my_op_v2");
        assert_eq!(import.task_name(new, "7_Op"), "7_Op");
        import.add_task(new, "7_Op", "code", "line 1").unwrap();
        assert_eq!(import.task_name(new, "other"), "7_Op");
        assert!(import.add_task(new, "7_Op", "code  \n\n", "line 2").is_ok());
        let err = import.add_task(new, "7_Op", "other", "line 3").unwrap_err();
        assert!(err.contains("differs from the one line 1 gave"), "{err}");
        let a = import.add_submission(relu, "19_ReLU", Some("fast kernel"), "a".into());
        let b = import.add_submission(relu, "19_ReLU", Some("fast kernel"), "b".into());
        let c = import.add_submission(relu, "19_ReLU", None, "c".into());
        assert_eq!(
            [a, b, c],
            [
                "level1/19_ReLU/fast_kernel.py",
                "level1/19_ReLU/fast_kernel_2.py",
                "level1/19_ReLU.py"
            ]
        );
        assert_eq!(file_name("../.."), "_..");
        assert_eq!(file_name(""), "kernel");
    }

    #[test]
    fn json_rows_take_lines_or_an_array_and_refuse_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let lines = dir.path().join("rows.jsonl");
        std::fs::write(&lines, "{\"a\": 1}\n\nnot json\n[1]\n").unwrap();
        let rows = json_rows(&lines).unwrap();
        let at: Vec<&str> = rows.iter().map(|(at, _)| at.as_str()).collect();
        assert_eq!(at, ["line 1", "line 3", "line 4"]);
        assert!(rows[0].1.is_ok());
        assert!(rows[1].1.as_ref().unwrap_err().starts_with("not JSON"));
        assert_eq!(rows[2].1, Err("not a JSON object".into()));
        let array = dir.path().join("rows.json");
        std::fs::write(&array, "[{\"a\": 1}, {\"a\": 2}]").unwrap();
        assert_eq!(json_rows(&array).unwrap().len(), 2);
        let parquet = dir.path().join("rows.parquet");
        std::fs::write(&parquet, b"PAR1\x00\x00").unwrap();
        let err = json_rows(&parquet).unwrap_err().to_string();
        assert!(err.contains("to_json"), "{err}");
    }
}
