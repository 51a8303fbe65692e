//! What each evaluation is expected to cost, so the schedule can pack the slots longest first:
//! the seconds the task's evaluation took in earlier runs (cached per device, timing mode and
//! sizes), else, for a task never measured there, its work from the task facts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::Result;
use crate::record::Evaluation;
use crate::task::Task;
use crate::taskfacts::TaskFacts;

/// An evaluation's expected cost. Unmeasured tasks rank above every measured one (the unknown
/// may be the longest, and longest first is what packs well), among themselves by their work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cost {
    /// Seconds the task's longest evaluation took in the last run that measured it.
    Measured(f64),
    /// GFLOP plus GB moved at full size (task facts); 0 without facts.
    Unmeasured(f64),
}

impl Default for Cost {
    fn default() -> Cost {
        Cost::Unmeasured(0.0)
    }
}

impl Cost {
    fn rank(self) -> (u8, f64) {
        match self {
            Cost::Measured(s) => (0, s),
            Cost::Unmeasured(w) => (1, w),
        }
    }
}

impl Eq for Cost {}

impl PartialOrd for Cost {
    fn partial_cmp(&self, other: &Cost) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cost {
    fn cmp(&self, other: &Cost) -> std::cmp::Ordering {
        let (a, b) = (self.rank(), other.rank());
        a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
    }
}

/// Measured seconds per task for this run's kind of work, read from and written back to
/// `costs.json` in kbench's cache (`{"<device> <mode> <sizes>": {"level1/19_ReLU": 3.2}}`).
pub struct Costs {
    path: PathBuf,
    key: String,
    known: BTreeMap<String, f64>,
    /// This run's measurements: each task's longest evaluation.
    seen: BTreeMap<String, f64>,
}

type Table = BTreeMap<String, BTreeMap<String, f64>>;

fn read_table(path: &Path) -> Table {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

impl Costs {
    /// The measurements of runs of the same kind: device, timing mode, sizes.
    pub fn kind(config: &Config) -> String {
        format!(
            "{} {} {}",
            config.device.torch_name(),
            config.mode.as_str(),
            config.overrides_json()
        )
    }

    pub fn load(cache: &Path, key: String) -> Costs {
        let path = cache.join("costs.json");
        let known = read_table(&path).remove(&key).unwrap_or_default();
        Costs {
            path,
            key,
            known,
            seen: BTreeMap::new(),
        }
    }

    pub fn estimate(&self, task: &Task, facts: Option<&TaskFacts>) -> Cost {
        match self.known.get(&task.label()) {
            Some(&seconds) => Cost::Measured(seconds),
            None => Cost::Unmeasured(facts.map_or(0.0, |f| {
                (f.flops.unwrap_or(0) as f64 + f.min_bytes.unwrap_or(0) as f64) / 1e9
            })),
        }
    }

    pub fn observe(&mut self, e: &Evaluation) {
        let longest = self.seen.entry(e.label()).or_insert(0.0);
        // Its own work: waiting for other lanes is not its cost.
        *longest = longest.max(e.seconds - e.phases.gpu_wait_s);
    }

    /// Write this run's measurements over the cached ones (re-reading the file first: other
    /// runs may share the cache).
    pub fn save(&self) -> Result<()> {
        if self.seen.is_empty() {
            return Ok(());
        }
        let mut table = read_table(&self.path);
        table
            .entry(self.key.clone())
            .or_default()
            .extend(self.seen.clone());
        let bytes = serde_json::to_vec_pretty(&table)
            .map_err(|e| crate::error::Error::Other(format!("serialize the costs: {e}")))?;
        crate::atomic_file::write(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmeasured_ranks_first_then_by_size() {
        let mut costs = [
            Cost::Measured(3.0),
            Cost::Unmeasured(0.5),
            Cost::Measured(30.0),
            Cost::Unmeasured(7.0),
        ];
        costs.sort_by(|a, b| b.cmp(a));
        assert_eq!(
            costs,
            [
                Cost::Unmeasured(7.0),
                Cost::Unmeasured(0.5),
                Cost::Measured(30.0),
                Cost::Measured(3.0),
            ]
        );
    }

    #[test]
    fn measured_seconds_persist_per_kind() {
        let dir = tempfile::tempdir().unwrap();
        let task = |name: &str| Task {
            id: crate::task::TaskId {
                level: 1,
                number: 19,
            },
            name: name.into(),
            path: PathBuf::new(),
        };
        let facts = TaskFacts {
            flops: Some(2_000_000_000),
            min_bytes: Some(1_000_000_000),
            ..TaskFacts::default()
        };
        let mut costs = Costs::load(dir.path(), "cpu".into());
        assert_eq!(
            costs.estimate(&task("19_ReLU"), Some(&facts)),
            Cost::Unmeasured(3.0)
        );
        for seconds in [4.0, 9.0, 1.0] {
            let mut e = crate::record::fixtures::sample_record().evaluations[0].clone();
            e.task_name = "19_ReLU".into();
            // Two of its seconds were spent waiting for another lane: not its cost.
            e.phases.gpu_wait_s = 2.0;
            e.seconds = seconds + 2.0;
            costs.observe(&e);
        }
        costs.save().unwrap();
        let again = Costs::load(dir.path(), "cpu".into());
        assert_eq!(again.estimate(&task("19_ReLU"), None), Cost::Measured(9.0));
        // Another kind of run (another device or size) has measured nothing.
        let other = Costs::load(dir.path(), "cuda".into());
        assert_eq!(
            other.estimate(&task("19_ReLU"), None),
            Cost::Unmeasured(0.0)
        );
    }
}
