//! What an importer read before anything is written (`Import`): the task files, the submissions,
//! the published rows and what was skipped or left unread, and how they are written to OUT.

use std::collections::BTreeMap;
use std::path::Path;

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

pub(super) struct TaskFile {
    name: String,
    code: String,
    /// The row that gave it, for conflicts.
    at: String,
}

/// What an importer read, before anything is written.
pub struct Import {
    /// Names of the tasks bundled with kbench, which win over names made from a row.
    pub(super) names: BTreeMap<TaskId, String>,
    pub(super) tasks: BTreeMap<TaskId, TaskFile>,
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
