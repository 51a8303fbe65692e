//! The service's queue: requests admitted up to a bound (`admit`: a refusal when full or
//! stopping, before any work), built by `jobs` threads, then evaluated by `lanes` threads per
//! device slot, each stage first in, first out, so a request waits behind those that came before
//! it and any free slot takes the oldest built one. The streaming counterpart of
//! `schedule::run`, over the same `Backend`: it builds and evaluates nothing itself.
//!
//! Every wait is bounded. Each stage of a request has its deadline (`Deadlines`): a watch
//! thread ends a request whose stage outlasts it (a timeout naming the stage), gives up on the
//! thread that ran it (what it may return later is dropped), starts another in its place, and
//! has the backend replace the slot (`Backend::replace_slot`). Closing (`close`) waits for the
//! requests admitted up to a grace period and ends those left (`Outcome::Unfinished`). A
//! request's end is reported once, by whichever of these comes first (`Job::done`).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::pipeline::Backend;
use crate::record::{Build, Evaluation};
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Cause;

/// How long each stage of a request may take before the queue stops waiting for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deadlines {
    pub build: Duration,
    pub evaluate: Duration,
}

/// How a request ended.
pub enum Outcome {
    /// Its evaluation, as the backend returned it or as a stage's deadline decided it, and the
    /// slot it was evaluated on (None: it ended at its build).
    Judged(Evaluation, Option<usize>),
    /// Not finished when the queue closed: the evaluation says so, to be recorded all the same.
    Unfinished(Evaluation),
}

/// What to do with a request's end: called once, on whichever thread ended it, whether or not
/// anyone still waits for it.
pub type Done = Box<dyn FnOnce(Outcome) + Send>;

/// One admitted request: what to evaluate, with which backend and deadlines, and `done`.
pub struct Job<B> {
    pub backend: Arc<B>,
    pub task: Task,
    pub submission: Submission,
    pub deadlines: Deadlines,
    pub done: Done,
}

/// Why `admit` gave no place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `capacity` requests are admitted and unfinished.
    Full,
    /// The queue is closing.
    Stopping,
}

/// An admitted request as the queue and the thread working on it share it.
struct Entry<B> {
    backend: Arc<B>,
    task: Task,
    submission: Submission,
    deadlines: Deadlines,
    done: Mutex<Option<Done>>,
}

impl<B> Entry<B> {
    /// Its `done`, to the first that asks.
    fn claim(&self) -> Option<Done> {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// What a stage works on: the build, or the evaluation of a build on a slot.
enum Stage {
    Build,
    Evaluate { slot: usize, build: Box<Build> },
}

impl Stage {
    fn name(&self) -> &'static str {
        match self {
            Stage::Build => "build",
            Stage::Evaluate { .. } => "evaluation",
        }
    }
}

/// A stage under way: which thread runs it, for which request, until when.
struct Running<B> {
    thread: u64,
    entry: Arc<Entry<B>>,
    stage: Stage,
    until: Instant,
    deadline: Duration,
}

/// A request the close ends unfinished, with what it was doing then.
struct Left<B> {
    entry: Arc<Entry<B>>,
    build: Option<Build>,
    doing: &'static str,
}

/// A thread's part: building, or evaluating on a slot.
#[derive(Clone, Copy)]
enum Role {
    Build,
    Evaluate(usize),
}

struct State<B> {
    waiting: VecDeque<Arc<Entry<B>>>,
    built: VecDeque<(Arc<Entry<B>>, Build)>,
    running: Vec<Running<B>>,
    /// Threads given up on: what they return is dropped, and they end.
    abandoned: HashSet<u64>,
    next_thread: u64,
    /// Admitted and not ended: reserved, waiting, building, built, evaluating or ending.
    admitted: usize,
    open: bool,
    /// Closed and past its grace: nothing runs any more, and what comes ends at once.
    drained: bool,
}

struct Shared<B> {
    state: Mutex<State<B>>,
    changed: Condvar,
    capacity: usize,
}

pub struct Queue<B> {
    shared: Arc<Shared<B>>,
}

/// A place in the queue, held between admission and submission; given back if dropped unused.
pub struct Admission<B> {
    shared: Arc<Shared<B>>,
    used: bool,
}

impl<B> Drop for Admission<B> {
    fn drop(&mut self) {
        if !self.used {
            self.shared.finish_one();
        }
    }
}

/// How long `close` waits, past its grace, for the requests it ended to be reported.
const REPORT_WAIT: Duration = Duration::from_secs(5);
/// The longest the watch thread sleeps between looks.
const WATCH_TICK: Duration = Duration::from_secs(1);

impl<B> Shared<B> {
    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finish_one(&self) {
        self.lock().admitted -= 1;
        self.changed.notify_all();
    }

