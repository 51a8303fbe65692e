//! kbench: benchmark and verify AI-generated GPU kernels on the KernelBench tasks.
//!
//! The eval pipeline, top to bottom (`cmd/eval.rs` reads it in this order):
//! 1. find the tasks (`task::discover`) and the submissions (`submission::discover`);
//! 2. probe Python, torch and the GPUs (`probe`), resolve the flags into one `Config` (`config`);
//! 3. statically check every file (`check`) and derive each task's facts (`taskfacts`);
//! 4. build every submission in a compile pool, then evaluate each on a GPU slot, in lanes
//!    that share it outside timing (`schedule` and `lanes` over `pipeline::Python`: trusted
//!    reference worker, untrusted candidate worker; `timing` and `stats` for the speedup);
//! 5. after each evaluation rewrite results.json, results.csv and junit.xml (`report`);
//! 6. print the summary and return the gate's exit code (`gate`, `exit`).
//!
//! `kbench serve` (`cmd/serve.rs`, `serve`) does steps 2-4 once and then judges submissions sent
//! over HTTP as they come, each appended to its run record as in step 5; `setup` holds what the
//! two commands share.
//!
//! Each subcommand is one file of `cmd/`; this file only declares the modules and dispatches.

pub mod atomic_file;
pub mod bundled;
pub mod cache_key;
pub mod check;
pub mod cli;
pub mod cmd;
pub mod compat;
pub mod config;
pub mod cost;
pub mod cpus;
pub mod doctor;
pub mod error;
pub mod exit;
pub mod gate;
pub mod host_memory;
pub mod import;
pub mod lanes;
pub mod merge;
pub mod nvml;
pub mod pipeline;
pub mod probe;
pub mod published;
pub mod record;
pub mod record_mac;
pub mod reference_ops;
pub mod report;
pub mod sandbox;
pub mod scale;
pub mod schedule;
pub mod serve;
pub mod setup;
pub mod shard;
pub mod signals;
pub mod sol;
pub mod stats;
pub mod submission;
pub mod task;
pub mod taskfacts;
pub mod timing;
pub mod untrusted;
pub mod verdict;
pub mod worker;

use std::process::ExitCode;

use cli::{Cli, Command};
use error::Result;

/// Run one command: its exit code, or kbench's own failure (`main` prints it and exits 2).
pub fn run(cli: Cli) -> Result<ExitCode> {
    let exit = match cli.command {
        Command::Eval(args) => cmd::eval::run(&args),
        Command::List(args) => cmd::list::run(&args),
        Command::Doctor(args) => cmd::doctor::run(&args),
        Command::Check(args) => cmd::check::run(&args),
        Command::Import(args) => cmd::import::run(&args),
        Command::Report(args) => cmd::report::run(&args),
        Command::Compare(args) => cmd::compare::run(&args),
        Command::Leaderboard(args) => cmd::leaderboard::run(&args),
        Command::Merge(args) => cmd::merge::run(&args),
        Command::Serve(args) => cmd::serve::run(&args),
    }?;
    Ok(exit.into())
}
