//! A task's reference worker kept for its next candidate on the same slot (many candidates per
//! task: best-of-N searches, RL loops). The run says how many evaluations each task has
//! (`expect`); an evaluation whose task has more to come gives its reference worker back clean
//! (`keep`), with fresh candidate workers already started beside it (`top_up`), and the next
//! evaluation of that task on the slot takes it and the oldest of them (`take_kept`). The slot's
//! next pool pair has its candidate workers started beside it before any task takes it
//! (`arm_next`), so a task's second candidate, one evaluation after its first, finds one up.
//! A kept reference loads
//! the task again for every candidate, so the model, its parameters and every seed-drawn input
//! are what a fresh worker's would be; what carries over is the process (Python, torch, the
//! CUDA context). Candidate workers serve one evaluation only. Why this stays sound:
//! docs/timing.md, "Many candidates per task".

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::config::Device;
use crate::submission::Submission;
use crate::task::Task;
use crate::worker::Link;

use super::load::{Companion, Pair};
use super::stage::Exchange;
use super::{Python, Spawner};

/// A reference worker that served an evaluation cleanly, kept on its slot for the next
/// candidate of its task.
pub(super) struct Kept<W> {
    /// The task file it loaded.
    task: PathBuf,
    reference: W,
    /// Where it writes its log now.
    log: PathBuf,
    /// The folder it shares with its candidates (its /dev/shm when confined).
    exchange: Exchange,
    /// Candidate workers started beside it for the next candidates (sharing `exchange`),
    /// oldest first.
    companions: VecDeque<Companion<W>>,
}

impl<S: Spawner> Python<'_, S> {
    /// The evaluations of each task in the run, none started yet; none when candidates run
    /// unconfined, so that no reference worker is kept. Unconfined, a candidate reaches its
    /// reference process (signals, `/proc`, its pipes: the `cheat_*_reference.py` fixtures)
    /// and may change it without any request failing, so `Link::clean` cannot tell that it is
    /// fit to judge the next candidate.
    pub(super) fn expect_work(&self, work: &[(Task, Submission)]) {
        let mut left = self.left.lock().expect("reuse lock");
        left.clear();
        if !self.reuse {
            return;
        }
        for (task, _) in work {
            let count = left.entry(task.path.clone()).or_default();
            count.left += 1;
            count.total += 1;
        }
    }

    /// One evaluation of `task` starts: one fewer to come.
    pub(super) fn starting(&self, task: &Task) {
        if let Some(left) = self.to_start.lock().expect("pool lock").as_mut() {
            *left = left.saturating_sub(1);
        }
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
    pub(super) fn memo(&self, task: &Task, reused: bool) -> bool {
        (reused || self.more(&task.path))
            && self
                .facts
                .get(&task.id)
                .is_some_and(|f| f.nondeterministic == Some(false))
    }

    /// The slot's kept reference for `task`, as a pair with a fresh candidate worker beside it
    /// (the oldest companion, else one started now) and the other companions, its exchange
    /// emptied of what earlier candidates left there. Before that, the slot's other kept
    /// references beyond what its other lanes may still use (one each), and those whose task
    /// has no evaluation to come, are ended: they hold GPU memory.
    pub(super) fn take_kept(&self, task: &Task, slot: usize) -> Option<Pair<S::Worker>> {
        let mine = {
            let mut kept = self.kept[slot].lock().expect("reuse lock");
            let mine = kept
                .iter()
                .position(|k| k.task == task.path)
                .map(|at| kept.remove(at));
            let others = self.config.lanes.saturating_sub(1);
            let mut retired = Vec::new();
            for k in std::mem::take(&mut *kept) {
                if kept.len() < others && self.more(&k.task) {
                    kept.push(k);
                } else {
                    retired.push(k);
                }
            }
            drop(kept);
            retired.into_iter().for_each(|k| self.end_kept(k));
            mine?
        };
        if mine.exchange.clear().is_err() {
            self.end_kept(mine);
            return None;
        }
        let Kept {
            reference,
            log,
            exchange,
            mut companions,
            ..
        } = mine;
        let first = match companions.pop_front() {
            Some(c) => c,
            None => match self.start_candidate(slot, &exchange) {
                Ok(c) => c,
                Err(_) => {
                    let _ = S::finish(reference);
                    return None;
                }
            },
        };
        Some(Pair {
            reference,
            candidate: first.worker,
            logs: [log, first.log],
            exchange,
            workspace: first.workspace,
            reused: true,
            companions,
        })
    }

    /// After an evaluation: keep its reference worker (with the `companions` started beside it)
    /// for the task's next candidate on the slot if it is clean, the task has more to come and
    /// every process of the candidate is known to have ended (`gone`: the exchange they shared
    /// serves the next candidate); else end them all.
    pub(super) fn keep(
        &self,
        task: &Task,
        slot: usize,
        (reference, log, exchange): (S::Worker, PathBuf, Exchange),
        companions: VecDeque<Companion<S::Worker>>,
        gone: bool,
    ) {
        let kept = Kept {
            task: task.path.clone(),
            reference,
            log,
            exchange,
            companions,
        };
        if gone && kept.reference.clean() && self.more(&task.path) {
            self.kept[slot].lock().expect("reuse lock").push(kept);
        } else {
            self.end_kept(kept);
        }
    }

    /// Start candidate workers beside the reference that `exchange` belongs to, while this
    /// evaluation runs (start-up takes seconds), until `companions` holds one for each of the
    /// task's evaluations still to start, at most as many as `ahead` allows.
    pub(super) fn top_up(
        &self,
        task: &Task,
        slot: usize,
        exchange: &Exchange,
        companions: &mut VecDeque<Companion<S::Worker>>,
    ) {
        let left = self
            .left
            .lock()
            .expect("reuse lock")
            .get(&task.path)
            .map_or(0, |count| count.left);
        while companions.len() < left.min(self.ahead()) {
            match self.start_candidate(slot, exchange) {
                Ok(c) => companions.push_back(c),
                Err(_) => break,
            }
        }
    }

    /// Start candidate workers beside the slot's next pool pair (the one `take_pair` gives out
    /// next), as many as `armed` says: the task that takes that pair has its second candidate
    /// one evaluation (~3 s) after its first, before a worker started then is up (~8 s).
    pub(super) fn arm_next(&self, slot: usize) {
        let want = armed(self.left.lock().expect("reuse lock").values(), self.ahead());
        let mut ready = self.ready[slot].lock().expect("worker pool lock");
        let Some(next) = ready.front_mut() else {
            return;
        };
        while next.companions.len() < want {
            match self.start_candidate(slot, &next.exchange) {
                Ok(c) => next.companions.push_back(c),
                Err(_) => break,
            }
        }
    }

    /// How many candidate workers wait beside a kept reference: as many as the slot's pool
    /// holds pairs on a GPU (`refill`), where start-up (~8 s) outlasts a short evaluation
    /// (~3 s); two on a CPU, the processes of the one pair its pool holds.
    fn ahead(&self) -> usize {
        match self.config.device {
            Device::Cuda => self.pairs_ahead(),
            Device::Cpu => 2,
        }
    }

    fn end_kept(&self, kept: Kept<S::Worker>) {
        let _ = S::finish(kept.reference);
        kept.companions.into_iter().for_each(|c| {
            let _ = S::finish(c.worker);
        });
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
pub(super) type KeptSlots<W> = Vec<std::sync::Mutex<Vec<Kept<W>>>>;
pub(super) type Left = std::sync::Mutex<HashMap<PathBuf, Count>>;

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
