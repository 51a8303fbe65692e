//! Scheduling: a compile pool on the CPU cores, then `lanes` evaluations at a time per device
//! slot (GPU; the backend gates what they may share, `lanes`), several slots in parallel, packed
//! longest first: builds start in order of expected
//! cost and a free slot takes the costliest built pair, so no long evaluation starts last while
//! the other slots idle. A lane takes the next candidate of the task it just evaluated first
//! (equal costs), so a task's candidates follow one another on a slot and its reference worker
//! serves them all (`pipeline::reuse`). Evaluations are handed to the caller as they finish, on the calling
//! thread, so reporters need no locking. Knows nothing of Python: all work goes through
//! `Backend`.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

use crate::cost::Cost;
use crate::pipeline::{Backend, Phase};
use crate::record::{Build, Evaluation};
use crate::submission::Submission;
use crate::task::Task;

/// What the scheduler reports while it runs.
pub enum Event<'a> {
    /// A submission's build ended (the evaluation carries it).
    Built,
    /// A lane began evaluating the submission.
    Started(&'a Submission),
    /// The submission's evaluation entered a phase.
    Entered(&'a Submission, Phase),
    Evaluated(Box<Evaluation>),
}

/// What a lane tells the calling thread: an evaluation began, entered a phase (by index in
/// `work`) or ended.
enum Lane {
    Started(usize),
    Entered(usize, Phase),
    Done(Box<Evaluation>),
}

/// Built pairs waiting for a slot, and whether more may come.
struct Ready {
    built: Vec<(usize, Build)>,
    open: bool,
}

/// Build and evaluate every (task, submission) pair; `jobs` builds at once, `lanes` evaluations
/// at once on each of `slots`; `costs` holds each pair's expected cost, costliest first.
pub fn run<B: Backend>(
    backend: &B,
    work: &[(Task, Submission)],
    costs: &[Cost],
    jobs: usize,
    (slots, lanes): (usize, usize),
    mut on_event: impl FnMut(Event<'_>),
) {
    backend.expect(work);
    let cost = |i: usize| costs.get(i).copied().unwrap_or_default();
    let mut order: Vec<usize> = (0..work.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(cost(*i)));
    let queue = Mutex::new(order.into_iter().collect::<VecDeque<usize>>());
    let (built_tx, built_rx) = mpsc::channel::<(usize, Build)>();
    let ready = (
        Mutex::new(Ready {
            built: Vec::new(),
            open: true,
        }),
        Condvar::new(),
    );
    let (done_tx, done_rx) = mpsc::channel::<Lane>();
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1).min(work.len().max(1)) {
            let built_tx = built_tx.clone();
            let queue = &queue;
            s.spawn(move || loop {
                let Some(i) = queue.lock().expect("queue lock").pop_front() else {
                    break;
                };
                let (task, submission) = &work[i];
                if built_tx
                    .send((i, backend.compile(task, submission)))
                    .is_err()
                {
                    break;
                }
            });
        }
        drop(built_tx);
        for lane in 0..slots.max(1) * lanes.max(1) {
            let slot = lane % slots.max(1);
            let done_tx = done_tx.clone();
            let ready = &ready;
            s.spawn(move || {
                let mut last = None;
                while let Some((i, build)) =
                    take_next(ready, &cost, |j| Some(&work[j].0.path) == last)
                {
                    let (task, submission) = &work[i];
                    last = Some(&task.path);
                    if done_tx.send(Lane::Started(i)).is_err() {
                        break;
                    }
                    let enter = |phase| {
                        let _ = done_tx.send(Lane::Entered(i, phase));
                    };
                    let done = backend.evaluate(task, submission, &build, slot, &enter);
                    if done_tx.send(Lane::Done(Box::new(done))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        relay(work, &built_rx, &ready, &done_rx, &mut on_event);
    });
}

/// On the calling thread: hand builds to the slots and report builds, starts, phases and
/// evaluations as they come, until both streams end.
fn relay(
    work: &[(Task, Submission)],
    built_rx: &mpsc::Receiver<(usize, Build)>,
    ready: &(Mutex<Ready>, Condvar),
    done_rx: &mpsc::Receiver<Lane>,
    on_event: &mut impl FnMut(Event<'_>),
) {
    let mut builds_open = true;
    loop {
        if builds_open {
            match built_rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok((i, build)) => {
                    on_event(Event::Built);
                    ready.0.lock().expect("ready lock").built.push((i, build));
                    ready.1.notify_one();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    builds_open = false;
                    ready.0.lock().expect("ready lock").open = false;
                    ready.1.notify_all();
                }
            }
            while let Ok(lane) = done_rx.try_recv() {
                forward(work, lane, on_event);
            }
        } else {
            match done_rx.recv() {
                Ok(lane) => forward(work, lane, on_event),
                Err(_) => break,
            }
        }
    }
}

fn forward(work: &[(Task, Submission)], lane: Lane, on_event: &mut impl FnMut(Event<'_>)) {
    match lane {
        Lane::Started(i) => on_event(Event::Started(&work[i].1)),
        Lane::Entered(i, phase) => on_event(Event::Entered(&work[i].1, phase)),
        Lane::Done(e) => on_event(Event::Evaluated(e)),
    }
}

/// The costliest built pair of the lane's last task (`same`), else the costliest built pair,
/// waiting for one while builds are still coming; None at the end.
fn take_next(
    ready: &(Mutex<Ready>, Condvar),
    cost: &impl Fn(usize) -> Cost,
    same: impl Fn(usize) -> bool,
) -> Option<(usize, Build)> {
    let mut state = ready.0.lock().expect("ready lock");
    loop {
        let costliest = (0..state.built.len()).max_by(|a, b| {
            let (a_at, b_at) = (state.built[*a].0, state.built[*b].0);
            same(a_at)
                .cmp(&same(b_at))
                .then(cost(a_at).cmp(&cost(b_at)))
                // Equal costs: the earlier built first.
                .then(b.cmp(a))
        });
        if let Some(at) = costliest {
            return Some(state.built.remove(at));
        }
        if !state.open {
            return None;
        }
        state = ready.1.wait(state).expect("ready lock");
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::record::BuildStatus;
    use crate::task::TaskId;
    use crate::verdict::Verdict;

    /// A scripted backend: the file name says what happens; it checks that no slot runs more
    /// evaluations at once than it has lanes and counts concurrent builds.
    struct Fake {
        lanes: usize,
        busy: Vec<AtomicUsize>,
        most_busy: AtomicUsize,
        building: AtomicUsize,
        max_building: AtomicUsize,
        /// (slot, file) in the order evaluations started.
        started: Mutex<Vec<(usize, String)>>,
        built: AtomicUsize,
        /// Milliseconds each task's build takes (by task number - 1); 5 when empty.
        build_ms: Vec<u64>,
        /// The first evaluation waits until this many builds are done.
        hold_first: usize,
    }

    impl Fake {
        fn new(slots: usize) -> Fake {
            Fake {
                lanes: 1,
                most_busy: AtomicUsize::new(0),
                busy: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
                building: AtomicUsize::new(0),
                max_building: AtomicUsize::new(0),
                started: Mutex::new(Vec::new()),
                built: AtomicUsize::new(0),
                build_ms: Vec::new(),
                hold_first: 0,
            }
        }
    }

    impl Backend for Fake {
        fn compile(&self, task: &Task, submission: &Submission) -> Build {
            let now = self.building.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_building.fetch_max(now, Ordering::SeqCst);
            let ms = self.build_ms.get(task.id.number as usize - 1);
            std::thread::sleep(Duration::from_millis(ms.copied().unwrap_or(5)));
            self.building.fetch_sub(1, Ordering::SeqCst);
            self.built.fetch_add(1, Ordering::SeqCst);
            let failed = submission.file.contains("compile_error");
            Build {
                status: if failed {
                    BuildStatus::Failed
                } else {
                    BuildStatus::Ok
                },
                message: String::new(),
                log: String::new(),
                seconds: 0.0,
                cache_hit: false,
                kernels: vec!["fake".into()],
                artifacts_sha256: String::new(),
                warmed: String::new(),
                warm_note: String::new(),
                pool_compiled: Vec::new(),
                slot_compiled: None,
                cache_note: String::new(),
                compat: Vec::new(),
                drift: None,
                drift_rewritten: None,
            }
        }

        fn evaluate(
            &self,
            task: &Task,
            submission: &Submission,
            build: &Build,
            slot: usize,
            enter: &dyn Fn(Phase),
        ) -> Evaluation {
            enter(Phase::Loading);
            let busy = self.busy[slot].fetch_add(1, Ordering::SeqCst) + 1;
            assert!(
                busy <= self.lanes,
                "slot {slot} ran {busy} evaluations at once"
            );
            self.most_busy.fetch_max(busy, Ordering::SeqCst);
            let first = {
                let mut started = self.started.lock().unwrap();
                started.push((slot, submission.file.clone()));
                started.len() == 1
            };
            // Bounded, so a scheduler bug fails the assertions instead of hanging the test.
            for _ in 0..1000 {
                if !first || self.built.load(Ordering::SeqCst) >= self.hold_first {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(20));
            self.busy[slot].fetch_sub(1, Ordering::SeqCst);
            let verdict = if build.status == BuildStatus::Failed {
                Verdict::CompileError
            } else {
                Verdict::Pass
            };
            Evaluation {
                task: task.id,
                task_name: task.name.clone(),
                file: submission.file.clone(),
                sample: None,
                sha256: submission.sha256.clone(),
                verdict,
                reason: String::new(),
                build: Some(build.clone()),
                findings: Vec::new(),
                trials: Vec::new(),
                kernelbench_correct: None,
                kernelbench_needed: None,
                checks: Vec::new(),
                task_flags: Vec::new(),
                timing: None,
                profile: None,
                ncu: None,
                logs: Vec::new(),
                phases: Default::default(),
                seconds: 0.0,
                sandbox: String::new(),
                served: None,
            }
        }
    }

    fn work(n: u32) -> Vec<(Task, Submission)> {
        (0..n)
            .map(|i| {
                let id = TaskId {
                    level: 1,
                    number: i + 1,
                };
                let file = if i % 3 == 0 {
                    format!("k{i}_compile_error.py")
                } else {
                    format!("k{i}.py")
                };
                (
                    Task {
                        id,
                        name: format!("{}_T", i + 1),
                        path: PathBuf::new(),
                    },
                    Submission {
                        task: id,
                        path: PathBuf::from(&file),
                        file,
                        sample: None,
                        sha256: "0".repeat(64),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_submission_is_built_and_evaluated_once() {
        let fake = Fake::new(2);
        let work = work(12);
        let (mut built, mut started, mut entered) = (0, Vec::new(), Vec::new());
        let mut evaluated: Vec<Box<Evaluation>> = Vec::new();
        run(&fake, &work, &[], 3, (2, 1), |e| match e {
            Event::Built => built += 1,
            Event::Started(submission) => started.push(submission.file.clone()),
            Event::Entered(submission, phase) => {
                // reported between its start and its end
                let file = &submission.file;
                assert!(started.contains(file), "{file} entered {phase:?} unstarted");
                assert!(!evaluated.iter().any(|e| &e.file == file), "{file} ended");
                entered.push(file.clone());
            }
            Event::Evaluated(e) => {
                // reported started before it is reported evaluated
                assert!(started.contains(&e.file), "{} not started", e.file);
                evaluated.push(e);
            }
        });
        started.sort();
        entered.sort();
        let mut files: Vec<_> = work.iter().map(|(_, s)| s.file.clone()).collect();
        files.sort();
        assert_eq!(built, files.len());
        assert!(evaluated.iter().all(|e| e.build.is_some()));
        assert_eq!(started, files);
        assert_eq!(entered, files);
        assert_eq!(evaluated.len(), 12);
        let failed = evaluated
            .iter()
            .filter(|e| e.verdict == Verdict::CompileError)
            .count();
        assert_eq!(failed, 4);
        assert!(fake.max_building.load(Ordering::SeqCst) <= 3);
    }

    #[test]
    fn slots_take_the_costliest_first() {
        let fake = Fake::new(3);
        let work = work(12);
        // Costs out of file order; two never measured (they go first, the larger one leading).
        let costs: Vec<Cost> = (0..12)
            .map(|i| match i {
                4 => Cost::Unmeasured(1.0),
                9 => Cost::Unmeasured(5.0),
                _ => Cost::Measured(((i * 7) % 12) as f64),
            })
            .collect();
        let mut evaluated = 0;
        // One build at a time, in cost order: whatever is built when a slot frees up is never
        // cheaper than what is still to come, so starts follow cost whatever the timing.
        run(&fake, &work, &costs, 1, (3, 1), |e| {
            if let Event::Evaluated(_) = e {
                evaluated += 1;
            }
        });
        assert_eq!(evaluated, 12);
        let started = fake.started.into_inner().unwrap();
        let order: Vec<Cost> = started
            .iter()
            .map(|(_, file)| costs[work.iter().position(|(_, s)| &s.file == file).unwrap()])
            .collect();
        let mut sorted = order.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(order, sorted, "starts out of cost order: {started:?}");
        assert_eq!(order[0], Cost::Unmeasured(5.0));
        // Every slot worked: 20 ms evaluations against 5 ms builds.
        let mut slots: Vec<usize> = started.iter().map(|(slot, _)| *slot).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots, [0, 1, 2]);
    }

    #[test]
    fn a_free_slot_takes_the_costliest_built_pair() {
        // Builds finish cheapest first (cost i, build 30 - 2i ms, all at once); the one slot is
        // held by the first evaluation until every build is done, then must take the rest
        // costliest first, not in the order they were built.
        let mut fake = Fake::new(1);
        fake.build_ms = (0..12).map(|i| 30 - 2 * i).collect();
        fake.hold_first = 12;
        let work = work(12);
        let costs: Vec<Cost> = (0..12).map(|i| Cost::Measured(i as f64)).collect();
        run(&fake, &work, &costs, 12, (1, 1), |_| {});
        let started = fake.started.into_inner().unwrap();
        let numbers: Vec<u32> = started
            .iter()
            .skip(1)
            .map(|(_, file)| {
                work.iter()
                    .find(|(_, s)| &s.file == file)
                    .unwrap()
                    .0
                    .id
                    .number
            })
            .collect();
        let mut descending = numbers.clone();
        descending.sort_by(|a, b| b.cmp(a));
        assert_eq!(numbers.len(), 11);
        assert_eq!(numbers, descending, "{started:?}");
    }

    #[test]
    fn a_tasks_candidates_follow_one_another_on_a_slot() {
        // Three tasks of equal cost, four candidates each, listed (and built) in turn; the one
        // slot waits until all are built. Without the lane's preference for its last task it
        // would take them in build order, switching task at every start.
        let mut fake = Fake::new(1);
        fake.hold_first = 12;
        let work: Vec<(Task, Submission)> = work(12)
            .into_iter()
            .enumerate()
            .map(|(i, (mut task, sub))| {
                task.path = PathBuf::from(format!("task{}.py", i % 3));
                (task, sub)
            })
            .collect();
        run(&fake, &work, &[], 12, (1, 1), |_| {});
        let started = fake.started.into_inner().unwrap();
        let tasks: Vec<&PathBuf> = started
            .iter()
            .map(|(_, file)| &work.iter().find(|(_, s)| &s.file == file).unwrap().0.path)
            .collect();
        let switches = tasks.windows(2).filter(|w| w[0] != w[1]).count();
        assert_eq!((tasks.len(), switches), (12, 2), "{tasks:?}");
    }

    #[test]
    fn each_slot_runs_as_many_evaluations_as_it_has_lanes() {
        let mut fake = Fake::new(2);
        fake.lanes = 2;
        let mut evaluated = 0;
        run(&fake, &work(16), &[], 4, (2, 2), |e| {
            if let Event::Evaluated(_) = e {
                evaluated += 1;
            }
        });
        assert_eq!(evaluated, 16);
        assert_eq!(fake.most_busy.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn nothing_to_do_returns() {
        let fake = Fake::new(1);
        let mut events = 0;
        run(&fake, &[], &[], 4, (1, 1), |_| events += 1);
        assert_eq!(events, 0);
    }
}
