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
//! Modules are the crate's own (`pub(crate)`), so unused code is named by the compiler; public
//! only what the binary, the `stats` benchmark and the integration tests use.

pub(crate) mod atomic_file;
pub(crate) mod bundled;
pub(crate) mod cache_key;
pub(crate) mod check;
pub mod cli;
pub(crate) mod cmd;
pub(crate) mod compat;
pub(crate) mod config;
pub(crate) mod cost;
pub(crate) mod cpus;
pub(crate) mod cuda_tools;
pub(crate) mod doctor;
pub(crate) mod error;
pub mod exit;
pub(crate) mod gate;
pub(crate) mod host_memory;
pub(crate) mod import;
pub(crate) mod lanes;
pub(crate) mod merge;
pub(crate) mod nsight;
pub(crate) mod nvml;
pub(crate) mod pipeline;
pub(crate) mod probe;
pub(crate) mod published;
pub(crate) mod record;
pub mod record_mac;
pub(crate) mod reference_ops;
pub(crate) mod report;
pub(crate) mod sandbox;
pub(crate) mod sanitizer;
pub(crate) mod scale;
pub(crate) mod schedule;
pub(crate) mod serve;
pub(crate) mod setup;
pub(crate) mod shard;
pub(crate) mod signals;
pub(crate) mod sol;
pub mod stats;
pub(crate) mod submission;
pub(crate) mod task;
pub(crate) mod taskfacts;
pub(crate) mod timing;
pub(crate) mod untrusted;
pub(crate) mod verdict;
pub(crate) mod worker;

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
