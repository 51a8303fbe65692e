//! `kbench serve`'s service: the run's set-up kept warm between requests (probe, task facts,
//! confinement, build cache, compile pool and each slot's ready workers, in the backend), and
//! each request judged as `eval` judges a file: its source written into the run folder in the
//! mirrored layout, statically checked, then built and evaluated through the shared `queue`,
//! and appended to the run record before the reply leaves.
//!
//! A request's settings (`request::Settings`) that differ from the service's make a run of their
//! own (`Variant`: its `Config`, backend, workers and record, in `variants/<settings>/`), so that
//! each record holds evaluations of one configuration only; at most `MAX_VARIANTS` of them.
//!
//! A request with an id is judged once (`answers`): its retry, here or at a sibling instance of
//! the run (`--instance`), gets the result it had. Each recorded result says where it was judged
//! (`record::Served`: the id, the instance, the node and the slot's GPU).
//!
//! Nothing waits for ever: each stage of a request has its deadline (`deadlines`, from the run's
//! timeouts), and a service asked to stop waits `GRACE` for the requests admitted, then records
//! those left as not finished (`close`) before it writes each run's summary (`stop`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cli::EvalArgs;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pipeline;
use crate::probe::Probe;
use crate::record::{Ceilings, RunRecord, Served};
use crate::report;
use crate::sandbox::Confinement;
use crate::setup::{self, Facts};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Verdict;

use super::answers::{Answers, Asked, Claim};
use super::place::Place;
use super::queue::{Deadlines, Job, Outcome, Queue, Refused};
use super::reply;
use super::request::{self, Key, Refusal};

/// Runs with settings of their own a service keeps at most, its own included: each keeps warm
/// workers per slot.
pub const MAX_VARIANTS: usize = 4;

/// How long a service asked to stop waits for the requests admitted before it records those
/// left as not finished: with the summaries, it ends within half a minute.
pub const GRACE: Duration = Duration::from_secs(20);
/// How long `stop` waits for a record being written before it leaves that run's summary out.
const RECORD_WAIT: Duration = Duration::from_secs(3);
/// A stage's time beyond the deadlines of its worker requests: kbench's own work (starting
/// workers, staging the submission, hashing a build folder, writing the record).
const STAGE_MARGIN: Duration = Duration::from_secs(30);
/// `--timeout-call`s an evaluation may spend beside its trials: the perturbed and determinism
/// checks' calls, the warm-ups (a call and an allowance each), the blocks past the budget, the
/// process check, the state checks and the profiled calls. Generous: nothing honest nears it.
const CALLS_BESIDE_TRIALS: u32 = 64;
/// What timing may take beyond `--budget` (the server mode's cap is a minute).
const TIMING_BEYOND_BUDGET: Duration = Duration::from_secs(60);

/// Each stage's deadline under `config`: the most the deadlines of its worker requests add up
/// to, and `STAGE_MARGIN`. Only a wait that never ends reaches one (every worker request has
/// its own deadline): a build is an import and a warm-up under `--timeout-compile` each; an
/// evaluation attempt is the candidate's load (and KernelBench's own, with what they compile),
/// torch.compile's arm, timing and its calls (each trial a candidate's call and the reference's
/// check, and KernelBench's trials again), and an evaluation is one attempt, one more (alone, or
/// on a fresh pair) and the other lanes' attempts it may wait for.
pub fn deadlines(config: &Config) -> Deadlines {
    let t = &config.timeouts;
    let calls = 4 * config.trials + CALLS_BESIDE_TRIALS;
    let attempt = (t.load + t.compile) * 2
        + t.compile
        + config.budget
        + TIMING_BEYOND_BUDGET
        + t.call * calls;
    Deadlines {
        build: t.compile * 2 + STAGE_MARGIN,
        evaluate: attempt * (config.lanes as u32 + 1) + STAGE_MARGIN,
    }
}

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
    /// Where the service runs (`--instance`, the node).
    pub place: Place,
}

/// One run of the service: its settings, backend, deadlines and record.
struct Variant {
    key: Key,
    config: &'static Config,
    backend: Arc<pipeline::Python<'static>>,
    deadlines: Deadlines,
    /// Locked to append one evaluation (`record`), and by `stop` within `RECORD_WAIT`.
    record: parking_lot::Mutex<RunRecord>,
}

