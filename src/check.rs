//! Static checks of submission sources (`kbench check`, and evidence in every evaluation).
//! The rules live in the Python side (`kbench_worker/static_check/`, standard library only: no
//! torch needed); this module runs them in a worker and shapes the findings. It never imports a
//! submission.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::worker::request::{CheckFiles, Command};
use crate::worker::{Link, Reply, Spawn, Worker};

const CHECK_DEADLINE: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub line: u32,
    pub why: String,
}

/// The findings of one file, or why it could not be checked (e.g. a syntax error).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FileFindings {
    pub file: PathBuf,
    pub findings: Vec<Finding>,
    pub error: Option<String>,
}

/// The static checker's findings, one entry per file in order.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Findings {
    pub results: Vec<FileFindings>,
}

impl Command for CheckFiles {
    type Reply = Findings;
}

/// Scan `files` with the static rules, in one worker.
pub fn scan(
    python: &str,
    worker_path: &Path,
    scratch: &Path,
    files: &[PathBuf],
) -> Result<Vec<FileFindings>> {
    let fail = |message: String| Error::Python {
        python: python.into(),
        message,
    };
    std::fs::create_dir_all(scratch).map_err(|e| Error::write(scratch, e))?;
    let spec = Spawn::role(
        python,
        worker_path,
        "check",
        scratch.join("check.log"),
        scratch.to_path_buf(),
    );
    let mut worker = Worker::spawn(&spec).map_err(|e| fail(e.to_string()))?;
    // The worker runs elsewhere: it gets absolute paths; findings are reported under the names given.
    let absolute: Vec<PathBuf> = files
        .iter()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()))
        .collect();
    let reply = worker.request(CheckFiles { files: absolute }, CHECK_DEADLINE);
    worker.finish();
    match reply {
        Ok(Reply::Ok(Findings { mut results })) => {
            if results.len() != files.len() {
                return Err(Error::Other(
                    "the static checker answered for another number of files".into(),
                ));
            }
            for (r, f) in results.iter_mut().zip(files) {
                r.file = f.clone();
            }
            Ok(results)
        }
        Ok(Reply::Err(e)) => Err(fail(e.message)),
        Err(f) => Err(fail(f.to_string())),
    }
}

impl FileFindings {
    /// The findings at `min` severity or above.
    pub fn at_least(self, min: &Severity) -> Vec<Finding> {
        self.findings
            .into_iter()
            .filter(|f| &f.severity >= min)
            .collect()
    }
}

/// `file:line: severity rule: why`, one line per finding, as compilers print them.
pub fn render(results: &[FileFindings], min: &Severity) -> String {
    let mut out = String::new();
    for r in results {
        if let Some(error) = &r.error {
            out.push_str(&format!("{}: error: {error}\n", r.file.display()));
        }
        for f in r.findings.iter().filter(|f| &f.severity >= min) {
            let severity = match f.severity {
                Severity::Info => "info",
                Severity::Warning => "warning",
                Severity::Error => "error",
            };
            out.push_str(&format!(
                "{}:{}: {severity} {}: {}\n",
                r.file.display(),
                f.line,
                f.rule,
                f.why
            ));
        }
    }
    out
}

/// Whether any file has an error-level finding or could not be checked.
pub fn has_errors(results: &[FileFindings]) -> bool {
    results
        .iter()
        .any(|r| r.error.is_some() || r.findings.iter().any(|f| f.severity == Severity::Error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity) -> Finding {
        Finding {
            rule: "python.threads".into(),
            severity,
            line: 3,
            why: "starts a thread".into(),
        }
    }

    #[test]
    fn renders_like_a_compiler_and_filters_by_severity() {
        let results = vec![FileFindings {
            file: "k.py".into(),
            findings: vec![finding(Severity::Info), finding(Severity::Warning)],
            error: None,
        }];
        assert_eq!(
            render(&results, &Severity::Warning),
            "k.py:3: warning python.threads: starts a thread\n"
        );
        assert_eq!(render(&results, &Severity::Info).lines().count(), 2);
        assert!(!has_errors(&results));
    }

    #[test]
    fn an_unparsable_file_or_an_error_finding_fails() {
        let broken = vec![FileFindings {
            file: "k.py".into(),
            findings: vec![],
            error: Some("syntax error".into()),
        }];
        assert!(has_errors(&broken));
        let error = vec![FileFindings {
            file: "k.py".into(),
            findings: vec![finding(Severity::Error)],
            error: None,
        }];
        assert!(has_errors(&error));
    }
}
