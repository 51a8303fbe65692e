//! kbench: benchmark and verify AI-generated GPU kernels on the KernelBench tasks.
//!
//! The eval pipeline, top to bottom:
//! 1. find the tasks (`task::discover`) and the submissions (`submission::discover`);
//! 2. probe Python, torch and the GPUs (`probe`), resolve the flags (`config`);
//! 3. build every submission in a compile pool, then evaluate each on a GPU slot, in lanes
//!    that share it outside timing (`schedule` and `lanes` over `pipeline::Python`: trusted
//!    reference worker, untrusted candidate worker);
//! 4. after each evaluation rewrite results.json, results.csv and junit.xml (`report`);
//! 5. print the summary and return the gate's exit code (`gate`).

pub mod atomic_file;
pub mod bundled;
pub mod check;
pub mod cli;
pub mod config;
pub mod cost;
pub mod cpus;
pub mod doctor;
pub mod error;
pub mod gate;
pub mod import;
pub mod lanes;
pub mod merge;
pub mod nvml;
pub mod pipeline;
pub mod probe;
pub mod published;
pub mod record;
pub mod report;
pub mod sandbox;
pub mod schedule;
pub mod shard;
pub mod sol;
pub mod stats;
pub mod submission;
pub mod task;
pub mod taskfacts;
pub mod timing;
pub mod verdict;
pub mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use cli::{
    CheckArgs, Cli, Command, EvalArgs, ImportArgs, ListArgs, MergeArgs, PythonArg, TaskSource,
};
use config::Config;
use error::{Error, Result};
use probe::Probe;
use record::{RunRecord, SCHEMA_VERSION};
use schedule::Event;
use task::Task;

/// Exit codes: the gate passed, the gate failed; kbench's own failure is 2 (see main).
pub const EXIT_PASSED: u8 = 0;
pub const EXIT_GATE_FAILED: u8 = 1;
pub const EXIT_KBENCH_FAILED: u8 = 2;

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Eval(args) => eval(&args),
        Command::List(args) => list(&args),
        Command::Doctor(args) => doctor(&args),
        Command::Check(args) => check(&args),
        Command::Import(args) => import(&args),
        Command::Report(args) => report_runs(&args),
        Command::Compare(args) => compare(&args),
        Command::Leaderboard(args) => leaderboard(&args),
        Command::Merge(args) => merge(&args),
    }
}

fn import(args: &ImportArgs) -> Result<ExitCode> {
    use clap::ValueEnum;
    use cli::ImportFormat;
    let imported = match args.format {
        ImportFormat::CudaL1 => import::cuda_l1::read(&args.src)?,
        ImportFormat::KernelbenchRun => import::kernelbench_run::read(&args.src)?,
        ImportFormat::Sakana => import::sakana::read(&args.src)?,
    };
    if imported.rows.is_empty() {
        for s in &imported.skipped {
            eprintln!("  {}: {}", s.at, s.why);
        }
        return Err(Error::Usage(format!(
            "import {}: no row could be imported",
            args.src.display()
        )));
    }
    imported.write(&args.out)?;
    let format = args.format.to_possible_value().expect("no skipped variant");
    print!(
        "{}",
        imported.report(&args.src, format.get_name(), &args.out)
    );
    Ok(ExitCode::from(EXIT_PASSED))
}

fn report_runs(args: &cli::ReportArgs) -> Result<ExitCode> {
    let runs = args
        .runs
        .iter()
        .map(|p| report::json::read_run(p))
        .collect::<Result<Vec<_>>>()?;
    let out = match (&args.out, runs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [(dir, _)]) => dir.join("report.html"),
        (None, _) => PathBuf::from("report.html"),
    };
    let page_dir = std::path::absolute(out.parent().unwrap_or(std::path::Path::new("")))
        .map_err(|e| Error::write(&out, e))?;
    let summaries: Vec<_> = runs
        .iter()
        .map(|(_, r)| report::summary::summarize_run(r))
        .collect();
    let mut pages = Vec::new();
    for ((dir, record), summary) in runs.iter().zip(&summaries) {
        let dir = std::path::absolute(dir).map_err(|e| Error::read(dir, e))?;
        // Log links relative to the page when it sits in the run folder, else by full path.
        let base = if dir == page_dir {
            String::new()
        } else {
            format!("{}/", dir.display())
        };
        pages.push(report::html::Run {
            record,
            summary,
            base,
        });
    }
    let page = report::html::render(&pages)?;
    atomic_file::write(&out, page.as_bytes())?;
    eprintln!("wrote {}", out.display());
    Ok(ExitCode::from(EXIT_PASSED))
}

