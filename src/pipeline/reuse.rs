//! A task's reference worker kept for its next candidate on the same slot (many candidates per
//! task: best-of-N searches, RL loops). The run says how many evaluations each task has
//! (`expect_work`); an evaluation whose task has more to come gives its reference worker back
//! clean (`keep`), with fresh candidate workers already started beside it (`Workers::top_up`),
//! and the next evaluation of that task on the slot takes it and the oldest of them (`take`,
//! `Workers::take_kept`). The slot's next pool pair has its candidate workers started beside it
//! before any task takes it (`armed`, `Workers::arm_next`), so a task's second candidate, one
//! evaluation after its first, finds one up. A kept reference loads the task again for every
//! candidate, so the model, its parameters and every seed-drawn input are what a fresh
//! worker's would be; what carries over is the process (Python, torch, the CUDA context).
//! Candidate workers serve one evaluation only. This file keeps the account (`Reuse`); the
//! workers start and end in `load` (`Workers`). Why this stays sound: docs/timing.md, "Many
//! candidates per task".

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::submission::Submission;
use crate::task::Task;
use crate::taskfacts::TaskFacts;
use crate::worker::Link;

use super::pair::Companion;
use super::stage::Exchange;

/// A reference worker that served an evaluation cleanly, kept on its slot for the next
/// candidate of its task.
pub(super) struct Kept<W> {
    /// The task file it loaded.
    pub task: PathBuf,
    pub reference: W,
    /// Where it writes its log now.
    pub log: PathBuf,
    /// The folder it shares with its candidates (its /dev/shm when confined).
    pub exchange: Exchange,
    /// Candidate workers started beside it for the next candidates (sharing `exchange`),
    /// oldest first.
    pub companions: VecDeque<Companion<W>>,
}

/// What reuse keeps track of: per slot the reference workers kept, per task its evaluations
/// still to start. Starts and ends no worker (`Workers` does, as this says).
pub(super) struct Reuse<W> {
    /// Whether a task's reference worker may serve its next candidates: only when candidates
    /// run confined.
    pub enabled: bool,
    /// Per slot, reference workers kept for their tasks' next candidates.
    kept: KeptSlots<W>,
    /// Per task, the evaluations still to start.
    left: Left,
}

impl<W: Link> Reuse<W> {
    /// Nothing kept on any of `slots` slots yet.
    pub(super) fn new(enabled: bool, slots: usize) -> Self {
        Reuse {
            enabled,
            kept: (0..slots).map(|_| Mutex::default()).collect(),
            left: Left::default(),
        }
    }

    /// The evaluations of each task in the run, none started yet; none when candidates run
    /// unconfined, so that no reference worker is kept. Unconfined, a candidate reaches its
    /// reference process (signals, `/proc`, its pipes: the `cheat_*_reference.py` fixtures)
    /// and may change it without any request failing, so `Link::clean` cannot tell that it is
    /// fit to judge the next candidate.
    pub(super) fn expect_work(&self, work: &[(Task, Submission)]) {
        let mut left = self.left.lock().expect("reuse lock");
        left.clear();
        if !self.enabled {
            return;
        }
        for (task, _) in work {
            let count = left.entry(task.path.clone()).or_default();
            count.left += 1;
            count.total += 1;
        }
    }

    /// One more evaluation of `task` to come (a service's request, admitted): as `expect_work`
    /// counts a run's.
    pub(super) fn expect_one(&self, task: &Task) {
        if self.enabled {
            let mut left = self.left.lock().expect("reuse lock");
            let count = left.entry(task.path.clone()).or_default();
            count.left += 1;
            count.total += 1;
        }
    }

    /// One evaluation of `task` starts: one fewer to come.
    pub(super) fn starting(&self, task: &Task) {
        if let Some(count) = self.left.lock().expect("reuse lock").get_mut(&task.path) {
            count.left = count.left.saturating_sub(1);
        }
    }

    /// Whether more evaluations of the task at `path` are still to start.
    fn more(&self, path: &Path) -> bool {
        self.left
            .lock()
            .expect("reuse lock")
            .get(path)
            .is_some_and(|count| count.left > 0)
    }

