//! The compile pool's work and the build cache: each submission imported (and its ModelNew
//! warmed up) in a compile worker on the CPU, into a content-addressed build folder
//! (`build_dir`) that the candidate worker later loads from (`build_env`). A build is reused only
//! while its record authenticates under the cache's key (`CacheKey`) and its artifacts hash as
//! they did when built. Decides no verdict: a failed build is a `Build` status that `decide` maps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::atomic_file;
use crate::cache_key::CacheKey;
use crate::compat::Compat;
use crate::config::Config;
use crate::error::Error;
use crate::record::{Build, BuildStatus};
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;
use crate::untrusted::{self, Entry};
use crate::verdict::Rewritten;
use crate::worker::request::{Compile, Warm};
use crate::worker::{ErrorKind, Failure, Link, Reply, Spawn};

use super::replies::Built;
use super::sizing::sizing;
use super::spawn::{Launcher, Spawner};
use super::stage::{log_path, stage_exchange, stage_submission};
use super::workspace::{build_bind, build_seen};

type WarmReply = Result<Reply<Built>, Failure>;

/// A compile worker's answer: what it built, or the build's failure (its status and message);
/// Err where the stage could not be prepared.
type Compiled = Result<Result<Built, (BuildStatus, String)>, String>;

/// A build about to run, its log at `log`: nothing known of it yet.
fn unbuilt(log: String) -> Build {
    Build {
        status: BuildStatus::Ok,
        message: String::new(),
        log,
        seconds: 0.0,
        cache_hit: false,
        kernels: Vec::new(),
        artifacts_sha256: String::new(),
        warmed: String::new(),
        warm_note: String::new(),
        pool_compiled: Vec::new(),
        slot_compiled: None,
        cache_note: String::new(),
        compat: Vec::new(),
        drift: None,
        drift_rewritten: None,
    }
}

/// The compile pool's side of the backend: where each submission's build lies (its cache key),
/// how workers see it, and the build itself.
pub(super) struct Builder<'a> {
    pub config: &'a Config,
    pub confinement: Confinement,
    /// torch version and GPU architectures: part of every build's cache key.
    pub build_key: String,
    /// The key that authenticates the cache's build records.
    pub cache_key: CacheKey,
    /// Facts of the tasks, for their size in this run (`sizing`).
    pub facts: &'a HashMap<TaskId, TaskFacts>,
}

