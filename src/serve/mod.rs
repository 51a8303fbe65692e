//! `kbench serve`'s service: the run's set-up kept warm between requests (probe, task facts,
//! confinement, build cache, compile pool and each slot's ready workers, in the backend), and
//! each request judged as `eval` judges a file: its source written into the run folder in the
//! mirrored layout, statically checked, then built and evaluated through the shared `queue`,
//! and appended to the run record before the reply leaves.
//!
//! A request's settings (`request::Settings`) that differ from the service's make a run of their
//! own (`Variant`: its `Config`, backend, workers and record, in `variants/<settings>/`), so that
//! each record holds evaluations of one configuration only; at most `MAX_VARIANTS` of them.

pub mod http;
pub mod queue;
pub mod reply;
pub mod request;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cli::EvalArgs;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pipeline;
use crate::probe::Probe;
use crate::record::{Ceilings, Evaluation, RunRecord};
use crate::report;
use crate::sandbox::Confinement;
use crate::setup::{self, Facts};
use crate::submission::Submission;
use crate::task::Task;

use queue::{Job, Queue};
use request::{Key, Refusal};

/// Runs with settings of their own a service keeps at most, its own included: each keeps warm
/// workers per slot.
pub const MAX_VARIANTS: usize = 4;

/// What every run of the service shares, found once at start.
pub struct Shared {
    /// The service's flags, `--out` resolved.
    pub args: EvalArgs,
    pub root: PathBuf,
    pub tasks: Vec<Task>,
    pub python: String,
    pub worker_path: PathBuf,
    pub probe: Probe,
    /// Facts of every task served (computed, or read from the cache, at start).
    pub facts: &'static Facts,
    pub confinement: Confinement,
    pub timing_cpus: Vec<usize>,
    pub ceilings: Option<Ceilings>,
}

/// One run of the service: its settings, backend and record.
struct Variant {
    key: Key,
    config: &'static Config,
    backend: Arc<pipeline::Python<'static>>,
    record: Mutex<RunRecord>,
}

pub struct Service {
    shared: Shared,
    variants: Mutex<Vec<Arc<Variant>>>,
    queue: Queue<pipeline::Python<'static>>,
    max_source: usize,
}

impl Service {
    /// The service with its own run started (or resumed with --resume), and `capacity` places in
    /// its queue.
    pub fn start(shared: Shared, capacity: usize, max_source: usize) -> Result<Service> {
        let base = Key::of(&shared.args);
        let own = variant(&shared, base, &shared.args)?;
        let queue = Queue::start(
            own.config.jobs,
            (own.config.slots(), own.config.lanes),
            capacity,
        );
        Ok(Service {
            variants: Mutex::new(vec![Arc::new(own)]),
            shared,
            queue,
            max_source,
        })
    }

    /// The service's own run's configuration.
    pub fn config(&self) -> &'static Config {
        self.variants.lock().expect("variants lock")[0].config
    }

    pub fn tasks(&self) -> &[Task] {
        &self.shared.tasks
    }

    pub fn max_source(&self) -> usize {
        self.max_source
    }

    /// Requests admitted and not finished, and the most there may be.
    pub fn load(&self) -> (usize, usize) {
        self.queue.load()
    }

    /// Evaluate `source` for the task `request` names, with its settings: the reply, once the
    /// result is in the record; a refusal before anything ran.
    pub fn evaluate(&self, request: &request::Request) -> std::result::Result<Value, Refusal> {
        let task = request::task(&self.shared.tasks, &self.shared.root, &request.task)?;
        if request.source.len() > self.max_source {
            return Err(Refusal::new(
                413,
                format!(
                    "source of {} bytes: at most {} (--max-source-bytes)",
                    request.source.len(),
                    self.max_source
                ),
            ));
        }
        let key = request.settings.resolve(Key::of(&self.shared.args))?;
        let variant = self.variant(key)?;
        let admission = self.queue.admit().ok_or_else(|| {
            Refusal::new(
                429,
                format!(
                    "the queue is full ({} requests admitted, --queue): retry later",
                    self.queue.load().1
                ),
            )
        })?;
        let submission = write_submission(variant.config, task, &request.source)
            .map_err(|e| Refusal::new(500, format!("kbench failed to {e}")))?;
        let findings = setup::static_findings(
            variant.config,
            &self.shared.worker_path,
            &variant.config.cache,
            &[&submission],
        )
        .map_err(|e| Refusal::new(500, format!("kbench failed to {e}")))?;
        for (file, found) in findings {
            variant.backend.annotations().add(file, found);
        }
        let (tx, rx) = mpsc::channel();
        let recorder = Arc::clone(&variant);
        self.queue.submit(
            admission,
            Job {
                backend: Arc::clone(&variant.backend),
                task: task.clone(),
                submission,
                done: Box::new(move |eval| {
                    let _ = tx.send(recorder.record(eval));
                }),
            },
        );
        rx.recv()
            .map_err(|_| Refusal::new(500, "kbench failed to finish the evaluation"))
    }

    /// The run of `key`'s settings, started on first use.
    fn variant(&self, key: Key) -> std::result::Result<Arc<Variant>, Refusal> {
        let mut variants = self.variants.lock().expect("variants lock");
        if let Some(found) = variants.iter().find(|v| v.key == key) {
            return Ok(Arc::clone(found));
        }
        let own = variants[0].config;
        if own.lanes > 1 {
            return Err(Refusal::new(
                400,
                "settings other than the service's need a service started with --lanes 1",
            ));
        }
        if variants.len() >= MAX_VARIANTS {
            return Err(Refusal::new(
                400,
                format!(
                    "settings: this service runs {MAX_VARIANTS} sets of settings already; use one of theirs"
                ),
            ));
        }
        let args = EvalArgs {
            out: Some(own.out.join(key.folder())),
            ..key.apply(&self.shared.args)
        };
        let started =
            variant(&self.shared, key, &args).map_err(|e| Refusal::new(400, e.to_string()))?;
        variants.push(Arc::new(started));
        Ok(Arc::clone(variants.last().expect("pushed")))
    }

    /// Finish every admitted request, then write each run's summary and page.
    pub fn stop(self) -> Result<()> {
        self.queue.close();
        for v in self.variants.into_inner().expect("variants lock") {
            let record = v.record.lock().expect("record lock");
            let summary = report::summary::summarize_run(&record);
            report::write_summary(&summary, &v.config.out)?;
            report::write_html(&record, &summary, &v.config.out)?;
        }
        Ok(())
    }
}