    /// Wait on `state` until `until`, or a change.
    fn wait_until<'a>(
        &self,
        state: MutexGuard<'a, State<B>>,
        until: Instant,
    ) -> MutexGuard<'a, State<B>> {
        let left = until.saturating_duration_since(Instant::now());
        self.changed
            .wait_timeout(state, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }
}

impl<B> State<B> {
    /// The end of `thread`'s stage: false when it was given up on (its result is dropped).
    fn stage_over(&mut self, thread: u64) -> bool {
        if self.abandoned.remove(&thread) {
            return false;
        }
        self.running.retain(|r| r.thread != thread);
        true
    }

    /// Every request not ended, taken out of the queue, with its stage's thread given up on.
    fn take_all(&mut self) -> Vec<Left<B>> {
        let left = |entry, build, doing| Left {
            entry,
            build,
            doing,
        };
        let mut all: Vec<Left<B>> = (self.waiting.drain(..))
            .map(|e| left(e, None, "waiting to be built"))
            .collect();
        all.extend(
            self.built
                .drain(..)
                .map(|(e, b)| left(e, Some(b), "waiting for a slot")),
        );
        for r in self.give_up(|_| true) {
            all.push(match r.stage {
                Stage::Build => left(r.entry, None, "being built"),
                Stage::Evaluate { build, .. } => left(r.entry, Some(*build), "being evaluated"),
            });
        }
        all
    }

    /// The stages under way that `which` picks, taken out of `running`, their threads given up
    /// on.
    fn give_up(&mut self, which: impl Fn(&Running<B>) -> bool) -> Vec<Running<B>> {
        let (taken, kept) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| which(r));
        self.running = kept;
        for r in &taken {
            self.abandoned.insert(r.thread);
        }
        taken
    }
}

