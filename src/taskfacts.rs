//! Facts about each task derived from its file, never typed by hand: input, output and
//! parameter bytes, a FLOP count and speed-of-light byte count, the constants that only size
//! the inputs, and flags for degenerate and non-deterministic references. Computed by the
//! `inspect` worker (meta device at full size, CPU at the small size) and cached per content
//! of the task file and its level's scale.toml, so only the first `kbench list --meta` pays.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::task::Task;
use crate::worker::request::{Command, Inspect};
use crate::worker::{CheckName, Link, Reply, Spawn, Worker};

/// The slowest tasks (LSTMs, unrolled step by step on the meta device) take ~30 s.
const INSPECT_DEADLINE: Duration = Duration::from_secs(300);

/// Changes when the inspection's rules change, so cached facts are made again.
const FACTS_VERSION: &[u8] = b"facts 5: derived small sizes aim at a cheap forward";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskFacts {
    pub input_bytes: Option<u64>,
    pub output_bytes: Option<u64>,
    pub param_bytes: Option<u64>,
    /// Inputs, parameters and outputs each moved once.
    pub min_bytes: Option<u64>,
    /// Matmul, convolution and attention FLOPs (elementwise work is not counted: 0 there).
    pub flops: Option<u64>,
    /// Constants that change only the input shapes (`name`, or `name[i]` for a tuple element).
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    pub input_only_constants: Vec<String>,
    /// The reference draws random numbers in forward (dropout, torch.randn).
    pub nondeterministic: Option<bool>,
    /// constant_output, input_independent, identity, below_tolerance (at the small size).
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    pub degenerate: Vec<String>,
    /// Where the small size came from: `scale.toml`, `derived` (no table: input-only constants
    /// shrunk), or absent when the value facts were not computed (see `errors`).
    #[serde(default)]
    pub small_size: Option<String>,
    /// The small size's constants (a derived one stands in for `--scale small` where the tree
    /// has no `scale.toml`).
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(test, schemars(with = "Option<Map<String, Value>>"))]
    pub small_overrides: Map<String, Value>,
    /// One line per step that failed; the facts it would have given stay empty.
    #[serde(default, deserialize_with = "null_as_empty")]
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    pub errors: Vec<String>,
}

/// The task inspector's reply.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Inspected {
    pub facts: TaskFacts,
}

impl Command for Inspect {
    type Reply = Inspected;
}

/// A list or map the inspect worker leaves null when the step that makes it failed.
fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> std::result::Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl TaskFacts {
    /// The facts' failures as one check of the evaluation (`task.facts`, a warning): the run goes
    /// on without what they would have given (shape perturbation, degenerate-task flags).
    pub fn check(&self) -> Option<crate::record::Check> {
        (!self.errors.is_empty()).then(|| crate::record::Check {
            name: CheckName::TaskFacts,
            outcome: crate::record::Outcome::Warn,
            evidence: self.errors.join("; "),
            seconds: 0.0,
            runs: 1,
        })
    }
}

/// What the facts of one file content are cached under; none for a file that cannot be read (its
/// inspection then fails on that task alone).
fn cache_key(task: &Task) -> Option<String> {
    let mut h = Sha256::new();
    h.update(std::fs::read(&task.path).ok()?);
    // The small size comes from scale.toml; a missing table is part of the key too.
    if let Some(dir) = task.path.parent() {
        h.update(std::fs::read(dir.join("scale.toml")).unwrap_or_default());
    }
    h.update(crate::worker::protocol::VERSION.to_le_bytes());
    h.update(FACTS_VERSION);
    Some(format!("{:x}", h.finalize()))
}

