//! The subcommands, one file each: read the command's arguments, call the library modules that
//! do the work, print, and answer the exit code. Nothing outside `run` (lib.rs) calls them.

pub mod check;
pub mod compare;
pub mod doctor;
pub mod eval;
pub mod import;
pub mod leaderboard;
pub mod list;
pub mod merge;
pub mod report;
pub mod serve;
pub mod tasks;