pub struct Service {
    shared: Shared,
    variants: Mutex<Vec<Arc<Variant>>>,
    queue: Queue<pipeline::Python<'static>>,
    max_source: usize,
    answers: Answers,
}

impl Service {
    /// The service with its own run started (or resumed with --resume), and `capacity` places in
    /// its queue.
    pub fn start(shared: Shared, capacity: usize, max_source: usize) -> Result<Service> {
        let base = Key::of(&shared.args);
        let own = variant(&shared, base, &shared.args)?;
        let answers = Answers::new(&own.config.out, shared.place.siblings.clone());
        own.keep_answers(&base, &answers)?;
        let queue = Queue::start(
            own.config.jobs,
            (own.config.slots(), own.config.lanes),
            capacity,
        );
        own.backend.warm_up();
        Ok(Service {
            answers,
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
    /// result is in the record; a refusal before anything ran. A request with an id judged before
    /// (here or by a sibling instance) gets that result again (`"replayed": true`).
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
        let id = request.id()?;
        let key = request.settings.resolve(Key::of(&self.shared.args))?;
        let variant = self.variant(key)?;
        let Some(id) = id else {
            return self.judge(&variant, task, &request.source, None);
        };
        let asked = Asked {
            task: task.label(),
            sha256: format!("{:x}", Sha256::digest(request.source.as_bytes())),
            settings: key.folder(),
        };
        match self.answers.claim(id, &asked)? {
            Claim::Done(reply) => Ok(replayed(reply)),
            Claim::Waiting(waiter) => {
                let within = variant.deadlines.build + variant.deadlines.evaluate;
                waiter.wait(within).map(replayed)
            }
            Claim::New(ticket) => {
                let reply = self.judge(&variant, task, &request.source, Some(id));
                ticket.finish(&asked, &reply);
                reply
            }
        }
    }

    /// Judge `source` for `task` in `variant`'s run: admitted, written, statically checked,
    /// queued, and recorded (with the request's `id`) before the reply.
    fn judge(
        &self,
        variant: &Arc<Variant>,
        task: &Task,
        source: &str,
        id: Option<&str>,
    ) -> std::result::Result<Value, Refusal> {
        let admission = self.queue.admit().map_err(|refused| match refused {
            Refused::Full => Refusal::new(
                429,
                format!(
                    "the queue is full ({} requests admitted, --queue): retry later",
                    self.queue.load().1
                ),
            ),
            Refused::Stopping => Refusal::new(503, "the service is draining: send it elsewhere"),
        })?;
        let instance = self.shared.place.instance.as_deref();
        let submission = write_submission(variant.config, task, source, instance)
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
        variant.backend.expect_one(task);
        let (tx, rx) = mpsc::channel();
        let recorder = Arc::clone(variant);
        let served = self.shared.place.served(id);
        self.queue.submit(
            admission,
            Job {
                backend: Arc::clone(&variant.backend),
                task: task.clone(),
                submission,
                deadlines: variant.deadlines,
                done: Box::new(move |outcome| {
                    let _ = tx.send(recorder.record(outcome, served));
                }),
            },
        );
        rx.recv()
            .unwrap_or_else(|_| Err(Refusal::new(500, "kbench failed to finish the evaluation")))
    }

    /// Whether the service has stopped admitting requests (asked to stop: it drains).
    pub fn draining(&self) -> bool {
        self.queue.closed()
    }

    /// The instance's name (`--instance`) and node.
    pub fn place(&self) -> &Place {
        &self.shared.place
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

    /// Admit no more requests, wait up to `GRACE` for those admitted, and record those left as
    /// not finished (their replies say so); how many were left.
    pub fn close(&self) -> usize {
        self.queue.close(GRACE)
    }

    /// Write each run's summary and page (after `close`); a run whose record is still being
    /// written after `RECORD_WAIT` is left out, and said so.
    pub fn stop(&self) -> Result<()> {
        for v in self.variants.lock().expect("variants lock").iter() {
            let Some(record) = v.record.try_lock_for(RECORD_WAIT) else {
                eprintln!(
                    "kbench serve: {} is still being written: its summary is not",
                    v.config.out.join("results.json").display()
                );
                continue;
            };
            let summary = report::summary::summarize_run(&record);
            report::write_summary(&summary, &v.config.out)?;
            report::write_html(&record, &summary, &v.config.out)?;
        }
        Ok(())
    }
}

impl Variant {
    /// Keep the answer of every request its record holds judged (on `--resume`) where a stop
    /// kept it from being written.
    fn keep_answers(&self, key: &Key, answers: &Answers) -> Result<()> {
        let results = self.config.out.join("results.json");
        let record = self.record.lock();
        for eval in &record.evaluations {
            let Some(id) = eval.served.as_ref().and_then(|s| s.id.as_deref()) else {
                continue;
            };
            if eval.verdict == Verdict::Skipped {
                continue;
            }
            let asked = Asked {
                task: eval.label(),
                sha256: eval.sha256.clone(),
                settings: key.folder(),
            };
            answers.keep(
                id,
                &asked,
                &reply::render(eval, self.config.contract, &results),
            )?;
        }
        Ok(())
    }

    /// Append the request's evaluation to the record (said on stderr if the write fails: the
    /// reply still goes), with the request's id and where it was judged (`served`, its GPU
    /// from the slot), and the reply: a refusal (503) for a request the service stopped before
    /// it finished.
    fn record(&self, outcome: Outcome, served: Served) -> std::result::Result<Value, Refusal> {
        let (mut eval, finished, slot) = match outcome {
            Outcome::Judged(eval, slot) => (eval, true, slot),
            Outcome::Unfinished(eval) => (eval, false, None),
        };
        eval.served = Some(Served {
            gpu: slot.and_then(|slot| self.config.gpu_index(slot)),
            ..served
        });
        let results = self.config.out.join("results.json");
        let reply = reply::render(&eval, self.config.contract, &results);
        let unfinished = format!(
            "{}; recorded as {} in {}",
            eval.reason,
            eval.verdict,
            results.display()
        );
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
        let mut record = self.record.lock();
        if let Err(e) = setup::append(&mut record, eval, &self.config.out) {
            eprintln!("kbench serve: failed to {e}");
        }
        if finished {
            Ok(reply)
        } else {
            Err(Refusal::new(503, unfinished))
        }
    }
}

/// A reply given again to a request judged before.
fn replayed(mut reply: Value) -> Value {
    reply["replayed"] = Value::Bool(true);
    reply
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
    record.instance = shared.place.instance.clone();
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
        deadlines: deadlines(config),
        backend: Arc::new(backend),
        record: parking_lot::Mutex::new(record),
    })
}

/// Write `source` as a new candidate of `task` in the run's `submissions/` folder, in the
/// mirrored layout (`levelL/N_Name/NNNNNN.py`; an instance's `NAME.NNNNNN.py`, so that the
/// instances' files keep their names apart in a merged run), never over an earlier one.
fn write_submission(
    config: &Config,
    task: &Task,
    source: &str,
    instance: Option<&str>,
) -> Result<Submission> {
    let folder = Path::new(&format!("level{}", task.id.level)).join(&task.name);
    let dir = config.out.join("submissions").join(&folder);
    std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
    let mut n = std::fs::read_dir(&dir)
        .map_err(|e| Error::read(&dir, e))?
        .count();
    loop {
        let name = match instance {
            Some(instance) => format!("{instance}.{n:06}.py"),
            None => format!("{n:06}.py"),
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::resolved;

    #[test]
    fn each_stage_s_deadline_follows_the_run_s_timeouts() {
        let small = [
            "--timeout-compile",
            "2",
            "--timeout-load",
            "5",
            "--timeout-call",
            "3",
            "--trials",
            "2",
            "--budget",
            "1",
        ];
        // (flags, build's seconds, evaluation's seconds): an attempt of the defaults is
        // (300 + 600) * 2 + 600 + 10 + 60 + 120 * (4 * 5 + 64) = 12550 s.
        for (flags, build, evaluate) in [
            (&[][..], 1230, 12550 * 2 + 30),
            (&["--lanes", "2"][..], 1230, 12550 * 3 + 30),
            (&small[..], 34, (14 + 2 + 1 + 60 + 3 * 72) * 2 + 30),
        ] {
            let got = deadlines(&resolved(flags));
            assert_eq!(
                got,
                Deadlines {
                    build: Duration::from_secs(build),
                    evaluate: Duration::from_secs(evaluate),
                },
                "{flags:?}"
            );
        }
    }
}