impl Builder<'_> {
    /// The submission's build: reused from the cache, nothing to build, or imported and warmed
    /// up by a compile worker that `launcher` starts (cached when the same source always gives
    /// it).
    pub(super) fn build<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
    ) -> Build {
        let started = Instant::now();
        let dir = self.build_dir(submission);
        let (log, log_rel) = log_path(&self.config.out, submission, "build");
        let cache_note = match self.cached(&dir) {
            Cached::Trusted(mut build) => {
                build.cache_hit = true;
                build.seconds = started.elapsed().as_secs_f64();
                return *build;
            }
            Cached::Stale => String::new(),
            Cached::Untrusted(note) => note,
        };
        let mut build = unbuilt(log_rel);
        let builds = builds_anything(&submission.path);
        if builds {
            let _ = std::fs::remove_dir_all(&dir);
        }
        // The submission's build folder, handed to the sandbox: its import builds here, and so
        // do JIT compilers (Triton, inductor) that a file which builds nothing at import runs
        // later, in the slot.
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| self.confinement.give(&dir))
            .map_err(|e| format!("create build folder {}: {e}", dir.display()));
        if made.is_ok() && !builds {
            build.seconds = started.elapsed().as_secs_f64();
            build.cache_note = cache_note;
            return build;
        }
        if let Err(e) = made
            .and_then(|()| self.compile_in_pool(launcher, task, submission, &dir, &log, &mut build))
        {
            build.status = BuildStatus::Crashed;
            build.message = e;
            build.cache_note = cache_note;
            return build;
        }
        build.seconds = started.elapsed().as_secs_f64();
        build.artifacts_sha256 = artifacts_hash(&dir);
        // Only outcomes that the same source always gives are cached.
        if matches!(build.status, BuildStatus::Ok | BuildStatus::Failed) {
            self.write_record(&dir, &build);
        }
        // Said by this evaluation only, not by the record later ones reuse.
        build.cache_note = cache_note;
        build
    }

    /// Cache `build` as `dir`'s record, with its MAC under the cache's key beside it, in the
    /// records folder (kbench's alone: nothing confined sees it).
    fn write_record(&self, dir: &Path, build: &Build) {
        let (record, mac) = self.record_paths(dir);
        if let Ok(bytes) = serde_json::to_vec_pretty(build) {
            let tag = self.cache_key.sign(&folder_name(dir), &bytes);
            let written = record
                .parent()
                .map_or(Ok(()), |d| {
                    std::fs::create_dir_all(d).map_err(|e| Error::write(d, e))
                })
                .and_then(|()| atomic_file::write(&record, &bytes))
                .and_then(|()| atomic_file::write(&mac, &tag));
            if written.is_err() {
                let _ = std::fs::remove_file(&record);
            }
        }
    }

    /// Where the record of the build folder `dir` and its MAC lie: `build-records/` in the
    /// cache's root, beside the builds and outside every folder a confined process writes (a
    /// record inside the build folder was the sandbox's to replace with a link, which kbench,
    /// root, then wrote through).
    pub(super) fn record_paths(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let records = self.config.cache.join(RECORDS);
        let name = folder_name(dir);
        (
            records.join(format!("{name}.json")),
            records.join(format!("{name}.mac")),
        )
    }

    /// Stage the submission and run a compile worker on it, confined to its build folder `dir`;
    /// the worker's outcome goes into `build`. A build that failed for known toolchain drift is
    /// tried again with the drift rewritten (`drift_or_own`). Err: the stage could not be
    /// prepared.
    fn compile_in_pool<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
        dir: &Path,
        log: &Path,
        build: &mut Build,
    ) -> Result<(), String> {
        let rewrite = self.config.staged_rewrite();
        match self.compile_once(launcher, task, submission, (dir, log), rewrite, build)? {
            Ok(v) => {
                let drifted = v.build_failures.iter().any(|f| f.drift.is_some());
                build.kernels = v.kernels;
                build.pool_compiled = v.compiled;
                if drifted && rewrite.is_none() {
                    build.drift_rewritten =
                        self.fallback_rewritten(launcher, task, submission, (dir, log));
                }
            }
            Err((status, message)) => {
                build.status = status;
                build.message = message;
                let failed = build.status == BuildStatus::Failed;
                if failed && rewrite.is_none() && build.drift.is_some() {
                    (build.message, build.drift) =
                        self.drift_or_own(launcher, task, submission, (dir, log), build);
                }
            }
        }
        Ok(())
    }

    /// One compile worker on the submission staged with `rewrite`, confined to `dir` (its log
    /// `log`): the worker's reply, or the build's failure. Err: the stage could not be prepared.
    fn compile_once<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
        (dir, log): (&Path, &Path),
        rewrite: Option<&Compat>,
        build: &mut Build,
    ) -> Compiled {
        let mut env = self.build_env(dir);
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
        let stage = stage_exchange(&self.confinement)?;
        let (staged, rewrites) = stage_submission(submission, &stage.stage(), rewrite)?;
        build.compat = rewrites;
        let request = self.compile_request(task, staged);
        let spec = launcher.spec("compile", log, env);
        let spec = self
            .confinement
            .wrap(&spec, &[build_bind(dir)], Some(stage.dir.path()));
        Ok(self.import_and_warm(launcher, &spec, request, build))
    }

    /// A build that failed for known toolchain drift (`build.drift`; its message
    /// `environment: ...`) built once more with the drift rewritten (`--compat`'s rewrite), in a
    /// scratch folder beside `dir` removed after: the toolchain is the cause only where the
    /// rewritten source builds. The message and drift to keep: the drift's, the message saying
    /// that `--compat` builds it; or, where the rewritten source fails too, that failure, the
    /// kernel's own, without the drift (no longer `environment`: it would fail on any torch).
    /// Where the second build could not be tried, the drift's as they were.
    fn drift_or_own<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
        (dir, log): (&Path, &Path),
        build: &Build,
    ) -> (String, Option<String>) {
        let (message, drift) = (build.message.as_str(), build.drift.clone());
        let (second, tried) = self.rebuild_rewritten(launcher, task, submission, (dir, log));
        // The message's words for the drift (`environment: ...`), then the build's own error.
        let (said, rest) = message.split_once("; ").unwrap_or((message, ""));
        let rewrites = second.compat.join(", ");
        match tried {
            Ok(Ok(_)) => (
                format!("{said}; with the drift rewritten it builds ({rewrites}): run with --compat to judge it; {rest}"),
                drift,
            ),
            Ok(Err((BuildStatus::Failed, own))) => (
                format!("with the toolchain's drift rewritten ({rewrites}) the build still fails, for the kernel's own reason: {own}"),
                None,
            ),
            _ => (message.to_string(), drift),
        }
    }

    /// A module that caught a build failing on known toolchain drift and fell back, built once
    /// more with the drift rewritten (`--compat`'s rewrite) in a scratch folder beside `dir`,
    /// removed after: whether every build then succeeds, or the kernel's own failure (a build
    /// that still raised inside the submission, or a build that failed). None where the second
    /// build could not be tried or ended otherwise (a crash, a timeout).
    fn fallback_rewritten<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
        (dir, log): (&Path, &Path),
    ) -> Option<Rewritten> {
        let (second, tried) = self.rebuild_rewritten(launcher, task, submission, (dir, log));
        let own = match tried {
            Ok(Ok(v)) => v.build_failures.into_iter().next().map(|f| f.cause),
            Ok(Err((BuildStatus::Failed, own))) => Some(own),
            _ => return None,
        };
        Some(Rewritten {
            rewrites: second.compat,
            own,
        })
    }

    /// The submission built again with the drift rewritten (`--compat`'s rewrite), in a scratch
    /// folder beside `dir` removed after, its log beside `log`: the second build's record and
    /// the pool's answer.
    fn rebuild_rewritten<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        task: &Task,
        submission: &Submission,
        (dir, log): (&Path, &Path),
    ) -> (Build, Compiled) {
        let scratch = dir.with_extension("drift");
        let log = log.with_extension("compat.log");
        let _ = std::fs::remove_dir_all(&scratch);
        let mut second = unbuilt(String::new());
        let tried = std::fs::create_dir_all(&scratch)
            .map_err(|e| e.to_string())
            .and_then(|()| self.confinement.give(&scratch).map_err(|e| e.to_string()))
            .and_then(|()| {
                let rewrite = Some(&self.config.rewrite);
                self.compile_once(
                    launcher,
                    task,
                    submission,
                    (&scratch, &log),
                    rewrite,
                    &mut second,
                )
            });
        let _ = std::fs::remove_dir_all(&scratch);
        (second, tried)
    }

    /// What the cache holds in `dir`: a record reused only while its MAC verifies under the
    /// cache's key, its artifacts hash as they did when built (a submission, or anything else,
    /// that rewrote them since gets a fresh build), and once its folder is the sandbox's again
    /// (the candidate writes there: locks, JIT caches).
    fn cached(&self, dir: &Path) -> Cached {
        let (record, mac) = self.record_paths(dir);
        let Ok(record) = std::fs::read(record) else {
            return Cached::Stale;
        };
        let tag = std::fs::read(mac).unwrap_or_default();
        let build = serde_json::from_slice::<Build>(&record)
            .ok()
            .filter(|_| self.cache_key.verifies(&folder_name(dir), &record, &tag));
        match build {
            None => Cached::Untrusted(
                "the cached build record did not authenticate under the cache's key (tampered \
                 with, or written by an older kbench): not trusted, built again"
                    .into(),
            ),
            Some(b)
                if b.artifacts_sha256 == artifacts_hash(dir)
                    && self.confinement.give(dir).is_ok() =>
            {
                Cached::Trusted(Box::new(b))
            }
            Some(_) => Cached::Stale,
        }
    }

    /// After an import that defined ModelNew: construct it and call it once on fake tensors in
    /// the same compile worker, so builds in `__init__` or the first forward happen in the pool.
    /// Only a build failure there changes the outcome; a crash or timeout of the warm-up keeps
    /// the import's reply and is noted.
    fn warm(
        &self,
        w: &mut impl Link,
        request: Compile,
        imported: Built,
        build: &mut Build,
    ) -> WarmReply {
        let request = Warm::after(request, self.config.precision);
        build.warmed = "import".into();
        match w.request(request, self.config.timeouts.compile) {
            Ok(Reply::Ok(v)) => {
                build.warmed = v.reached.clone().unwrap_or_else(|| "import".into());
                build.warm_note = first_line(&v.note);
                Ok(Reply::Ok(v))
            }
            Ok(Reply::Err(e)) if e.kind == ErrorKind::Build => Ok(Reply::Err(e)),
            Ok(Reply::Err(e)) => {
                build.warm_note = first_line(&e.message);
                Ok(Reply::Ok(imported))
            }
            Err(f) => {
                build.warm_note = format!("warm-up: {f}");
                Ok(Reply::Ok(imported))
            }
        }
    }

    /// Run a compile worker (`spec`): import the submission (`request`), then warm it up where
    /// it defined ModelNew. The worker's reply, or the build's failure.
    fn import_and_warm<S: Spawner>(
        &self,
        launcher: &Launcher<'_, S>,
        spec: &Spawn,
        request: Compile,
        build: &mut Build,
    ) -> Result<Built, (BuildStatus, String)> {
        let mut w = launcher
            .start(spec)
            .map_err(|e| (BuildStatus::Crashed, e))?;
        let reply = w.request(request.clone(), self.config.timeouts.compile);
        let reply = match reply {
            Ok(Reply::Ok(v)) if v.has_model_new => self.warm(&mut w, request, v, build),
            other => other,
        };
        if !S::finish(w) {
            return Err((
                BuildStatus::Crashed,
                "the compile worker's processes did not end within 30 s of its kill".into(),
            ));
        }
        match reply {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err(e)) if e.kind == ErrorKind::Syntax || e.kind == ErrorKind::Build => {
                build.drift = e.drift;
                Err((BuildStatus::Failed, e.message))
            }
            Ok(Reply::Err(e)) => Err((BuildStatus::ImportFailed, e.message)),
            Err(f @ Failure::Timeout(_)) => Err((BuildStatus::Timeout, f.to_string())),
            Err(f) => Err((BuildStatus::Crashed, f.to_string())),
        }
    }

    /// The submission's build folder: its content, torch and the architectures, what the pool
    /// runs and the run's size overrides.
    pub(super) fn build_dir(&self, submission: &Submission) -> PathBuf {
        let mut h = Sha256::new();
        h.update(&submission.sha256);
        h.update(&self.build_key);
        // What the pool runs of a submission (a build folder of an older pool may lack builds).
        h.update("pool: import, construct, forward");
        // A record of an older kbench says toolchain drift only in its message: built again.
        h.update("drift: a field of the build record");
        h.update(self.config.overrides_json().to_string());
        self.config
            .cache
            .join("builds")
            .join(format!("{:x}", h.finalize()))
    }

    /// Environment shared by the compile and candidate workers: the build folder `dir`, where
    /// they see it.
    pub(super) fn build_env(&self, dir: &Path) -> Vec<(String, String)> {
        let dir = build_seen(&self.confinement, dir);
        vec![
            (
                "TORCH_EXTENSIONS_DIR".into(),
                dir.join("torch_extensions").display().to_string(),
            ),
            (
                "TRITON_CACHE_DIR".into(),
                dir.join("triton").display().to_string(),
            ),
            (
                "TORCH_CUDA_ARCH_LIST".into(),
                self.config.cuda_arch_list.clone(),
            ),
        ]
    }

    /// A compile request for the submission staged at `staged`, of the task as the run sizes it.
    fn compile_request(&self, task: &Task, staged: PathBuf) -> Compile {
        let (scale, set) = sizing(self.config, self.facts.get(&task.id));
        Compile {
            task: task.path.clone(),
            scale,
            set,
            submission: staged,
            device: self.config.device.torch_name().into(),
        }
    }
}