impl<B: Backend + Send + 'static> Queue<B> {
    /// Start `jobs` build threads, `lanes` evaluation threads per slot and the watch thread,
    /// with room for `capacity` requests.
    pub fn start(jobs: usize, (slots, lanes): (usize, usize), capacity: usize) -> Queue<B> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                built: VecDeque::new(),
                running: Vec::new(),
                abandoned: HashSet::new(),
                next_thread: 0,
                admitted: 0,
                open: true,
                drained: false,
            }),
            changed: Condvar::new(),
            capacity,
        });
        {
            let mut state = shared.lock();
            for _ in 0..jobs.max(1) {
                start_thread(&shared, &mut state, Role::Build);
            }
            for lane in 0..slots.max(1) * lanes.max(1) {
                start_thread(&shared, &mut state, Role::Evaluate(lane % slots.max(1)));
            }
        }
        let watched = Arc::clone(&shared);
        std::thread::spawn(move || watch(&watched));
        Queue { shared }
    }

    /// A place for one more request, or why there is none.
    pub fn admit(&self) -> Result<Admission<B>, Refused> {
        let mut state = self.shared.lock();
        if !state.open {
            return Err(Refused::Stopping);
        }
        if state.admitted >= self.shared.capacity {
            return Err(Refused::Full);
        }
        state.admitted += 1;
        Ok(Admission {
            shared: Arc::clone(&self.shared),
            used: false,
        })
    }

    /// Queue `job` in the place `admission` holds; past the close's grace it ends unfinished
    /// at once.
    pub fn submit(&self, mut admission: Admission<B>, job: Job<B>) {
        admission.used = true;
        let mut state = self.shared.lock();
        if state.drained {
            drop(state);
            let cause = Cause::Unfinished("the service stopped before it began".into());
            let eval = job
                .backend
                .gave_up(&job.task, &job.submission, None, &cause);
            end(&self.shared, job.done, Outcome::Unfinished(eval));
            return;
        }
        state.waiting.push_back(Arc::new(Entry {
            backend: job.backend,
            task: job.task,
            submission: job.submission,
            deadlines: job.deadlines,
            done: Mutex::new(Some(job.done)),
        }));
        self.shared.changed.notify_all();
    }

    /// Whether it admits no more (`close`).
    pub fn closed(&self) -> bool {
        !self.shared.lock().open
    }

    /// Requests admitted and not finished, and the most there may be.
    pub fn load(&self) -> (usize, usize) {
        (self.shared.lock().admitted, self.shared.capacity)
    }

    /// Admit no more; wait up to `grace` for the requests admitted to end, then end those left
    /// (`Outcome::Unfinished`, reported within `REPORT_WAIT` unless their `done` hangs) and stop
    /// every thread. How many were left.
    pub fn close(&self, grace: Duration) -> usize {
        self.shared.lock().open = false;
        self.shared.changed.notify_all();
        self.wait_for_ends(grace);
        let left = {
            let mut state = self.shared.lock();
            state.drained = true;
            self.shared.changed.notify_all();
            state.take_all()
        };
        let count = left
            .into_iter()
            .filter(|l| self.end_unfinished(l, grace))
            .count();
        self.wait_for_ends(REPORT_WAIT);
        count
    }

    /// Wait up to `within` for every request admitted to end.
    fn wait_for_ends(&self, within: Duration) {
        let until = Instant::now() + within;
        let mut state = self.shared.lock();
        while state.admitted > 0 && Instant::now() < until {
            state = self.shared.wait_until(state, until);
        }
    }

    /// End `left` unfinished, on a thread of its own (its `done` records it), unless a stage
    /// ended it as the grace ran out; whether this did.
    fn end_unfinished(&self, left: &Left<B>, grace: Duration) -> bool {
        let Some(done) = left.entry.claim() else {
            return false;
        };
        let cause = Cause::Unfinished(format!(
            "the service stopped while it was {} ({:.0} s after it was asked to stop)",
            left.doing,
            grace.as_secs_f64()
        ));
        let (shared, entry, build) = (
            Arc::clone(&self.shared),
            Arc::clone(&left.entry),
            left.build.clone(),
        );
        std::thread::spawn(move || {
            let eval =
                entry
                    .backend
                    .gave_up(&entry.task, &entry.submission, build.as_ref(), &cause);
            end(&shared, done, Outcome::Unfinished(eval));
        });
        true
    }
}

/// Start a thread of `role`, known to the queue by a number of its own.
fn start_thread<B: Backend + Send + 'static>(
    shared: &Arc<Shared<B>>,
    state: &mut State<B>,
    role: Role,
) {
    let thread = state.next_thread;
    state.next_thread += 1;
    let shared = Arc::clone(shared);
    std::thread::spawn(move || match role {
        Role::Build => build_loop(&shared, thread),
        Role::Evaluate(slot) => evaluate_loop(&shared, slot, thread),
    });
}

/// Report `outcome` through `done`, and give the request's place back.
fn end<B>(shared: &Shared<B>, done: Done, outcome: Outcome) {
    done(outcome);
    shared.finish_one();
}

