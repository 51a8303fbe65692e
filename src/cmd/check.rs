//! `kbench check`: the static checks of `check` on files given by hand, printed; an
//! error-level finding fails the gate. Never runs submission code.

use crate::check;
use crate::cli::CheckArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::worker;

pub fn run(args: &CheckArgs) -> Result<Exit> {
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
    Ok(Exit::gate(!check::has_errors(&results)))
}