/// What the cache holds for a build folder.
enum Cached {
    /// A record that authenticates, of artifacts unchanged: reused.
    Trusted(Box<Build>),
    /// No record, or one whose artifacts changed since (JIT caches written at run time): built
    /// again.
    Stale,
    /// A record that does not authenticate, or has no MAC: never trusted, built again, and the
    /// evaluation says why.
    Untrusted(String),
}

/// The cache's folder of build records and their MACs under the cache's key.
const RECORDS: &str = "build-records";

/// The build folder's name (its cache key), which its record's MAC covers: a record moved into
/// another folder does not authenticate there.
fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

/// SHA-256 over a build folder's entries (paths and contents, in path order), leaving out the
/// bookkeeping that loading a build rewrites (ninja's logs, torch's lock). The folder is the
/// sandbox's: it is walked through descriptors (`untrusted::walk`), a link or a FIFO counts by
/// its kind and is never followed or read, and a folder that cannot be walked hashes as such.
pub(super) fn artifacts_hash(dir: &Path) -> String {
    const BOOKKEEPING: [&str; 3] = [".ninja_log", ".ninja_deps", "lock"];
    let mut h = Sha256::new();
    let walked = untrusted::walk(dir, &mut |rel, entry| {
        let name = rel.file_name().unwrap_or_default().to_string_lossy();
        if BOOKKEEPING.contains(&name.as_ref()) {
            return;
        }
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        match entry {
            Entry::File(mut file) => {
                if std::io::copy(&mut file, &mut h).is_err() {
                    h.update(b"unreadable");
                }
            }
            Entry::Other(kind) => h.update(kind.as_bytes()),
        }
    });
    if let Err(e) = walked {
        h.update(format!("not walked: {e}").as_bytes());
    }
    format!("{:x}", h.finalize())
}

/// Whether importing the file may build something (an extension or a JIT kernel). Files that
/// name none of the build machinery skip the compile pool: their import happens once, in the
/// candidate worker, which reports its kernels either way, so this only saves a process.
fn builds_anything(path: &Path) -> bool {
    const MARKERS: [&str; 5] = ["cpp_extension", "load_inline", "triton", "cupy", "ctypes"];
    std::fs::read_to_string(path).map_or(true, |source| MARKERS.iter().any(|m| source.contains(m)))
}
