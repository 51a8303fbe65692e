//! Facts about each task derived from its file, never typed by hand: input, output and
//! parameter bytes, a FLOP count and speed-of-light byte count, the constants that only size
//! the inputs, and flags for degenerate and non-deterministic references. Computed by the
//! `inspect` worker (meta device at full size, CPU at the small size) and cached per content
//! of the task file and its level's scale.toml, so only the first `kbench list --meta` pays.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::task::Task;
use crate::worker::{Reply, Spawn, Worker};

/// The slowest tasks (LSTMs, unrolled step by step on the meta device) take ~30 s.
const INSPECT_DEADLINE: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskFacts {
    pub input_bytes: Option<u64>,
    pub output_bytes: Option<u64>,
    pub param_bytes: Option<u64>,
    /// Inputs, parameters and outputs each moved once.
    pub min_bytes: Option<u64>,
    /// Matmul, convolution and attention FLOPs (elementwise work is not counted: 0 there).
    pub flops: Option<u64>,
    /// Constants that change only the input shapes (`name`, or `name[i]` for a tuple element).
    #[serde(default)]
    pub input_only_constants: Vec<String>,
    /// The reference draws random numbers in forward (dropout, torch.randn).
    pub nondeterministic: Option<bool>,
    /// constant_output, input_independent, identity, below_tolerance (at the small size).
    #[serde(default)]
    pub degenerate: Vec<String>,
    #[serde(default)]
    pub errors: Vec<String>,
}

fn cache_key(task: &Task) -> Result<String> {
    let mut h = Sha256::new();
    h.update(std::fs::read(&task.path).map_err(|e| Error::read(&task.path, e))?);
    // The small size comes from scale.toml; a missing table is part of the key too.
    if let Some(dir) = task.path.parent() {
        h.update(std::fs::read(dir.join("scale.toml")).unwrap_or_default());
    }
    h.update(crate::worker::protocol::VERSION.to_le_bytes());
    Ok(format!("{:x}", h.finalize()))
}

/// Facts for every task, from the cache or computed by one inspect worker; `progress` is
/// called after each task.
pub fn collect(
    tasks: &[Task],
    python: &str,
    worker_path: &Path,
    cache: &Path,
    mut progress: impl FnMut(&Task),
) -> Result<Vec<TaskFacts>> {
    let dir = cache.join("taskfacts");
    std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
    let mut worker: Option<Worker> = None;
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let file = dir.join(format!("{}.json", cache_key(task)?));
        let cached = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<TaskFacts>(&b).ok());
        let facts = match cached {
            Some(f) => f,
            None => {
                if worker.is_none() {
                    let spec = Spawn::role(
                        python,
                        worker_path,
                        "inspect",
                        dir.join("inspect.log"),
                        dir.clone(),
                    )
                    .env("CUDA_VISIBLE_DEVICES", "");
                    worker = Some(Worker::spawn(&spec).map_err(|e| Error::Python {
                        python: python.into(),
                        message: e.to_string(),
                    })?);
                }
                let w = worker.as_mut().expect("started above");
                let facts = match w.request(
                    json!({"cmd": "inspect", "task": task.path}),
                    INSPECT_DEADLINE,
                ) {
                    Ok(Reply::Ok(v)) => {
                        serde_json::from_value(v["facts"].clone()).map_err(|e| {
                            Error::Other(format!("read facts of {}: {e}", task.label()))
                        })?
                    }
                    Ok(Reply::Err(e)) => TaskFacts {
                        errors: vec![e.message],
                        ..TaskFacts::default()
                    },
                    Err(f) => {
                        // The worker is gone; the next task starts a new one.
                        worker = None;
                        TaskFacts {
                            errors: vec![f.to_string()],
                            ..TaskFacts::default()
                        }
                    }
                };
                if facts.errors.is_empty() {
                    let bytes = serde_json::to_vec_pretty(&facts)
                        .map_err(|e| Error::Other(e.to_string()))?;
                    std::fs::write(&file, bytes).map_err(|e| Error::write(&file, e))?;
                }
                facts
            }
        };
        progress(task);
        out.push(facts);
    }
    if let Some(w) = worker {
        w.finish();
    }
    Ok(out)
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