    /// Whether the reference keeps its outputs on the trials' inputs for the task's other
    /// candidates (`Load::memo`): it serves one after this candidate or served one before it,
    /// and the task's reference repeats itself by its facts (no random draws; a second call
    /// returns the first's bits).
    pub(super) fn memo(&self, task: &Task, reused: bool, facts: Option<&TaskFacts>) -> bool {
        (reused || self.more(&task.path))
            && facts.is_some_and(|f| f.nondeterministic == Some(false))
    }

    /// The slot's kept reference for `task`, if any, and the slot's other kept references to
    /// end: those beyond what its other lanes (`lanes` in all) may still use (one each), and
    /// those whose task has no evaluation to come: they hold GPU memory.
    pub(super) fn take(
        &self,
        task: &Task,
        slot: usize,
        lanes: usize,
    ) -> (Option<Kept<W>>, Vec<Kept<W>>) {
        let mut kept = self.kept[slot].lock().expect("reuse lock");
        let mine = kept
            .iter()
            .position(|k| k.task == task.path)
            .map(|at| kept.remove(at));
        let others = lanes.saturating_sub(1);
        let mut retired = Vec::new();
        for k in std::mem::take(&mut *kept) {
            if kept.len() < others && self.more(&k.task) {
                kept.push(k);
            } else {
                retired.push(k);
            }
        }
        (mine, retired)
    }

    /// After an evaluation: keep its reference worker (`kept`) on `slot` for the task's next
    /// candidate if it is clean, the task has more to come and every process of the candidate
    /// is known to have ended (`gone`: the exchange they shared serves the next candidate).
    /// Returns it where it is not kept, to be ended.
    pub(super) fn keep(&self, kept: Kept<W>, slot: usize, gone: bool) -> Option<Kept<W>> {
        if gone && kept.reference.clean() && self.more(&kept.task) {
            self.kept[slot].lock().expect("reuse lock").push(kept);
            None
        } else {
            Some(kept)
        }
    }

    /// How many evaluations of `task` are still to start.
    pub(super) fn left(&self, task: &Task) -> usize {
        self.left
            .lock()
            .expect("reuse lock")
            .get(&task.path)
            .map_or(0, |count| count.left)
    }

    /// How many candidate workers the slot's next pool pair gets beside its reference, at most
    /// `ahead` (`armed`).
    pub(super) fn armed(&self, ahead: usize) -> usize {
        armed(self.left.lock().expect("reuse lock").values(), ahead)
    }
}

/// How many candidate workers the slot's next pool pair gets beside its reference (`arm_next`):
/// the fewest later candidates (after its first) of any task not yet started, at most `ahead`.
/// The pair goes to whichever task the scheduler takes next, so none in a run where a task yet
/// to start has one candidate: a worker started for nothing costs a start-up's CPU.
fn armed<'a>(counts: impl Iterator<Item = &'a Count>, ahead: usize) -> usize {
    counts
        .filter(|count| count.left == count.total)
        .map(|count| count.total - 1)
        .min()
        .unwrap_or(0)
        .min(ahead)
}

/// A task's evaluations in the run, and those still to start.
#[derive(Default)]
pub(super) struct Count {
    total: usize,
    left: usize,
}

/// Per slot, the reference workers kept for their tasks' next candidates; per task, its
/// evaluations (`Count`).
type KeptSlots<W> = Vec<Mutex<Vec<Kept<W>>>>;
type Left = Mutex<HashMap<PathBuf, Count>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_pair_gets_workers_for_the_fewest_later_candidates_of_a_task_yet_to_start() {
        let count = |total, left| Count { total, left };
        let cases: [(&str, Vec<Count>, usize); 6] = [
            ("none left", vec![], 0),
            ("all started", vec![count(8, 3)], 0),
            ("eight each", vec![count(8, 8), count(8, 8)], 4),
            ("the fewest", vec![count(8, 8), count(3, 3)], 2),
            (
                "a lone candidate yet to start",
                vec![count(8, 8), count(1, 1)],
                0,
            ),
            (
                "started tasks do not count",
                vec![count(1, 0), count(3, 3)],
                2,
            ),
        ];
        for (name, counts, want) in cases {
            assert_eq!(armed(counts.iter(), 4), want, "{name}");
        }
    }
}
