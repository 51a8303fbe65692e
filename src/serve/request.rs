//! A request to the service, read and checked before anything runs: its task (an id, a label or
//! a task file of the service's own tree, nothing outside it), its source, and the settings a
//! run allows it to choose (`Settings`). Each mistake is a `Refusal` with its HTTP status.

use std::path::Path;

use clap::ValueEnum;
use serde::Deserialize;

use crate::cli::{EvalArgs, ModeArg};
use crate::record::ContractRule;
use crate::task::{Task, TaskId};

/// Why a request was not taken: the HTTP status and a message for the client.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    pub fn new(status: u16, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// The body of `POST /v1/evaluate`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `1/19`, `level1/19`, `level1/19_ReLU`, or a task file of the tree (`level1/19_ReLU.py`).
    pub task: String,
    /// The submission's Python source (a `ModelNew`, as in a submission file).
    pub source: String,
    #[serde(default)]
    pub settings: Settings,
    /// The client's id for the request, the same on each retry: a request judged once is
    /// answered again from its result, never judged twice (`answers`).
    #[serde(default)]
    pub id: Option<String>,
}

/// The longest request id taken.
const MAX_ID: usize = 128;

impl Request {
    /// The request's id, checked: 1 to `MAX_ID` characters of letters, digits and `._:-`.
    pub fn id(&self) -> Result<Option<&str>, Refusal> {
        let Some(id) = self.id.as_deref() else {
            return Ok(None);
        };
        let allowed = |c: char| c.is_ascii_alphanumeric() || "._:-".contains(c);
        if id.is_empty() || id.len() > MAX_ID || !id.chars().all(allowed) {
            return Err(Refusal::new(
                400,
                format!("id {id:?}: 1 to {MAX_ID} letters, digits, '.', '_', ':' or '-'"),
            ));
        }
        Ok(Some(id))
    }
}

/// What a request may choose of its run's settings; the rest are the service's.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub trials: Option<u32>,
    /// Seconds of timing at most.
    pub budget: Option<f64>,
    /// `offline`, `kernelbench` or `server`, as `--mode`.
    pub mode: Option<String>,
    /// `kbench` or `kernelbench`, as `--contract`.
    pub contract: Option<String>,
}

/// The settings that tell runs apart: those of `Settings`, resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Key {
    pub trials: u32,
    pub budget: f64,
    pub mode: ModeArg,
    pub contract: ContractRule,
}

impl Key {
    pub fn of(args: &EvalArgs) -> Key {
        Key {
            trials: args.trials,
            budget: args.budget,
            mode: args.mode,
            contract: args.contract,
        }
    }

    /// `args` with these settings.
    pub fn apply(&self, args: &EvalArgs) -> EvalArgs {
        EvalArgs {
            trials: self.trials,
            budget: self.budget,
            mode: self.mode,
            contract: self.contract,
            ..args.clone()
        }
    }

    /// The folder of a run with these settings, below the service's own.
    pub fn folder(&self) -> String {
        format!(
            "variants/trials{}-budget{}-{}-{}",
            self.trials,
            self.budget,
            value_name(&self.mode),
            value_name(&self.contract)
        )
    }
}

/// A flag value's name as typed (`kernelbench`).
fn value_name(v: &impl ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_string())
}

impl Settings {
    /// The service's settings `base` with this request's choices, each within its range.
    pub fn resolve(&self, base: Key) -> Result<Key, Refusal> {
        let bad = |m: String| Refusal::new(400, m);
        let mut key = base;
        if let Some(trials) = self.trials {
            if !(1..=1000).contains(&trials) {
                return Err(bad(format!("settings.trials {trials}: from 1 to 1000")));
            }
            key.trials = trials;
        }
        if let Some(budget) = self.budget {
            if !(budget > 0.0 && budget <= 3600.0) {
                return Err(bad(format!(
                    "settings.budget {budget}: seconds above 0, at most 3600"
                )));
            }
            key.budget = budget;
        }
        if let Some(mode) = &self.mode {
            key.mode = ModeArg::from_str(mode, false).map_err(|_| {
                bad(format!(
                    "settings.mode '{mode}': offline, kernelbench or server"
                ))
            })?;
        }
        if let Some(contract) = &self.contract {
            key.contract = ContractRule::from_str(contract, false).map_err(|_| {
                bad(format!(
                    "settings.contract '{contract}': kbench or kernelbench"
                ))
            })?;
        }
        Ok(key)
    }
}