fn build_loop<B: Backend>(shared: &Shared<B>, thread: u64) {
    let mut state = shared.lock();
    loop {
        if let Some(entry) = state.waiting.pop_front() {
            state.running.push(Running {
                thread,
                entry: Arc::clone(&entry),
                stage: Stage::Build,
                until: Instant::now() + entry.deadlines.build,
                deadline: entry.deadlines.build,
            });
            drop(state);
            let build = entry.backend.compile(&entry.task, &entry.submission);
            state = shared.lock();
            if !state.stage_over(thread) {
                return;
            }
            state.built.push_back((entry, build));
            shared.changed.notify_all();
        } else if state.drained {
            return;
        } else {
            state = shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn evaluate_loop<B: Backend>(shared: &Shared<B>, slot: usize, thread: u64) {
    let mut state = shared.lock();
    loop {
        if let Some((entry, build)) = state.built.pop_front() {
            state.running.push(Running {
                thread,
                entry: Arc::clone(&entry),
                stage: Stage::Evaluate {
                    slot,
                    build: Box::new(build.clone()),
                },
                until: Instant::now() + entry.deadlines.evaluate,
                deadline: entry.deadlines.evaluate,
            });
            drop(state);
            let eval =
                entry
                    .backend
                    .evaluate(&entry.task, &entry.submission, &build, slot, &|_| {});
            // Reported inside the stage: a `done` that hangs holds the stage, not the slot.
            if let Some(done) = entry.claim() {
                end(shared, done, Outcome::Judged(eval, Some(slot)));
            }
            state = shared.lock();
            if !state.stage_over(thread) {
                return;
            }
        } else if state.drained {
            return;
        } else {
            state = shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The watch thread: end each request whose stage outlasts its deadline, and put a fresh
/// thread (and, for an evaluation, a fresh slot) in the place of the one given up on.
fn watch<B: Backend + Send + 'static>(shared: &Arc<Shared<B>>) {
    let mut state = shared.lock();
    while !state.drained {
        let now = Instant::now();
        for late in state.give_up(|r| r.until <= now) {
            let role = match late.stage {
                Stage::Build => Role::Build,
                Stage::Evaluate { slot, .. } => Role::Evaluate(slot),
            };
            start_thread(shared, &mut state, role);
            let shared = Arc::clone(shared);
            std::thread::spawn(move || abandon(&shared, late));
        }
        let next = state.running.iter().map(|r| r.until).min();
        let until = next.map_or(now + WATCH_TICK, |n| n.min(now + WATCH_TICK));
        state = shared.wait_until(state, until);
    }
}

/// End the request of a stage given up on (`Cause::Abandoned`), after the backend replaced the
/// slot of an evaluation.
fn abandon<B: Backend>(shared: &Shared<B>, late: Running<B>) {
    let entry = &late.entry;
    let name = late.stage.name();
    let (build, slot) = match late.stage {
        Stage::Build => (None, None),
        Stage::Evaluate { slot, build } => {
            entry.backend.replace_slot(slot);
            (Some(*build), Some(slot))
        }
    };
    eprintln!(
        "kbench serve: {} {}: its {name} got no result within {:.0} s: given up on",
        entry.task.label(),
        entry.submission.file,
        late.deadline.as_secs_f64()
    );
    if let Some(done) = entry.claim() {
        let cause = Cause::Abandoned(name, late.deadline);
        let eval = entry
            .backend
            .gave_up(&entry.task, &entry.submission, build.as_ref(), &cause);
        end(shared, done, Outcome::Judged(eval, slot));
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;
    use crate::pipeline::Phase;
    use crate::record::fixtures::sample_evaluation;
    use crate::task::TaskId;
    use crate::verdict::Verdict;

    /// Builds and evaluations that take `ms` each; counts evaluations per slot and the most
    /// running at once on any slot. Evaluations wait (up to a minute) until `together` slots
    /// have started one, so a slot cannot take every job while another is idle, however the
    /// threads are scheduled. A file named `hang_build` never ends its build, `hang_eval` its
    /// evaluation; `slow_eval` takes a minute. Slots replaced are counted.
    struct Fake {
        ms: u64,
        per_slot: Vec<AtomicUsize>,
        busy: Vec<AtomicUsize>,
        most_busy: AtomicUsize,
        together: usize,
        started: (Mutex<Vec<bool>>, Condvar),
        replaced: AtomicUsize,
    }

    impl Fake {
        fn new(slots: usize, ms: u64, together: usize) -> Arc<Fake> {
            Arc::new(Fake {
                ms,
                per_slot: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
                busy: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
                most_busy: AtomicUsize::new(0),
                together,
                started: (Mutex::new(vec![false; slots]), Condvar::new()),
                replaced: AtomicUsize::new(0),
            })
        }

        /// Wait until evaluations have started on `together` slots, this one's `slot` among them.
        fn meet(&self, slot: usize) {
            let (slots, all) = &self.started;
            let mut started = slots.lock().unwrap();
            started[slot] = true;
            all.notify_all();
            let enough = |s: &mut Vec<bool>| s.iter().filter(|&&b| b).count() >= self.together;
            let _ = all
                .wait_timeout_while(started, Duration::from_secs(60), |s| !enough(s))
                .unwrap();
        }
    }

    /// A wait that never ends (the thread is left behind when the test ends).
    fn hang() -> ! {
        loop {
            std::thread::park();
        }
    }

    impl Backend for Fake {
        fn compile(&self, _: &Task, sub: &Submission) -> Build {
            if sub.file.contains("hang_build") {
                hang();
            }
            std::thread::sleep(Duration::from_millis(self.ms));
            sample_evaluation("honest.py").build.expect("built")
        }

        fn evaluate(
            &self,
            task: &Task,
            sub: &Submission,
            _: &Build,
            slot: usize,
            _: &dyn Fn(Phase),
        ) -> Evaluation {
            if sub.file.contains("hang_eval") {
                hang();
            }
            if sub.file.contains("slow_eval") {
                std::thread::sleep(Duration::from_secs(60));
            }
            let busy = self.busy[slot].fetch_add(1, Ordering::SeqCst) + 1;
            self.most_busy.fetch_max(busy, Ordering::SeqCst);
            self.meet(slot);
            std::thread::sleep(Duration::from_millis(self.ms));
            self.busy[slot].fetch_sub(1, Ordering::SeqCst);
            self.per_slot[slot].fetch_add(1, Ordering::SeqCst);
            Evaluation {
                task: task.id,
                file: sub.file.clone(),
                verdict: Verdict::Pass,
                ..sample_evaluation("honest.py")
            }
        }

        fn replace_slot(&self, _: usize) {
            self.replaced.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Deadlines no test's honest stage nears.
    const LONG: Deadlines = Deadlines {
        build: Duration::from_secs(600),
        evaluate: Duration::from_secs(600),
    };

    /// What a job's `done` reports: its file, whether it finished, its verdict and reason.
    type Ended = (String, bool, Verdict, String);

    fn job(
        backend: &Arc<Fake>,
        name: &str,
        deadlines: Deadlines,
        tx: &mpsc::Sender<Ended>,
    ) -> Job<Fake> {
        let id = TaskId {
            level: 1,
            number: 19,
        };
        let file = format!("level1/19_ReLU/{name}.py");
        let tx = tx.clone();
        Job {
            backend: Arc::clone(backend),
            task: Task {
                id,
                name: "19_ReLU".into(),
                path: PathBuf::new(),
            },
            submission: Submission {
                task: id,
                path: PathBuf::from(&file),
                file,
                sample: None,
                sha256: String::new(),
            },
            deadlines,
            done: Box::new(move |outcome| {
                let (finished, e) = match outcome {
                    Outcome::Judged(e, _) => (true, e),
                    Outcome::Unfinished(e) => (false, e),
                };
                let _ = tx.send((e.file, finished, e.verdict, e.reason));
            }),
        }
    }

    /// The next end reported, within a minute (a hang guard).
    fn next(rx: &mpsc::Receiver<Ended>) -> Ended {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a request's end within a minute")
    }

    #[test]
    fn admitted_requests_finish_on_every_slot_and_refusals_hold_no_place() {
        // (slots, lanes, capacity, requests offered at once, admitted)
        for (slots, lanes, capacity, offered, admitted) in
            [(1, 1, 4, 6, 4), (2, 1, 8, 8, 8), (2, 2, 3, 5, 3)]
        {
            let fake = Fake::new(slots, 20, slots.min(admitted));
            let queue = Queue::start(2, (slots, lanes), capacity);
            let (tx, rx) = mpsc::channel();
            let places: Vec<_> = (0..offered).filter_map(|_| queue.admit().ok()).collect();
            assert_eq!(places.len(), admitted);
            assert_eq!(queue.load(), (admitted, capacity));
            assert_eq!(queue.admit().err(), Some(Refused::Full));
            for (n, place) in places.into_iter().enumerate() {
                queue.submit(place, job(&fake, &format!("{n:06}"), LONG, &tx));
            }
            let mut files: Vec<String> = (0..admitted).map(|_| next(&rx).0).collect();
            files.sort();
            files.dedup();
            assert_eq!(files.len(), admitted);
            assert_eq!(queue.close(Duration::from_secs(60)), 0);
            let used = fake
                .per_slot
                .iter()
                .filter(|n| n.load(Ordering::SeqCst) > 0)
                .count();
            assert_eq!(used, slots.min(admitted), "slots used");
            assert!(fake.most_busy.load(Ordering::SeqCst) <= lanes);
        }
    }

    #[test]
    fn a_place_given_back_unused_frees_it_and_a_closing_queue_finishes_its_work() {
        let fake = Fake::new(1, 30, 1);
        let queue = Queue::start(1, (1, 1), 1);
        let place = queue.admit().unwrap();
        assert!(queue.admit().is_err(), "full");
        drop(place);
        let (tx, rx) = mpsc::channel();
        let place = queue.admit().expect("the place was given back");
        queue.submit(place, job(&fake, "000000", LONG, &tx));
        // Closing waits for the admitted request, which still reports its result.
        assert_eq!(queue.close(Duration::from_secs(60)), 0);
        let (file, finished, verdict, _) = rx.try_recv().unwrap();
        assert_eq!(file, "level1/19_ReLU/000000.py");
        assert!(finished);
        assert_eq!(verdict, Verdict::Pass);
        assert_eq!(queue.admit().err(), Some(Refused::Stopping));
    }

    /// A stage that never ends ends its request alone, as a timeout naming the stage, and the
    /// next request is built and evaluated all the same, on one build thread and one slot
    /// (given a fresh thread, and for an evaluation a fresh slot).
    #[test]
    fn a_stage_that_hangs_fails_its_request_alone() {
        let short = Deadlines {
            build: Duration::from_millis(300),
            evaluate: Duration::from_millis(300),
        };
        // (the stuck request, its reason's start, slots replaced)
        for (stuck, reason, replaced) in [
            ("hang_build", "build: no result within 0 s", 0),
            ("hang_eval", "evaluation: no result within 0 s", 1),
        ] {
            let fake = Fake::new(1, 5, 1);
            let queue = Queue::start(1, (1, 1), 4);
            let (tx, rx) = mpsc::channel();
            for (name, deadlines) in [(stuck, short), ("honest", LONG)] {
                queue.submit(queue.admit().unwrap(), job(&fake, name, deadlines, &tx));
            }
            let mut ends = [next(&rx), next(&rx)];
            ends.sort_by_key(|e| !e.0.contains("honest"));
            let [(_, h_finished, h_verdict, _), (_, s_finished, s_verdict, s_reason)] = ends;
            assert!(h_finished && s_finished, "{stuck}");
            assert_eq!(h_verdict, Verdict::Pass, "{stuck}: the honest request");
            assert_eq!(s_verdict, Verdict::Timeout, "{stuck}");
            assert!(s_reason.starts_with(reason), "{stuck}: {s_reason}");
            assert_eq!(fake.replaced.load(Ordering::SeqCst), replaced, "{stuck}");
            assert_eq!(queue.close(Duration::from_secs(60)), 0, "{stuck}");
            assert_eq!(queue.load().0, 0, "{stuck}: places given back");
        }
    }

    /// Closing waits no longer than its grace: a request still evaluating then (and one
    /// submitted after) ends unfinished, saying so, and is reported.
    #[test]
    fn closing_ends_within_its_grace_and_reports_what_is_left_unfinished() {
        let fake = Fake::new(1, 5, 1);
        let queue = Queue::start(1, (1, 1), 4);
        let (tx, rx) = mpsc::channel();
        queue.submit(queue.admit().unwrap(), job(&fake, "slow_eval", LONG, &tx));
        let late = queue.admit().unwrap();
        let (closed_tx, closed_rx) = mpsc::channel();
        let closing = Arc::new(queue);
        let closer = Arc::clone(&closing);
        std::thread::spawn(move || {
            let _ = closed_tx.send(closer.close(Duration::from_millis(300)));
        });
        let (file, finished, verdict, reason) = next(&rx);
        assert!(file.ends_with("slow_eval.py"));
        assert!(!finished);
        assert_eq!(verdict, Verdict::Skipped);
        assert!(
            reason.starts_with("not finished: the service stopped while it was being evaluated"),
            "{reason}"
        );
        closing.submit(late, job(&fake, "after", LONG, &tx));
        let (file, finished, _, reason) = next(&rx);
        assert!(file.ends_with("after.py") && !finished, "{reason}");
        assert_eq!(
            closed_rx.recv_timeout(Duration::from_secs(60)),
            Ok(1),
            "the close ends, one request left unfinished"
        );
        assert_eq!(closing.load().0, 0);
    }
}
