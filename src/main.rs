//! The kbench binary: parse the command line, run, print kbench's own error once, exit.

use std::process::ExitCode;

use clap::Parser;
use kbench::exit::Exit;

fn main() -> ExitCode {
    let cli = kbench::cli::Cli::parse();
    match kbench::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kbench: failed to {e}");
            Exit::KbenchFailed.into()
        }
    }
}
