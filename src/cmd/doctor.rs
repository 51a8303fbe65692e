//! `kbench doctor`: probe the set-up and print `doctor::checks`, each with its fix. Only a
//! missing Python or torch fails: the rest limit what a run can do, not whether it runs.

use crate::cli::PythonArg;
use crate::config;
use crate::doctor;
use crate::error::Result;
use crate::exit::Exit;
use crate::probe::Probe;
use crate::worker;

pub fn run(args: &PythonArg) -> Result<Exit> {
    let python = config::python(args.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("doctor"));
    let checks = doctor::checks(&python, probe.as_ref());
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
    Ok(Exit::gate(probe.is_ok()))
}
