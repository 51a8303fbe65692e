//! `kbench list`: the tasks found, one line each, or with `--meta` the facts `taskfacts`
//! derives from each task file (through Python, cached).

use crate::cli::ListArgs;
use crate::config;
use crate::error::Result;
use crate::exit::Exit;
use crate::taskfacts;
use crate::worker;

use super::tasks;

pub fn run(args: &ListArgs) -> Result<Exit> {
    let (_, tasks) = tasks::load(&args.source)?;
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
    Ok(Exit::Passed)
}
