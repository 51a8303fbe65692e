//! `kbench eval`: one run from the submissions to the gate. Tasks, published results and the
//! selection are read first (a mistake there is reported before Python starts); then the probe,
//! `Config`, the GPUs (dedicated, clocks, speed of light), the run record (new or resumed), the
//! static checks and task facts, and the builds and evaluations (`schedule` over
//! `pipeline::Python`), each written into the reports as it finishes; last the gate. A
//! termination signal ends the run and its workers, the record holding what finished before it
//! (`signals`). Flags are read from `Config` once it is resolved; only what comes before the probe reads
//! `EvalArgs`. Verdicts are decided in `evaluate`, never here.

use crate::cli::{EvalArgs, TaskSource};
use crate::config::{self, Config};
use crate::cost;
use crate::cpus;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::gate;
use crate::host_memory;
use crate::nvml;
use crate::pipeline;
use crate::probe::Probe;
use crate::published;
use crate::record::RunRecord;
use crate::report;
use crate::sandbox;
use crate::scale;
use crate::schedule::{self, Event};
use crate::shard::Shard;
use crate::signals;
use crate::submission;
use crate::task::Task;
use crate::worker;

use super::tasks;
use crate::setup::{self, Facts, Findings};

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
    scale::check(args.scale.as_deref(), &tasks)?;
    let found = select(args, &tasks)?;
    let python = config::python(args.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("probe"))?;
    let config = Config::resolve(args, root, python, &probe)?;
    let (found, shard) = split_shard(found, config.shard);
    let out = &config.out;
    // Before any worker that lives for the run: a signal ends them with kbench.
    signals::exit_on_signal(format!(
        "{} holds every evaluation finished before it: --resume continues the run",
        out.join("results.json").display()
    ))
    .map_err(Error::Other)?;
    // Before any thread or process that should keep off the timing CPUs starts.
    let timing_cpus = cpus::reserve(config.slots());

    if config.device == config::Device::Cuda {
        setup::check_dedicated(&config)?;
    }
    // Held for the whole run: dropping them (or a termination signal) restores the clocks.
    let _clock_locks = lock_clocks(&config)?;
    let ceilings = setup::speed_of_light(&config, &worker_path, &probe);
    let mut record = setup::start_record(&config, &probe, found.unmatched, shard)?;
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
    let at_hand: Vec<Task> = work.iter().map(|(t, _)| t.clone()).collect();
    if let Some(warning) = host_memory::warning(&config, &at_hand, &facts, host_memory::available())
    {
        eprintln!("kbench: warning: {warning}");
    }
    let confinement = setup::confine(&config, &worker_path)?;
    let backend = setup::backend(
        &config,
        worker_path,
        &probe,
        &facts,
        timing_cpus,
        confinement,
        pipeline::Annotations::new(findings, ceilings),
    )?;
    evaluate_all(&config, &backend, &work, &facts, &mut record)?;
    finish(&record, &config)
}

/// Build and evaluate `work`, reporting each evaluation as it finishes (final as the backend
/// returns it): the console, the record, the reports on disk, the costs.
fn evaluate_all(
    config: &Config,
    backend: &pipeline::Python<'_>,
    work: &[(Task, submission::Submission)],
    facts: &Facts,
    record: &mut RunRecord,
) -> Result<()> {
    let progress = report::progress::Progress::new(work.len());
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
            Event::Built => progress.built(),
            Event::Started(submission) => progress.started(submission),
            Event::Entered(submission, phase) => progress.entered(submission, phase),
            Event::Evaluated(e) => {
                progress.evaluated(&e);
                costs.observe(&e);
                if let Err(err) = setup::append(record, *e, &config.out) {
                    write_error.get_or_insert(err);
                }
            }
        },
    );
    progress.finish();
    if config.compat {
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
    let submissions: Vec<_> = work.iter().map(|(_, s)| s).collect();
    let findings = setup::static_findings(config, worker_path, cache, &submissions)?;
    let scanned = started.elapsed().as_secs_f64();
    let at_hand = work.iter().map(|(t, _)| t.clone()).collect();
    let facts = setup::task_facts(config, worker_path, cache, at_hand)?;
    // Before the first build: where a cold start's minutes go.
    eprintln!(
        "kbench: static checks of {} file(s) in {scanned:.1} s, facts of {} task(s) in {:.1} s",
        work.len(),
        facts.len(),
        started.elapsed().as_secs_f64() - scanned
    );
    Ok((findings, facts))
}

/// The run's summary, page and gate, once every evaluation is in: the exit code.
fn finish(record: &RunRecord, config: &Config) -> Result<Exit> {
    let out = &config.out;
    let summary = report::summary::summarize_run(record);
    report::write_summary(&summary, out)?;
    report::write_html(record, &summary, out)?;
    let gate = gate::judge(record, &config.gate);
    print!(
        "{}",
        report::console::final_report(record, &summary, &gate, out)
    );
    Ok(Exit::gate(gate.passed()))
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
    nvml::reset_on_signal(locks.iter().map(|l| l.shared()).collect());
    Ok(locks)
}