fn compare(args: &cli::CompareArgs) -> Result<ExitCode> {
    if !(0.0..1.0).contains(&args.band) {
        return Err(Error::Usage(format!(
            "compare: --band {} is outside [0, 1)",
            args.band
        )));
    }
    let (_, before) = report::json::read_run(&args.before)?;
    let (_, after) = report::json::read_run(&args.after)?;
    let c = report::compare::compare(&before, &after, args.band);
    print!("{}", report::compare::render(&c));
    let Some(threshold) = args.fail_on_regression else {
        return Ok(ExitCode::from(EXIT_PASSED));
    };
    if !(0.0..1.0).contains(&threshold) {
        return Err(Error::Usage(format!(
            "compare: --fail-on-regression {threshold} is outside [0, 1)"
        )));
    }
    let why = report::compare::regressions(&c, threshold);
    for w in &why {
        println!("regression: {w}");
    }
    Ok(ExitCode::from(if why.is_empty() {
        EXIT_PASSED
    } else {
        EXIT_GATE_FAILED
    }))
}

fn leaderboard(args: &cli::LeaderboardArgs) -> Result<ExitCode> {
    let runs = args
        .runs
        .iter()
        .map(|p| {
            let (dir, record) = report::json::read_run(p)?;
            let dir = std::path::absolute(&dir).map_err(|e| Error::read(&dir, e))?;
            let submitter = dir
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned());
            Ok((submitter, record))
        })
        .collect::<Result<Vec<_>>>()?;
    let entries: Vec<report::leaderboard::Entry<'_>> = runs
        .iter()
        .map(|(submitter, record)| report::leaderboard::Entry {
            submitter: submitter.clone(),
            record,
        })
        .collect();
    let board = report::leaderboard::render(&entries)?;
    match &args.out {
        Some(out) => atomic_file::write(out, &board)?,
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(&board)
                .map_err(|e| Error::Other(format!("write the board: {e}")))?;
        }
    }
    Ok(ExitCode::from(EXIT_PASSED))
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    for f in &args.files {
        if !f.is_file() {
            return Err(Error::Usage(format!("check {}: no such file", f.display())));
        }
    }
    let python = config::python(args.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let results = check::scan(&python, &worker_path, &cache.join("check"), &args.files)?;
    let min = if args.all {
        check::Severity::Info
    } else {
        check::Severity::Warning
    };
    print!("{}", check::render(&results, &min));
    Ok(ExitCode::from(if check::has_errors(&results) {
        EXIT_GATE_FAILED
    } else {
        EXIT_PASSED
    }))
}

/// The tasks of `--tasks DIR` (or the bundled ones), filtered by `--level`.
fn load_tasks(source: &TaskSource) -> Result<(PathBuf, Vec<Task>)> {
    let root = match &source.tasks {
        Some(dir) => std::path::absolute(dir).map_err(|e| Error::read(dir, e))?,
        None => bundled::tasks_root(&config::cache_dir())?,
    };
    let found = task::discover(&root)?;
    for line in &found.skipped {
        eprintln!("kbench: {line}");
    }
    let mut tasks = found.tasks;
    if let Some(level) = source.level {
        tasks.retain(|t| t.id.level == level);
        if tasks.is_empty() {
            return Err(Error::Usage(format!(
                "find tasks: {} has no task of level {level}",
                root.display()
            )));
        }
    }
    Ok((root, tasks))
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let (_, tasks) = load_tasks(&args.source)?;
    if args.meta {
        let python = config::python(args.python.python.as_deref());
        let cache = config::cache_dir();
        let worker_path = worker::python::worker_path(&cache)?;
        let bar = indicatif::ProgressBar::new(tasks.len() as u64);
        let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
        let facts =
            taskfacts::collect(&tasks, &python, &worker_path, &cache, jobs, |_| bar.inc(1))?;
        bar.finish_and_clear();
        print!("{}", taskfacts::render(&tasks, &facts));
    } else {
        for t in &tasks {
            println!("{:<5} {:<4} {}", t.id.level, t.id.number, t.name);
        }
    }
    eprintln!("{} task(s)", tasks.len());
    Ok(ExitCode::from(EXIT_PASSED))
}

