//! Reports made from the run record: results.json, results.csv, junit.xml, summary.json,
//! report.html and the console. Reporters read the record; none of them runs or changes an evaluation.

pub mod compare;
pub mod console;
pub mod csv;
pub mod html;
pub mod json;
pub mod junit;
pub mod leaderboard;
pub mod progress;
mod roofline;
pub mod summary;
mod write;

#[cfg(test)]
mod tests;

pub use write::{write_files, write_html, write_summary};