/// The task `name` names among `tasks` (the service's, of the tree at `root`): by id, by label,
/// or by its file, which must be one of the tree's.
pub fn task<'a>(tasks: &'a [Task], root: &Path, name: &str) -> Result<&'a Task, Refusal> {
    let unknown = || {
        Refusal::new(
            404,
            format!("unknown task '{name}': not one of this service's tasks (GET /v1/tasks)"),
        )
    };
    if name.ends_with(".py") {
        let path = std::fs::canonicalize(root.join(name)).map_err(|_| unknown())?;
        return tasks
            .iter()
            .find(|t| std::fs::canonicalize(&t.path).is_ok_and(|p| p == path))
            .ok_or_else(unknown);
    }
    if let Ok(id) = name.parse::<TaskId>() {
        return tasks.iter().find(|t| t.id == id).ok_or_else(unknown);
    }
    let label = if name.starts_with("level") {
        name.to_string()
    } else {
        format!("level{name}")
    };
    tasks
        .iter()
        .find(|t| t.label() == label)
        .ok_or_else(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Vec<Task>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("level1")).unwrap();
        let path = dir.path().join("level1/19_ReLU.py");
        std::fs::write(&path, "").unwrap();
        std::fs::write(dir.path().join("outside.py"), "").unwrap();
        let task = Task {
            id: TaskId {
                level: 1,
                number: 19,
            },
            name: "19_ReLU".into(),
            path,
        };
        (dir, vec![task])
    }

    #[test]
    fn tasks_are_named_by_id_label_or_a_file_of_the_tree_only() {
        let (dir, tasks) = tree();
        let outside = dir.path().join("outside.py").display().to_string();
        for (name, found) in [
            ("1/19", true),
            ("level1/19", true),
            ("level1/19_ReLU", true),
            ("1/19_ReLU", true),
            ("level1/19_ReLU.py", true),
            ("level1/../level1/19_ReLU.py", true),
            ("1/20", false),
            ("level1/19_Relu", false),
            ("outside.py", false),
            ("../outside.py", false),
            (outside.as_str(), false),
            ("/etc/passwd.py", false),
        ] {
            let got = task(&tasks, dir.path(), name);
            assert_eq!(got.is_ok(), found, "{name}");
            if let Err(refusal) = got {
                assert_eq!(refusal.status, 404, "{name}");
            }
        }
    }

    #[test]
    fn ids_are_short_plain_names() {
        for (id, ok) in [
            (None, true),
            (Some("3f2a-11:req.7_b"), true),
            (Some(""), false),
            (Some("../x"), false),
            (Some("a b"), false),
            (Some("é"), false),
        ] {
            let request = Request {
                task: "1/19".into(),
                source: String::new(),
                settings: Settings::default(),
                id: id.map(str::to_string),
            };
            assert_eq!(request.id().is_ok(), ok, "{id:?}");
        }
        let long = Request {
            id: Some("a".repeat(MAX_ID + 1)),
            ..serde_json::from_str(r#"{"task": "1/19", "source": ""}"#).unwrap()
        };
        assert_eq!(long.id().unwrap_err().status, 400);
    }

    #[test]
    fn settings_stay_in_range_and_name_their_folder() {
        let base = Key {
            trials: 5,
            budget: 10.0,
            mode: ModeArg::Offline,
            contract: ContractRule::Kbench,
        };
        let settings = |json: &str| serde_json::from_str::<Settings>(json).unwrap();
        for (json, folder) in [
            ("{}", Some("variants/trials5-budget10-offline-kbench")),
            (
                r#"{"trials": 2, "budget": 0.5, "mode": "kernelbench", "contract": "kernelbench"}"#,
                Some("variants/trials2-budget0.5-kernelbench-kernelbench"),
            ),
            (r#"{"trials": 0}"#, None),
            (r#"{"budget": -1}"#, None),
            (r#"{"mode": "fast"}"#, None),
            (r#"{"contract": "none"}"#, None),
        ] {
            let got = settings(json).resolve(base);
            assert_eq!(
                got.as_ref().ok().map(Key::folder).as_deref(),
                folder,
                "{json}"
            );
            if let Err(refusal) = got {
                assert_eq!(refusal.status, 400);
            }
        }
        assert!(serde_json::from_str::<Settings>(r#"{"seed": 1}"#).is_err());
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["kbench", "eval", "subs"]).unwrap();
        let crate::cli::Command::Eval(args) = cli.command else {
            panic!("eval")
        };
        assert_eq!(Key::of(&base.apply(&args)), base);
    }
}