fn doctor(args: &PythonArg) -> Result<ExitCode> {
    let python = config::python(args.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("doctor")).map_err(|e| e.to_string());
    let checks = doctor::checks(&python, probe.as_ref().map_err(Clone::clone));
    for c in &checks {
        println!(
            "{} {:<13} {}",
            if c.ok { "ok  " } else { "MISS" },
            c.name,
            c.found
        );
        if !c.ok {
            println!("     {:<13} fix: {}", "", c.fix);
        }
    }
    // Only a missing Python/torch stops every run; the rest limit what can run.
    Ok(ExitCode::from(if probe.is_ok() {
        EXIT_PASSED
    } else {
        EXIT_GATE_FAILED
    }))
}

/// The run's confinement of submission code (`--sandbox`): what it must read, tried once.
fn confine(
    mode: cli::SandboxArg,
    config: &Config,
    worker_path: &std::path::Path,
) -> Result<sandbox::Confinement> {
    let mode = match mode {
        cli::SandboxArg::Auto => sandbox::Mode::Auto,
        cli::SandboxArg::Require => sandbox::Mode::Require,
        cli::SandboxArg::Off => sandbox::Mode::Off,
    };
    let builds = config.cache.join("builds");
    std::fs::create_dir_all(&builds).map_err(|e| Error::write(&builds, e))?;
    let readonly = [worker_path.to_path_buf(), config.tasks_root.clone()];
    sandbox::Confinement::probe(
        mode,
        &config.python,
        &readonly,
        &config.cache,
        config.device == config::Device::Cuda,
    )
    .map_err(Error::Other)
}

fn eval(args: &EvalArgs) -> Result<ExitCode> {
    // Seeds, nonces and pipes in this process's memory stay out of reach of /proc.
    sandbox::protect_self();
    let (root, tasks) = load_tasks(&TaskSource {
        tasks: args.source.tasks.clone(),
        level: None,
    })?;
    // Read before anything starts: a bad file is the user's to fix, not a run to abandon.
    let published = args
        .published
        .as_deref()
        .map(published::read_csv)
        .transpose()?;
    let (found, shard) = select(args, &tasks)?;
    let python = config::python(args.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("probe"))?;
    let config = Config::resolve(args, root, python, &probe)?;
    let out = &config.out;
    // Before any thread or process that should keep off the timing CPUs starts.
    let timing_cpus = cpus::reserve(config.slots());

    if config.device == config::Device::Cuda {
        check_dedicated(&config, args.dedicated)?;
    }
    // Held for the whole run: dropping them (or a termination signal) restores the clocks.
    let _clock_locks = lock_clocks(&config)?;
    let ceilings = speed_of_light(&config, &worker_path, &probe);
    let mut record = start_record(&config, &probe, found.unmatched)?;
    if published.is_some() {
        record.published = published;
    }
    check_resumed_shard(&config, &record, shard)?;
    record.shard = shard;
    record.environment.ceilings = ceilings.clone();
    std::fs::create_dir_all(out.join("logs")).map_err(|e| Error::write(out, e))?;
    let work = pending(&record, found.submissions, &tasks);
    announce(&config, work.len(), record.evaluations.len());
    report::write_files(&record, out)?;

    let started = std::time::Instant::now();
    let findings = static_findings(&config, &worker_path, &cache, &work)?;
    let scanned = started.elapsed().as_secs_f64();
    let facts = facts_at_hand(&config, &worker_path, &cache, &work)?;
    // Before the first build: where a cold start's minutes go.
    eprintln!(
        "kbench: static checks of {} file(s) in {scanned:.1} s, facts of {} task(s) in {:.1} s",
        work.len(),
        facts.len(),
        started.elapsed().as_secs_f64() - scanned
    );
    let build_key = format!(
        "torch {} arch {}",
        probe.torch().unwrap_or_default(),
        config.cuda_arch_list
    );
    let confinement = confine(args.sandbox, &config, &worker_path)?;
    let backend = pipeline::Python::new(
        &config,
        worker_path,
        build_key,
        &facts,
        timing_cpus,
        confinement,
        pipeline::Annotations::new(findings, ceilings),
    );
    evaluate_all(&config, &backend, &work, &facts, &mut record)?;
    finish(&record, &config)
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
    if let Err(err) = costs.save() {
        eprintln!("kbench: evaluation costs not cached: {err}");
    }
    write_error.map_or(Ok(()), Err)
}

