//! `kbench eval`: one run from the submissions to the gate. Tasks, published results and the
//! selection are read first (a mistake there is reported before Python starts); then the probe,
//! `Config`, the GPUs (dedicated, clocks, speed of light), the run record (new or resumed), the
//! static checks and task facts, and the builds and evaluations (`schedule` over
//! `pipeline::Python`), each written into the reports as it finishes; last the gate.
//! Flags are read from `Config` once it is resolved; only what comes before the probe reads
//! `EvalArgs`. Verdicts are decided in `evaluate`, never here.

use std::path::PathBuf;

use crate::cache_key;
use crate::check;
use crate::cli::{EvalArgs, TaskSource};
use crate::config::{self, Config, GpuUse};
use crate::cost;
use crate::cpus;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::gate;
use crate::nvml;
use crate::pipeline;
use crate::probe::Probe;
use crate::published;
use crate::record::{self, RunRecord, SCHEMA_VERSION};
use crate::report;
use crate::sandbox;
use crate::schedule::{self, Event};
use crate::shard::Shard;
use crate::sol;
use crate::submission;
use crate::task::{self, Task};
use crate::taskfacts;
use crate::worker;

use super::tasks;

/// Each file's static findings (warnings and worse), by file.
type Findings = std::collections::HashMap<String, Vec<check::Finding>>;
/// The facts of each task at hand.
type Facts = std::collections::HashMap<task::TaskId, taskfacts::TaskFacts>;

pub fn run(args: &EvalArgs) -> Result<Exit> {
    // Seeds, nonces and pipes in this process's memory stay out of reach of /proc.
    sandbox::protect_self();
    let (root, tasks) = tasks::load(&TaskSource {
        tasks: args.source.tasks.clone(),
        level: None,
    })?;
    // Read before anything starts: a bad file is the user's to fix, not a run to abandon.
    let published = args
        .published
        .as_deref()
        .map(published::read_csv)
        .transpose()?;
    let found = select(args, &tasks)?;
    let python = config::python(args.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("probe"))?;
    let config = Config::resolve(args, root, python, &probe)?;
    let (found, shard) = split_shard(found, config.shard);
    let out = &config.out;
    // Before any thread or process that should keep off the timing CPUs starts.
    let timing_cpus = cpus::reserve(config.slots());

    if config.device == config::Device::Cuda {
        check_dedicated(&config)?;
    }
    // Held for the whole run: dropping them (or a termination signal) restores the clocks.
    let _clock_locks = lock_clocks(&config)?;
    let ceilings = speed_of_light(&config, &worker_path, &probe);
    let mut record = start_record(&config, &probe, found.unmatched, shard)?;
    if published.is_some() {
        record.published = published;
    }
    check_resumed_shard(&config, &record, shard)?;
    record.environment.ceilings = ceilings.clone();
    std::fs::create_dir_all(out.join("logs")).map_err(|e| Error::write(out, e))?;
    let work = pending(&record, found.submissions, &tasks);
    announce(&config, work.len(), record.evaluations.len());
    report::write_files(&record, out)?;

    let (findings, facts) = checks_and_facts(&config, &worker_path, &cache, &work)?;
    let mut build_key = format!(
        "torch {} arch {}",
        probe.torch().unwrap_or_default(),
        config.cuda_arch_list
    );
    // `--compat` builds a rewritten copy.
    if let Some(compat) = &config.compat {
        build_key.push_str(&format!(" compat {:?}", compat.lowest_arch));
    }
    let confinement = confine(&config, &worker_path)?;
    let cache_key =
        cache_key::CacheKey::open(&config.cache).map_err(|e| Error::write(&config.cache, e))?;
    let backend = pipeline::Python::new(
        &config,
        worker_path,
        (build_key, cache_key),
        &facts,
        timing_cpus,
        confinement,
        pipeline::Annotations::new(findings, ceilings),
    );
    evaluate_all(&config, &backend, &work, &facts, &mut record)?;
    finish(&record, &config)
}

