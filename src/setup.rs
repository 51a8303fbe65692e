//! What `eval` and `serve` share to set up and keep a run: the confinement of submission code,
//! the GPUs' checks and ceilings, the backend (`pipeline::Python`) from a `Config`, the static
//! findings of submission files and the facts of tasks, and the run record (started, resumed,
//! and rewritten as each evaluation is added). Neither command builds or evaluates any other way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::cache_key;
use crate::check;
use crate::config::{self, Config, GpuUse};
use crate::error::{Error, Result};
use crate::nvml;
use crate::pipeline;
use crate::probe::Probe;
use crate::record::{self, Evaluation, RunRecord, SCHEMA_VERSION};
use crate::report;
use crate::sandbox;
use crate::shard::Shard;
use crate::sol;
use crate::submission::{self, Submission};
use crate::task::{self, Task};
use crate::taskfacts;

/// Each file's static findings (warnings and worse), by file.
pub type Findings = HashMap<String, Vec<check::Finding>>;
/// The facts of each task at hand.
pub type Facts = HashMap<task::TaskId, taskfacts::TaskFacts>;

/// The run's confinement of submission code (`--sandbox`): what it must read, tried once.
pub fn confine(config: &Config, worker_path: &Path) -> Result<sandbox::Confinement> {
    let builds = config.cache.join("builds");
    std::fs::create_dir_all(&builds).map_err(|e| Error::write(&builds, e))?;
    // CUTLASS_DIR: the headers `kbench import cuda-l2`'s kernels build against, where set.
    let cutlass = std::env::var_os("CUTLASS_DIR").map(PathBuf::from);
    // `--sanitize`: the tool's own folder (its libraries beside it), where the candidate starts it.
    let sanitizer = config.sanitizer.as_ref().and_then(|t| t.parent());
    let readonly: Vec<_> = [worker_path.to_path_buf(), config.tasks_root.clone()]
        .into_iter()
        .chain(cutlass.filter(|p| p.is_dir()))
        .chain(sanitizer.map(Path::to_path_buf))
        .collect();
    sandbox::Confinement::probe(
        config.sandbox,
        &config.python,
        &readonly,
        &config.cache,
        config.device == config::Device::Cuda,
    )
    .map_err(Error::Other)
}

/// The backend of a run: builds keyed by torch's version, the architectures and `--compat`,
/// their records authenticated by the cache's key.
pub fn backend<'a>(
    config: &'a Config,
    worker_path: PathBuf,
    probe: &Probe,
    facts: &'a Facts,
    timing_cpus: Vec<usize>,
    confinement: sandbox::Confinement,
    annotations: pipeline::Annotations,
) -> Result<pipeline::Python<'a>> {
    let mut build_key = format!(
        "torch {} arch {}",
        probe.torch().unwrap_or_default(),
        config.cuda_arch_list
    );
    // `--compat` builds a rewritten copy.
    if let Some(compat) = config.staged_rewrite() {
        build_key.push_str(&format!(" compat {:?}", compat.lowest_arch));
    }
    let cache_key =
        cache_key::CacheKey::open(&config.cache).map_err(|e| Error::write(&config.cache, e))?;
    Ok(pipeline::Python::new(
        config,
        worker_path,
        (build_key, cache_key),
        facts,
        timing_cpus,
        confinement,
        annotations,
    ))
}

/// Speed-of-light ceilings of this machine's first GPU (measured once per GPU, cached); none
/// on the CPU or where the measurement fails (said on stderr).
pub fn speed_of_light(
    config: &Config,
    worker_path: &Path,
    probe: &Probe,
) -> Option<record::Ceilings> {
    match (config.device, config.gpus.first()) {
        (config::Device::Cuda, Some(&gpu)) => {
            sol::load_or_measure(&config.python, worker_path, &config.cache, probe, gpu)
                .map_err(|e| eprintln!("kbench: speed-of-light check off: {e}"))
                .ok()
        }
        _ => None,
    }
}

/// With --dedicated, refuse GPUs on which other processes compute (NVML must be readable).
pub fn check_dedicated(config: &Config) -> Result<()> {
    if config.gpu_use == GpuUse::Shared {
        return Ok(());
    }
    for gpu in &config.gpus {
        let busy = nvml::Nvml::open(*gpu)
            .and_then(|n| n.compute_processes())
            .map_err(|e| Error::Usage(format!("check that GPU {gpu} is dedicated: {e}")))?;
        if busy > 0 {
            return Err(Error::Usage(format!(
                "run on GPU {gpu} with --dedicated: {busy} other process(es) compute on it"
            )));
        }
    }
    Ok(())
}

