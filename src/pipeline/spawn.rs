//! How the backend starts its workers: a `Spawner` (processes in a run, scripted workers in
//! tests) and the `Launcher` that says how each role starts (its command, log and environment)
//! before confinement wraps it. Knows no stage.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::worker::{Link, Spawn, Worker};

/// How the backend starts its workers: processes (`Processes`), or in tests scripted workers.
pub trait Spawner: Sync {
    type Worker: Link + Send;
    /// Start the worker `spec` describes.
    fn spawn(&self, spec: &Spawn) -> std::io::Result<Self::Worker>;
    /// Ask `worker` to exit, and make sure it has: whether every process it started is known to
    /// have ended (`Worker::finish`).
    fn finish(worker: Self::Worker) -> bool;
    /// `finish`, once the worker had `grace` to exit on its own (a tool wrapping it writes its
    /// report as it exits).
    fn finish_within(worker: Self::Worker, _grace: std::time::Duration) -> bool {
        Self::finish(worker)
    }
}

/// Worker processes: the real backend's workers.
pub struct Processes;

impl Spawner for Processes {
    type Worker = Worker;

    fn spawn(&self, spec: &Spawn) -> std::io::Result<Worker> {
        Worker::spawn(spec)
    }

    fn finish(worker: Worker) -> bool {
        worker.finish()
    }

    fn finish_within(worker: Worker, grace: std::time::Duration) -> bool {
        worker.finish_within(grace)
    }
}

/// Starts the run's workers of every role (compile, reference, candidate) through `spawner`.
pub(super) struct Launcher<'a, S: Spawner> {
    pub config: &'a Config,
    pub spawner: S,
    /// Folder holding the embedded `kbench_worker` package.
    pub worker_path: PathBuf,
}

impl<S: Spawner> Launcher<'_, S> {
    /// How to start a worker of `role`, before confinement (`Confinement::wrap`, `beside`).
    pub(super) fn spec(&self, role: &str, log: &Path, env: Vec<(String, String)>) -> Spawn {
        let mut spec = Spawn::role(
            &self.config.python,
            &self.worker_path,
            role,
            log.to_path_buf(),
            self.config.out.clone(),
        );
        spec.env.extend(env);
        spec
    }

    pub(super) fn start(&self, spec: &Spawn) -> Result<S::Worker, String> {
        self.spawner
            .spawn(spec)
            .map_err(|e| format!("start a worker with {}: {e}", self.config.python))
    }
}
