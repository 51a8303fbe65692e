//! Lanes: several evaluations share one GPU for everything but what is measured. Loading and
//! the correctness trials are mostly host work (Python, transfers, comparisons) that leaves the
//! GPU idle, so evaluations in different lanes of one GPU overlap them; timing and the profile
//! take the GPU alone, since another process's kernels would time-slice with the timed ones.
//! Opt-in (`--lanes`): on an H100 two lanes gained nothing before `Hold::step` existed, each
//! phase running slower beside the other lane (`reports/h100-lanes`); with it, 15 % on
//! level2/1-40 but nothing on 184 tasks of the identity run (`reports/h100-targets`).
//!
//! The gate is two task-fair reader-writer locks (parking_lot). `compute`: once a lane asks to
//! time, no other lane starts a shared step until it has timed, and lanes in a shared phase let
//! it in between their steps (`Hold::step`), so timing waits for at most the steps already
//! running. `memory`: every evaluation holds it while its workers live, since they hold GPU
//! memory; one that ran out of memory beside another runs again with it alone, once the other
//! lanes' workers have ended (workers started ahead still hold their CUDA contexts).

use std::time::{Duration, Instant};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One GPU's gate.
#[derive(Default)]
pub struct Gate {
    memory: RwLock<()>,
    compute: RwLock<()>,
}

/// What an evaluation holds of one of the gate's locks, until dropped.
enum Guard<'a> {
    Shared { held: RwLockReadGuard<'a, ()> },
    Alone { _held: RwLockWriteGuard<'a, ()> },
}

/// An evaluation's hold on its GPU, and how long it waited for it. Take it before the
/// evaluation's workers and drop it after them.
pub struct Hold<'a> {
    gate: &'a Gate,
    _memory: Guard<'a>,
    /// Shared or alone; None with the memory alone (no other lane runs), and while changing.
    compute: Option<Guard<'a>>,
    pub waited: Duration,
}

impl Gate {
    /// Hold the GPU beside other lanes (`alone` false: load and correctness steps), or the
    /// whole GPU and its memory for the evaluation (`alone` true: a retry after running out of
    /// memory beside another).
    pub fn enter(&self, alone: bool) -> Hold<'_> {
        let started = Instant::now();
        let (memory, compute) = if alone {
            let memory = Guard::Alone {
                _held: self.memory.write(),
            };
            (memory, None)
        } else {
            let memory = Guard::Shared {
                held: self.memory.read(),
            };
            let compute = Guard::Shared {
                held: self.compute.read(),
            };
            (memory, Some(compute))
        };
        Hold {
            gate: self,
            _memory: memory,
            compute,
            waited: started.elapsed(),
        }
    }
}

impl Hold<'_> {
    /// Between two steps of a shared phase: a lane waiting to time goes first, and this one
    /// goes on once it has.
    pub fn step(&mut self) {
        if let Some(Guard::Shared { held }) = &mut self.compute {
            let started = Instant::now();
            RwLockReadGuard::bump(held);
            self.waited += started.elapsed();
        }
    }

    /// Have the GPU alone from here on (timing, the profile): let go of the shared hold first,
    /// so two lanes that both want to time cannot wait for each other.
    pub fn alone(&mut self) {
        if let Some(Guard::Shared { .. }) = self.compute {
            let started = Instant::now();
            self.compute = None;
            self.compute = Some(Guard::Alone {
                _held: self.gate.compute.write(),
            });
            self.waited += started.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn lanes_share_until_one_times_and_timing_runs_alone() {
        let gate = Gate::default();
        let sharing = AtomicUsize::new(0);
        let most_sharing = AtomicUsize::new(0);
        let timing = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let mut hold = gate.enter(false);
                        assert!(!timing.load(Ordering::SeqCst), "shared beside timing");
                        let now = sharing.fetch_add(1, Ordering::SeqCst) + 1;
                        most_sharing.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        sharing.fetch_sub(1, Ordering::SeqCst);
                        hold.alone();
                        assert_eq!(sharing.load(Ordering::SeqCst), 0, "timing beside a lane");
                        assert!(!timing.swap(true, Ordering::SeqCst), "two lanes timing");
                        std::thread::sleep(Duration::from_millis(1));
                        timing.store(false, Ordering::SeqCst);
                    }
                });
            }
        });
        assert!(
            most_sharing.load(Ordering::SeqCst) >= 2,
            "lanes never overlapped"
        );
    }

    #[test]
    fn a_lane_waiting_to_time_goes_before_new_shared_steps() {
        let gate = &Gate::default();
        let first = gate.enter(false);
        let (timed_tx, timed_rx) = mpsc::channel();
        let (shared_tx, shared_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut hold = gate.enter(false);
                hold.alone();
                timed_tx.send("timed").unwrap();
            });
            // The second lane waits to time behind the first lane's shared step.
            std::thread::sleep(Duration::from_millis(50));
            s.spawn(move || {
                let _third = gate.enter(false);
                shared_tx.send("shared").unwrap();
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                shared_rx.try_recv().is_err(),
                "a new shared step passed a waiting timing"
            );
            drop(first);
            assert_eq!(timed_rx.recv().unwrap(), "timed");
            assert_eq!(shared_rx.recv().unwrap(), "shared");
        });
    }

    #[test]
    fn a_lane_between_steps_lets_a_waiting_timing_in() {
        let gate = &Gate::default();
        let order = &std::sync::Mutex::new(Vec::new());
        let mut first = gate.enter(false);
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut hold = gate.enter(false);
                hold.alone();
                order.lock().unwrap().push("timed");
            });
            std::thread::sleep(Duration::from_millis(50));
            // Without a waiting timing a step goes straight on; with one, after it.
            order.lock().unwrap().push("step");
            first.step();
            order.lock().unwrap().push("next step");
        });
        assert_eq!(*order.lock().unwrap(), ["step", "timed", "next step"]);
        // With no lane waiting, a step goes straight on (else this would hang).
        gate.enter(false).step();
    }

    #[test]
    fn an_evaluation_alone_waits_for_the_other_lanes_to_end_and_excludes_them() {
        let gate = &Gate::default();
        let mut other = gate.enter(false);
        let (alone_tx, alone_rx) = mpsc::channel();
        let (later_tx, later_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let _alone = gate.enter(true);
                alone_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            });
            std::thread::sleep(Duration::from_millis(50));
            // The other lane steps and times: it still holds its memory, so the retry waits.
            other.step();
            other.alone();
            assert!(
                alone_rx.try_recv().is_err(),
                "alone beside a live evaluation"
            );
            s.spawn(move || {
                let _later = gate.enter(false);
                later_tx.send(()).unwrap();
            });
            drop(other);
            alone_rx.recv().unwrap();
            assert!(
                later_rx.try_recv().is_err(),
                "a lane entered beside one alone"
            );
            later_rx.recv().unwrap();
        });
    }
}