/// Static checks of submission files before anything runs: cheap (no torch), and evidence in
/// each evaluation (warnings and worse, by file).
pub fn static_findings(
    config: &Config,
    worker_path: &Path,
    cache: &Path,
    submissions: &[&Submission],
) -> Result<Findings> {
    let paths: Vec<PathBuf> = submissions.iter().map(|s| s.path.clone()).collect();
    let scanned = check::scan(&config.python, worker_path, &cache.join("check"), &paths)?;
    Ok(submissions
        .iter()
        .zip(scanned)
        .map(|(s, r)| (s.file.clone(), r.at_least(&check::Severity::Warning)))
        .collect())
}

/// Facts of `tasks` (cached per task file): the constants a shape perturbation may change, and
/// degenerate-task flags recorded with each result.
pub fn task_facts(
    config: &Config,
    worker_path: &Path,
    cache: &Path,
    mut tasks: Vec<Task>,
) -> Result<Facts> {
    tasks.dedup_by_key(|t| t.id);
    let bar = indicatif::ProgressBar::new(tasks.len() as u64).with_message("task facts");
    let facts = taskfacts::collect(
        &tasks,
        &config.python,
        worker_path,
        cache,
        config.jobs,
        |_| bar.inc(1),
    )?;
    bar.finish_and_clear();
    Ok(tasks.iter().map(|t| t.id).zip(facts).collect())
}

/// A new record (of `shard`, when one), or with --resume the one in --out (whose settings must
/// match this run's).
pub fn start_record(
    config: &Config,
    probe: &Probe,
    unmatched: Vec<submission::Unmatched>,
    shard: Option<Shard>,
) -> Result<RunRecord> {
    let existing = config.out.join("results.json");
    if existing.exists() {
        if !config.resume {
            return Err(Error::Usage(format!(
                "write to {}: it holds a run already; pass --resume to continue it or choose another --out",
                config.out.display()
            )));
        }
        let bytes = std::fs::read(&existing).map_err(|e| Error::read(&existing, e))?;
        let mut record = RunRecord::parse(&bytes)?;
        if record.config != config.recorded() {
            return Err(Error::Usage(format!(
                "resume {}: its settings differ from this run's: {}",
                config.out.display(),
                record.config.differences(&config.recorded()).join(", ")
            )));
        }
        check_mac(config, &bytes)?;
        record.unmatched = unmatched;
        record.key = config.record_key.clone();
        return Ok(record);
    }
    Ok(RunRecord {
        schema_version: SCHEMA_VERSION,
        kbench_version: env!("CARGO_PKG_VERSION").into(),
        run_id: config.run_id.clone(),
        started_at: chrono::Local::now().to_rfc3339(),
        environment: probe.environment(),
        config: config.recorded(),
        evaluations: Vec::new(),
        unmatched,
        published: None,
        command: std::env::args().collect(),
        shard,
        unauthenticated: false,
        instance: None,
        key: config.record_key.clone(),
    })
}

/// In a run with a seed file, a record to resume must authenticate under its key: resuming one
/// that does not would seal an edit as the run's. (What `parse` read of it is what the MAC
/// covers: the member after it holds the MAC alone.)
fn check_mac(config: &Config, bytes: &[u8]) -> Result<()> {
    let Some(key) = &config.record_key else {
        return Ok(());
    };
    key.open(bytes).map(drop).map_err(|why| {
        Error::Usage(format!(
            "resume {}: its results.json {why} under this run's --seed-file; run it again in \
             a new --out",
            config.out.display()
        ))
    })
}

/// Add a finished evaluation to the record (in task and file order) and rewrite the record's
/// files in `out`, so that nothing finished is lost if the run stops; a signal's exit waits for
/// the files to be written whole (`signals::writing`).
pub fn append(record: &mut RunRecord, eval: Evaluation, out: &Path) -> Result<()> {
    let _whole = crate::signals::writing();
    record.evaluations.push(eval);
    record
        .evaluations
        .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
    report::write_files(record, out)
}