/// The submission files of the tasks at hand: all matched, or those of `--level`, `--only` (files
/// of other tasks are not "unmatched") and this `--shard`.
fn select(
    args: &EvalArgs,
    tasks: &[Task],
) -> Result<(submission::Discovery, Option<shard::Shard>)> {
    let path = std::path::absolute(&args.path).map_err(|e| Error::read(&args.path, e))?;
    let mut found = submission::discover(&path, tasks, args.task)?;
    found.submissions.retain(|s| {
        args.source.level.is_none_or(|l| s.task.level == l)
            && (args.only.is_empty() || args.only.contains(&s.task))
    });
    let shard = args.shard.map(|shard| {
        let (shard, mine) = shard.select(std::mem::take(&mut found.submissions));
        found.submissions = mine;
        shard
    });
    Ok((found, shard))
}

/// A resumed run keeps its shard: another one's results would mix two runs.
fn check_resumed_shard(
    config: &Config,
    record: &RunRecord,
    shard: Option<shard::Shard>,
) -> Result<()> {
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

/// Static checks of every file, before anything runs: cheap (no torch), and evidence in each
/// evaluation (warnings and worse, by file).
fn static_findings(
    config: &Config,
    worker_path: &std::path::Path,
    cache: &std::path::Path,
    work: &[(Task, submission::Submission)],
) -> Result<std::collections::HashMap<String, Vec<check::Finding>>> {
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
) -> Result<std::collections::HashMap<task::TaskId, taskfacts::TaskFacts>> {
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
fn finish(record: &RunRecord, config: &Config) -> Result<ExitCode> {
    let out = &config.out;
    let summary = report::summary::summarize_run(record);
    report::write_summary(&summary, out)?;
    report::write_html(record, &summary, out)?;
    let gate = gate::judge(record, config.min_speedup);
    print!(
        "{}",
        report::console::final_report(record, &summary, &gate, out)
    );
    Ok(ExitCode::from(if gate.failures.is_empty() {
        EXIT_PASSED
    } else {
        EXIT_GATE_FAILED
    }))
}

/// With --dedicated, refuse GPUs on which other processes compute (NVML must be readable).
fn check_dedicated(config: &Config, dedicated: bool) -> Result<()> {
    if !dedicated {
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

/// A new record, or with --resume the one in --out (whose settings must match this run's).
fn start_record(
    config: &Config,
    probe: &Probe,
    unmatched: Vec<submission::Unmatched>,
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
                "resume {}: its settings differ from this run's (recorded {:?})",
                config.out.display(),
                record.config
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
        shard: None,
    })
}

/// `kbench merge`: the shards' records joined (`merge::merge` checks they are one run's), every
/// report written again from the merged evaluations, and the gate judged on all of them.
fn merge(args: &MergeArgs) -> Result<ExitCode> {
    let records = args
        .runs
        .iter()
        .map(|dir| Ok((dir.display().to_string(), merge::read_run(dir)?)))
        .collect::<Result<Vec<_>>>()?;
    let record = merge::merge(records)?;
    let out = &args.out;
    if out.join("results.json").exists() {
        return Err(Error::Usage(format!(
            "write to {}: it holds a run already; choose another --out",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| Error::write(out, e))?;
    report::write_files(&record, out)?;
    let summary = report::summary::summarize_run(&record);
    report::write_summary(&summary, out)?;
    let gate = gate::judge(&record, args.min_speedup);
    print!(
        "{}",
        report::console::final_report(&record, &summary, &gate, out)
    );
    Ok(ExitCode::from(if gate.failures.is_empty() {
        EXIT_PASSED
    } else {
        EXIT_GATE_FAILED
    }))
}