/// Facts for every task, in order, from the cache or computed by up to `jobs` inspect workers
/// in parallel; `progress` is called after each task.
pub fn collect(
    tasks: &[Task],
    python: &str,
    worker_path: &Path,
    cache: &Path,
    jobs: usize,
    progress: impl Fn(&Task) + Sync,
) -> Result<Vec<TaskFacts>> {
    let dir = cache.join("taskfacts");
    std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
    let keys: Vec<Option<String>> = tasks.iter().map(cache_key).collect();
    let mut out: Vec<Option<TaskFacts>> = keys
        .iter()
        .map(|key| {
            std::fs::read(dir.join(format!("{}.json", key.as_ref()?)))
                .ok()
                .and_then(|b| serde_json::from_slice::<TaskFacts>(&b).ok())
        })
        .collect();
    let todo: Vec<usize> = (0..tasks.len()).filter(|i| out[*i].is_none()).collect();
    for (task, facts) in tasks.iter().zip(&out) {
        if facts.is_some() {
            progress(task);
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let computed = std::sync::Mutex::new(Vec::new());
    let workers = jobs.clamp(1, todo.len().max(1));
    std::thread::scope(|s| {
        for n in 0..workers {
            let (dir, todo, next, computed, progress) = (&dir, &todo, &next, &computed, &progress);
            s.spawn(move || {
                let mut worker: Option<Worker> = None;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&index) = todo.get(i) else { break };
                    let facts = inspect(&mut worker, &tasks[index], python, worker_path, dir, n);
                    progress(&tasks[index]);
                    computed.lock().expect("facts lock").push((index, facts));
                }
                if let Some(w) = worker {
                    w.finish();
                }
            });
        }
    });
    for (index, facts) in computed.into_inner().expect("facts lock") {
        let facts = facts?;
        if let Some(key) = keys[index].as_ref().filter(|_| facts.errors.is_empty()) {
            let file = dir.join(format!("{key}.json"));
            let bytes =
                serde_json::to_vec_pretty(&facts).map_err(|e| Error::Other(e.to_string()))?;
            std::fs::write(&file, bytes).map_err(|e| Error::write(&file, e))?;
        }
        out[index] = Some(facts);
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// One task's facts from an inspect worker (started on first use, restarted after a failure).
fn inspect(
    worker: &mut Option<Worker>,
    task: &Task,
    python: &str,
    worker_path: &Path,
    dir: &Path,
    n: usize,
) -> Result<TaskFacts> {
    if worker.is_none() {
        let spec = Spawn::role(
            python,
            worker_path,
            "inspect",
            dir.join(format!("inspect-{n}.log")),
            dir.to_path_buf(),
        )
        .env("CUDA_VISIBLE_DEVICES", "")
        // Parallel workers share the cores: one torch thread each.
        .env("OMP_NUM_THREADS", "1");
        *worker = Some(Worker::spawn(&spec).map_err(|e| Error::Python {
            python: python.into(),
            message: e.to_string(),
        })?);
    }
    let w = worker.as_mut().expect("started above");
    Ok(
        match w.request(
            Inspect {
                task: task.path.clone(),
            },
            INSPECT_DEADLINE,
        ) {
            Ok(Reply::Ok(Inspected { facts })) => facts,
            Ok(Reply::Err(e)) => TaskFacts {
                errors: vec![e.message],
                ..TaskFacts::default()
            },
            Err(f) => {
                // The worker is gone; the next task starts a new one.
                *worker = None;
                TaskFacts {
                    errors: vec![f.to_string()],
                    ..TaskFacts::default()
                }
            }
        },
    )
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| {
        format!("{:.1}", b as f64 / (1 << 20) as f64)
    })
}

/// One line per task: level, id, name, then the facts.
pub fn render(tasks: &[Task], facts: &[TaskFacts]) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header([
        "level",
        "id",
        "name",
        "in MiB",
        "out MiB",
        "param MiB",
        "GFLOP",
        "flags",
        "input-only constants",
    ]);
    for (t, f) in tasks.iter().zip(facts) {
        let mut flags: Vec<String> = f.degenerate.clone();
        if f.nondeterministic == Some(true) {
            flags.push("nondeterministic".into());
        }
        if !f.errors.is_empty() {
            flags.push("inspect_failed".into());
        }
        table.add_row([
            t.id.level.to_string(),
            t.id.number.to_string(),
            t.name.clone(),
            mib(f.input_bytes),
            mib(f.output_bytes),
            mib(f.param_bytes),
            match f.flops {
                Some(0) | None => "-".into(),
                Some(n) => format!("{:.1}", n as f64 / 1e9),
            },
            flags.join(","),
            f.input_only_constants.join(","),
        ]);
    }
    table.to_string() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;
    use serde_json::json;

    #[test]
    fn facts_of_a_failed_step_read_as_empty_with_the_error() {
        let facts: TaskFacts = serde_json::from_value(json!({
            "input_bytes": null, "input_only_constants": null, "degenerate": null,
            "nondeterministic": null, "errors": ["small-size build on cpu: no scale.toml"]
        }))
        .unwrap();
        assert!(facts.degenerate.is_empty() && facts.input_only_constants.is_empty());
        let check = facts.check().unwrap();
        assert_eq!(check.name.as_str(), "task.facts");
        assert_eq!(check.outcome, crate::record::Outcome::Warn);
        assert!(check.evidence.contains("no scale.toml"));
        assert!(TaskFacts::default().check().is_none());
    }

    #[test]
    fn renders_flags_and_sizes() {
        let task = Task {
            id: TaskId {
                level: 1,
                number: 19,
            },
            name: "19_ReLU".into(),
            path: "x".into(),
        };
        let facts = TaskFacts {
            input_bytes: Some(4 << 20),
            output_bytes: Some(4 << 20),
            param_bytes: Some(0),
            min_bytes: Some(8 << 20),
            flops: Some(0),
            input_only_constants: vec!["batch_size".into(), "dim".into()],
            nondeterministic: Some(false),
            degenerate: vec!["identity".into()],
            small_size: Some("scale.toml".into()),
            small_overrides: Map::new(),
            errors: vec![],
        };
        let text = render(&[task], &[facts]);
        let row = text.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "1",
                "19",
                "19_ReLU",
                "4.0",
                "4.0",
                "0.0",
                "-",
                "identity",
                "batch_size,dim"
            ]
        );
    }
}