/// The run's confinement of submission code (`--sandbox`): what it must read, tried once.
fn confine(config: &Config, worker_path: &std::path::Path) -> Result<sandbox::Confinement> {
    let builds = config.cache.join("builds");
    std::fs::create_dir_all(&builds).map_err(|e| Error::write(&builds, e))?;
    // CUTLASS_DIR: the headers `kbench import cuda-l2`'s kernels build against, where set.
    let cutlass = std::env::var_os("CUTLASS_DIR").map(PathBuf::from);
    let readonly: Vec<_> = [worker_path.to_path_buf(), config.tasks_root.clone()]
        .into_iter()
        .chain(cutlass.filter(|p| p.is_dir()))
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

/// Speed-of-light ceilings of this machine's first GPU (measured once per GPU, cached); none
/// on the CPU or where the measurement fails (said on stderr).
fn speed_of_light(
    config: &Config,
    worker_path: &std::path::Path,
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

/// Build and evaluate `work`, reporting each evaluation as it finishes (final as the backend
/// returns it): the console, the record, the reports on disk, the costs.
fn evaluate_all(
    config: &Config,
    backend: &pipeline::Python<'_>,
    work: &[(Task, submission::Submission)],
    facts: &std::collections::HashMap<task::TaskId, taskfacts::TaskFacts>,
    record: &mut RunRecord,
) -> Result<()> {
    let progress = report::console::Progress::new(work.len());
    let mut built = 0;
    let mut write_error = None;
    // Longest first: each pair's expected cost from earlier runs of this kind, else its facts.
    let mut costs = cost::Costs::load(&config.cache, cost::Costs::kind(config));
    let estimates: Vec<cost::Cost> = work
        .iter()
        .map(|(t, _)| costs.estimate(t, facts.get(&t.id)))
        .collect();
    schedule::run(
        backend,
        work,
        &estimates,
        config.jobs,
        (config.slots(), config.lanes),
        |event| match event {
            Event::Built { .. } => {
                built += 1;
                progress.built(built);
            }
            Event::Evaluated(e) => {
                progress.evaluated(&e);
                costs.observe(&e);
                record.evaluations.push(*e);
                record
                    .evaluations
                    .sort_by(|a, b| (a.task, &a.file).cmp(&(b.task, &b.file)));
                if let Err(err) = report::write_files(record, &config.out) {
                    write_error.get_or_insert(err);
                }
            }
        },
    );
    progress.finish();
    if config.compat.is_some() {
        let rewritten = record
            .evaluations
            .iter()
            .filter(|e| e.build.as_ref().is_some_and(|b| !b.compat.is_empty()))
            .count();
        eprintln!("kbench: --compat rewrote {rewritten} file(s)");
    }
    if let Err(err) = costs.save() {
        eprintln!("kbench: evaluation costs not cached: {err}");
    }
    write_error.map_or(Ok(()), Err)
}

/// The submission files of the tasks at hand: all matched, or those of `--level` and `--only`
/// (files of other tasks are not "unmatched"); `split_shard` then keeps this shard's.
fn select(args: &EvalArgs, tasks: &[Task]) -> Result<submission::Discovery> {
    let path = std::path::absolute(&args.path).map_err(|e| Error::read(&args.path, e))?;
    let mut found = submission::discover(&path, tasks, args.task)?;
    found.submissions.retain(|s| {
        args.source.level.is_none_or(|l| s.task.level == l)
            && (args.only.is_empty() || args.only.contains(&s.task))
    });
    Ok(found)
}

/// This shard's share of the selected submissions (`--shard`), and the shard with its sizes.
fn split_shard(
    mut found: submission::Discovery,
    shard: Option<Shard>,
) -> (submission::Discovery, Option<Shard>) {
    let shard = shard.map(|shard| {
        let (shard, mine) = shard.select(std::mem::take(&mut found.submissions));
        found.submissions = mine;
        shard
    });
    (found, shard)
}

/// A resumed run keeps its shard: another one's results would mix two runs.
fn check_resumed_shard(config: &Config, record: &RunRecord, shard: Option<Shard>) -> Result<()> {
    if config.resume && record.shard != shard {
        return Err(Error::Usage(format!(
            "resume {}: it is {}, not {}",
            config.out.display(),
            record
                .shard
                .map_or("no shard".into(), |s| format!("shard {s}")),
            shard.map_or("a whole run".into(), |s| format!("shard {s}")),
        )));
    }
    Ok(())
}

/// The line that opens a run: how much there is to do, where, and where its reports go.
fn announce(config: &Config, todo: usize, done: usize) {
    eprintln!(
        "kbench {}: {todo} submission(s) to evaluate on {} ({}), {done} already done; reports in {}",
        env!("CARGO_PKG_VERSION"),
        config.device.torch_name(),
        if config.gpus.is_empty() {
            "CPU".to_string()
        } else {
            format!("GPU {:?}", config.gpus)
        },
        config.out.display()
    );
}

/// The submissions not evaluated yet (a resumed run skips files it evaluated with the same
/// content), each with its task.
fn pending(
    record: &RunRecord,
    submissions: Vec<submission::Submission>,
    tasks: &[Task],
) -> Vec<(Task, submission::Submission)> {
    let done: std::collections::HashSet<(String, String)> = record
        .evaluations
        .iter()
        .map(|e| (e.file.clone(), e.sha256.clone()))
        .collect();
    let by_id: std::collections::HashMap<_, _> = tasks.iter().map(|t| (t.id, t)).collect();
    submissions
        .into_iter()
        .filter(|s| !done.contains(&(s.file.clone(), s.sha256.clone())))
        .map(|s| ((*by_id[&s.task]).clone(), s))
        .collect()
}

/// What the builds and evaluations need to know first: each file's static findings and the
/// facts of each task at hand, with the time each took.
fn checks_and_facts(
    config: &Config,
    worker_path: &std::path::Path,
    cache: &std::path::Path,
    work: &[(Task, submission::Submission)],
) -> Result<(Findings, Facts)> {
    let started = std::time::Instant::now();
    let findings = static_findings(config, worker_path, cache, work)?;
    let scanned = started.elapsed().as_secs_f64();
    let facts = facts_at_hand(config, worker_path, cache, work)?;
    // Before the first build: where a cold start's minutes go.
    eprintln!(
        "kbench: static checks of {} file(s) in {scanned:.1} s, facts of {} task(s) in {:.1} s",
        work.len(),
        facts.len(),
        started.elapsed().as_secs_f64() - scanned
    );
    Ok((findings, facts))
}

/// Static checks of every file, before anything runs: cheap (no torch), and evidence in each
/// evaluation (warnings and worse, by file).
fn static_findings(
    config: &Config,
    worker_path: &std::path::Path,
    cache: &std::path::Path,
    work: &[(Task, submission::Submission)],
) -> Result<Findings> {
    let paths: Vec<PathBuf> = work.iter().map(|(_, s)| s.path.clone()).collect();
    let scanned = check::scan(&config.python, worker_path, &cache.join("check"), &paths)?;
    Ok(work
        .iter()
        .zip(scanned)
        .map(|((_, s), r)| (s.file.clone(), r.at_least(&check::Severity::Warning)))
        .collect())
}

/// Facts of the tasks at hand (cached per task file): the constants a shape perturbation may
/// change, and degenerate-task flags recorded with each result.
fn facts_at_hand(
    config: &Config,
    worker_path: &std::path::Path,
    cache: &std::path::Path,
    work: &[(Task, submission::Submission)],
) -> Result<Facts> {
    let mut at_hand: Vec<Task> = work.iter().map(|(t, _)| t.clone()).collect();
    at_hand.dedup_by_key(|t| t.id);
    let bar = indicatif::ProgressBar::new(at_hand.len() as u64).with_message("task facts");
    let facts = taskfacts::collect(
        &at_hand,
        &config.python,
        worker_path,
        cache,
        config.jobs,
        |_| bar.inc(1),
    )?;
    bar.finish_and_clear();
    Ok(at_hand.iter().map(|t| t.id).zip(facts).collect())
}

/// The run's summary, page and gate, once every evaluation is in: the exit code.
fn finish(record: &RunRecord, config: &Config) -> Result<Exit> {
    let out = &config.out;
    let summary = report::summary::summarize_run(record);
    report::write_summary(&summary, out)?;
    report::write_html(record, &summary, out)?;
    let gate = gate::judge(record, config.min_speedup);
    print!(
        "{}",
        report::console::final_report(record, &summary, &gate, out)
    );
    Ok(Exit::gate(gate.failures.is_empty()))
}

/// With --dedicated, refuse GPUs on which other processes compute (NVML must be readable).
fn check_dedicated(config: &Config) -> Result<()> {
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

/// Lock the clocks of every chosen GPU when asked (--lock-clocks), with guards that restore them.
fn lock_clocks(config: &Config) -> Result<Vec<nvml::ClockLock<nvml::Nvml>>> {
    let Some(mhz) = config.lock_clocks else {
        return Ok(Vec::new());
    };
    let mut locks = Vec::new();
    for gpu in &config.gpus {
        let device = nvml::Nvml::open(*gpu).map_err(Error::Other)?;
        locks.push(nvml::ClockLock::new(device, mhz).map_err(Error::Other)?);
    }
    nvml::guard_signals(locks.iter().map(|l| l.shared()).collect()).map_err(Error::Other)?;
    Ok(locks)
}

/// A new record (of `shard`, when one), or with --resume the one in --out (whose settings must
/// match this run's).
fn start_record(
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
        let mut record = report::json::parse(&bytes)?;
        if record.config != config.recorded() {
            return Err(Error::Usage(format!(
                "resume {}: its settings differ from this run's: {}",
                config.out.display(),
                record.config.differences(&config.recorded()).join(", ")
            )));
        }
        record.unmatched = unmatched;
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
    })
}
