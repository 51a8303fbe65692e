//! The process's one handler of SIGINT, SIGTERM and SIGHUP (`ctrlc`, with its `termination`
//! feature), installed by the commands that keep workers running (`eval`, `serve`).
//!
//! Ending on a signal (`exit_on_signal`; a service's second signal) does, in order: take the
//! record's write lock, so that no report is left half-written and no evaluation the signal cut
//! short (its workers killed) is recorded after it (`writing`); kill every live worker with what
//! it started (`worker::live::end_all`); undo what was registered (`undo_on_exit`: locked
//! clocks); say so on stderr and exit with `Exit::Stopped`. A service stops gracefully at the
//! first signal instead (`stop_on_signal`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::exit::Exit;
use crate::worker::live;

/// Held (shared) while a run record's files are written; the exit takes it alone.
static WRITES: RwLock<()> = RwLock::new(());
/// What an exit on a signal undoes first.
static UNDO: Mutex<Vec<Box<dyn FnMut() + Send>>> = Mutex::new(Vec::new());
/// How long an exit waits for a record being written before it goes on regardless.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// Hold while writing a run record's files: an exit on a signal waits for it (up to
/// `WRITE_WAIT`), and nothing is written after that exit began.
pub fn writing() -> RwLockReadGuard<'static, ()> {
    WRITES.read().unwrap_or_else(PoisonError::into_inner)
}

/// Run `undo` when kbench exits on a signal (a normal end undoes through its own guards).
pub fn undo_on_exit(undo: impl FnMut() + Send + 'static) {
    UNDO.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Box::new(undo));
}

/// End kbench at the first signal; `note` says what the record holds.
pub fn exit_on_signal(note: String) -> Result<(), String> {
    install(move || end(&note))
}

/// At the first signal set `stop` (a service then stops gracefully); end kbench at a signal
/// that comes with `stop` already set. `note` says what the record holds then.
pub fn stop_on_signal(stop: Arc<AtomicBool>, note: String) -> Result<(), String> {
    install(move || {
        if stop.swap(true, Ordering::SeqCst) {
            end(&note);
        }
    })
}

fn install(handler: impl FnMut() + Send + 'static) -> Result<(), String> {
    ctrlc::set_handler(handler).map_err(|e| format!("handle termination signals: {e}"))
}

/// The exit on a signal (the module's doc says the order).
fn end(note: &str) -> ! {
    let _writes = hold_writes(WRITE_WAIT);
    let ended = live::end_all();
    for undo in UNDO
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter_mut()
    {
        undo();
    }
    eprintln!("kbench: stopped by a signal: {ended} worker process group(s) ended; {note}");
    std::process::exit(Exit::Stopped as i32)
}

/// The record's write lock, once the write under way (if any) is done, or None after `wait`.
fn hold_writes(wait: Duration) -> Option<RwLockWriteGuard<'static, ()>> {
    let until = Instant::now() + wait;
    loop {
        match WRITES.try_write() {
            Ok(held) => return Some(held),
            Err(std::sync::TryLockError::Poisoned(held)) => return Some(held.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit's lock waits for a write under way, and gives up on one that does not end.
    #[test]
    fn the_exit_waits_for_a_record_being_written() {
        let held = writing();
        assert!(hold_writes(Duration::from_millis(50)).is_none());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(hold_writes(Duration::from_secs(60)).is_some());
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
    }
}