impl Variant {
    /// Append `eval` to the record (said on stderr if the write fails: the reply still goes),
    /// and the reply.
    fn record(&self, eval: Evaluation) -> Value {
        let results = self.config.out.join("results.json");
        let reply = reply::render(&eval, self.config.contract, &results);
        eprintln!(
            "kbench serve: {} {} {}{} ({:.1} s)",
            eval.label(),
            eval.file,
            eval.verdict,
            eval.timing
                .as_ref()
                .map_or(String::new(), |t| format!(" {:.2}x", t.speedup)),
            eval.seconds
        );
        let mut record = self.record.lock().expect("record lock");
        if let Err(e) = setup::append(&mut record, eval, &self.config.out) {
            eprintln!("kbench serve: failed to {e}");
        }
        reply
    }
}

/// The run of `key`'s settings (flags `args`): its configuration, record and backend.
fn variant(shared: &Shared, key: Key, args: &EvalArgs) -> Result<Variant> {
    let config = Config::resolve(
        args,
        shared.root.clone(),
        shared.python.clone(),
        &shared.probe,
    )?;
    // Kept for the life of the process: the backend's workers read it until the end.
    let config: &'static Config = Box::leak(Box::new(config));
    std::fs::create_dir_all(config.out.join("logs")).map_err(|e| Error::write(&config.out, e))?;
    let mut record = setup::start_record(config, &shared.probe, Vec::new(), None)?;
    record.environment.ceilings = shared.ceilings.clone();
    report::write_files(&record, &config.out)?;
    let backend = setup::backend(
        config,
        shared.worker_path.clone(),
        &shared.probe,
        shared.facts,
        shared.timing_cpus.clone(),
        shared.confinement.clone(),
        pipeline::Annotations::new(Default::default(), shared.ceilings.clone()),
    )?;
    Ok(Variant {
        key,
        config,
        backend: Arc::new(backend),
        record: Mutex::new(record),
    })
}

/// Write `source` as a new candidate of `task` in the run's `submissions/` folder, in the
/// mirrored layout (`levelL/N_Name/NNNNNN.py`), never over an earlier one.
fn write_submission(config: &Config, task: &Task, source: &str) -> Result<Submission> {
    let folder = Path::new(&format!("level{}", task.id.level)).join(&task.name);
    let dir = config.out.join("submissions").join(&folder);
    std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
    let mut n = std::fs::read_dir(&dir)
        .map_err(|e| Error::read(&dir, e))?
        .count();
    loop {
        let name = format!("{n:06}.py");
        let path = dir.join(&name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(source.as_bytes())
                    .map_err(|e| Error::write(&path, e))?;
                return Ok(Submission {
                    task: task.id,
                    file: folder.join(&name).display().to_string(),
                    path,
                    sample: None,
                    sha256: format!("{:x}", Sha256::digest(source.as_bytes())),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(Error::write(&path, e)),
        }
    }
}
