//! The service's queue: requests admitted up to a bound (`admit`: a refusal when full, before
//! any work), built by `jobs` threads, then evaluated by `lanes` threads per device slot, each
//! stage first in, first out, so a request waits behind those that came before it and any free
//! slot takes the oldest built one. The streaming counterpart of `schedule::run`, over the same
//! `Backend`: it builds and evaluates nothing itself.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::pipeline::Backend;
use crate::record::{Build, Evaluation};
use crate::submission::Submission;
use crate::task::Task;

/// One admitted request: what to evaluate, with which backend, and what to do with the result
/// (called on the evaluating thread, whether or not anyone still waits for it).
pub struct Job<B> {
    pub backend: Arc<B>,
    pub task: Task,
    pub submission: Submission,
    pub done: Box<dyn FnOnce(Evaluation) + Send>,
}

struct State<B> {
    waiting: VecDeque<Job<B>>,
    built: VecDeque<(Job<B>, Build)>,
    /// Admitted and not finished: reserved, waiting, building, built or evaluating.
    admitted: usize,
    building: usize,
    open: bool,
}

struct Shared<B> {
    state: Mutex<State<B>>,
    changed: Condvar,
    capacity: usize,
}

pub struct Queue<B> {
    shared: Arc<Shared<B>>,
    threads: Vec<JoinHandle<()>>,
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

impl<B> Shared<B> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<B>> {
        self.state.lock().expect("queue lock")
    }

    fn finish_one(&self) {
        self.lock().admitted -= 1;
        self.changed.notify_all();
    }
}

impl<B: Backend + Send + 'static> Queue<B> {
    /// Start `jobs` build threads and `lanes` evaluation threads per slot, with room for
    /// `capacity` requests.
    pub fn start(jobs: usize, (slots, lanes): (usize, usize), capacity: usize) -> Queue<B> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                built: VecDeque::new(),
                admitted: 0,
                building: 0,
                open: true,
            }),
            changed: Condvar::new(),
            capacity,
        });
        let mut threads = Vec::new();
        for _ in 0..jobs.max(1) {
            let shared = Arc::clone(&shared);
            threads.push(std::thread::spawn(move || build_loop(&shared)));
        }
        for lane in 0..slots.max(1) * lanes.max(1) {
            let shared = Arc::clone(&shared);
            let slot = lane % slots.max(1);
            threads.push(std::thread::spawn(move || evaluate_loop(&shared, slot)));
        }
        Queue { shared, threads }
    }

    /// A place for one more request, or None when `capacity` are admitted already or the queue
    /// is closing.
    pub fn admit(&self) -> Option<Admission<B>> {
        let mut state = self.shared.lock();
        if !state.open || state.admitted >= self.shared.capacity {
            return None;
        }
        state.admitted += 1;
        Some(Admission {
            shared: Arc::clone(&self.shared),
            used: false,
        })
    }

    /// Queue `job` in the place `admission` holds.
    pub fn submit(&self, mut admission: Admission<B>, job: Job<B>) {
        admission.used = true;
        self.shared.lock().waiting.push_back(job);
        self.shared.changed.notify_all();
    }

    /// Requests admitted and not finished, and the most there may be.
    pub fn load(&self) -> (usize, usize) {
        (self.shared.lock().admitted, self.shared.capacity)
    }

    /// Admit no more, finish every admitted request, and end the threads.
    pub fn close(self) {
        self.shared.lock().open = false;
        self.shared.changed.notify_all();
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn build_loop<B: Backend>(shared: &Shared<B>) {
    let mut state = shared.lock();
    loop {
        if let Some(job) = state.waiting.pop_front() {
            state.building += 1;
            drop(state);
            let build = job.backend.compile(&job.task, &job.submission);
            state = shared.lock();
            state.building -= 1;
            state.built.push_back((job, build));
            shared.changed.notify_all();
        } else if !state.open && state.admitted == 0 {
            return;
        } else {
            state = shared.changed.wait(state).expect("queue lock");
        }
    }
}

fn evaluate_loop<B: Backend>(shared: &Shared<B>, slot: usize) {
    let mut state = shared.lock();
    loop {
        if let Some((job, build)) = state.built.pop_front() {
            drop(state);
            let eval = job
                .backend
                .evaluate(&job.task, &job.submission, &build, slot);
            (job.done)(eval);
            shared.finish_one();
            state = shared.lock();
        } else if !state.open && state.admitted == 0 {
            return;
        } else {
            state = shared.changed.wait(state).expect("queue lock");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::report::tests::sample_evaluation;
    use crate::task::TaskId;
    use crate::verdict::Verdict;

    /// Builds and evaluations that take `ms` each; counts evaluations per slot and the most
    /// running at once on any slot. Evaluations wait (up to a minute) until `together` slots
    /// have started one, so a slot cannot take every job while another is idle, however the
    /// threads are scheduled.
    struct Fake {
        ms: u64,
        per_slot: Vec<AtomicUsize>,
        busy: Vec<AtomicUsize>,
        most_busy: AtomicUsize,
        together: usize,
        started: (Mutex<Vec<bool>>, Condvar),
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

    impl Backend for Fake {
        fn compile(&self, _: &Task, _: &Submission) -> Build {
            std::thread::sleep(Duration::from_millis(self.ms));
            sample_evaluation("honest.py").build.expect("built")
        }

        fn evaluate(&self, task: &Task, sub: &Submission, _: &Build, slot: usize) -> Evaluation {
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
    }

    fn job(backend: &Arc<Fake>, n: u32, tx: &mpsc::Sender<String>) -> Job<Fake> {
        let id = TaskId {
            level: 1,
            number: 19,
        };
        let file = format!("level1/19_ReLU/{n:06}.py");
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
            done: Box::new(move |e| tx.send(e.file).unwrap()),
        }
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
            let places: Vec<_> = (0..offered).filter_map(|_| queue.admit()).collect();
            assert_eq!(places.len(), admitted);
            assert_eq!(queue.load(), (admitted, capacity));
            for (n, place) in places.into_iter().enumerate() {
                queue.submit(place, job(&fake, n as u32, &tx));
            }
            let mut files: Vec<String> = (0..admitted).map(|_| rx.recv().unwrap()).collect();
            files.sort();
            files.dedup();
            assert_eq!(files.len(), admitted);
            queue.close();
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
        assert!(queue.admit().is_none(), "full");
        drop(place);
        let (tx, rx) = mpsc::channel();
        let place = queue.admit().expect("the place was given back");
        queue.submit(place, job(&fake, 0, &tx));
        // Closing waits for the admitted request, which still reports its result.
        queue.close();
        assert_eq!(rx.try_recv().unwrap(), "level1/19_ReLU/000000.py");
    }
}
