//! The workers an evaluation takes: a reference and a candidate worker (`Pair`), and candidate
//! workers started beside a reference for the task's later candidates (`Companion`).

use std::collections::VecDeque;
use std::path::PathBuf;

use super::stage::Exchange;
use super::workspace::Workspace;

/// A reference and a candidate worker and the logs they write until an evaluation claims them.
pub(super) struct Pair<W> {
    pub reference: W,
    pub candidate: W,
    pub logs: [PathBuf; 2],
    pub exchange: Exchange,
    /// The candidate's workspace, where the evaluation lends its build (`lend`); none when
    /// unconfined.
    pub workspace: Option<Workspace>,
    /// The reference served an earlier candidate of the task (`reuse`).
    pub reused: bool,
    /// Candidate workers started beside the reference for the task's later candidates
    /// (`reuse`); none in a fresh pair.
    pub companions: VecDeque<Companion<W>>,
}

/// A candidate worker started for a later evaluation, with its log and workspace.
pub(super) struct Companion<W> {
    pub worker: W,
    pub log: PathBuf,
    pub workspace: Option<Workspace>,
}
