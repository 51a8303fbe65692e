//! A worker's pipes as kbench reads them: its stdout and stderr into a capped log (`drain`), its
//! reply lines (`read_replies`). Every read waits at most `POLL` before the reader looks whether
//! it was told to stop (`Stop`): the end of a worker is its process group's death, never its
//! pipes' end of file, which a process that left the group (a daemon an unconfined submission
//! started) can hold off for ever.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a worker's stdout and stderr may write to its log before the rest is dropped.
const LOG_CAP_BYTES: u64 = 4 << 20;
/// Longest reply line accepted; a longer one is a protocol failure, not an allocation.
const MAX_REPLY_BYTES: usize = 64 << 20;
/// Longest wait of one read before the reader looks whether it was told to stop.
pub(super) const POLL: Duration = Duration::from_millis(50);
/// How long a reader told to stop goes on reading what keeps coming (a process outside the
/// worker's group writing without pause).
const STOP_GRACE: Duration = Duration::from_millis(500);

/// A pipe whose ends are closed in every process kbench starts (`O_CLOEXEC`): a worker gets
/// only the ends it is given (`Worker::spawn`), never a sibling's.
pub(super) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array; both are owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fds were just created and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Tells a worker's readers that the worker is gone: each reads what its pipe already holds,
/// then ends.
#[derive(Clone, Default)]
pub(super) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What one read gave.
enum Chunk {
    Data(usize),
    /// Nothing within `POLL`.
    Idle,
    /// End of file, or a read error.
    End,
}

/// A pipe's read end, read without blocking for longer than `POLL`.
struct Reader {
    file: File,
    stop: Stop,
    /// When the reader first saw `stop`.
    stopped: Option<Instant>,
}

impl Reader {
    fn new(pipe: impl Into<OwnedFd>, stop: Stop) -> Reader {
        let file = File::from(pipe.into());
        let fd = file.as_raw_fd();
        // SAFETY: plain fcntl on an fd this reader owns. Non-blocking, a read after poll cannot
        // wait, even if the data it announced is gone.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Reader {
            file,
            stop,
            stopped: None,
        }
    }

    /// The next chunk, waiting at most `POLL`; `None` once the pipe ended, or once told to stop
    /// and the pipe is idle (or `STOP_GRACE` passed).
    fn next(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            if self.stop.is_set() {
                let since = *self.stopped.get_or_insert_with(Instant::now);
                if since.elapsed() > STOP_GRACE {
                    return None;
                }
            }
            match self.read(buf) {
                Chunk::Data(n) => return Some(n),
                Chunk::End => return None,
                Chunk::Idle if self.stop.is_set() => return None,
                Chunk::Idle => {}
            }
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> Chunk {
        let mut poll = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call.
        let ready = unsafe { libc::poll(&mut poll, 1, POLL.as_millis() as libc::c_int) };
        if ready == 0 {
            return Chunk::Idle;
        }
        if ready < 0 {
            return match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted => Chunk::Idle,
                _ => Chunk::End,
            };
        }
        match self.file.read(buf) {
            Ok(0) => Chunk::End,
            Ok(n) => Chunk::Data(n),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Chunk::Idle
            }
            Err(_) => Chunk::End,
        }
    }
}

/// Copy a stream into the shared log until `LOG_CAP_BYTES`, then count what is dropped; until
/// the stream ends or `stop`.
pub(super) fn drain(
    stream: impl Into<OwnedFd>,
    log: Arc<Mutex<(File, u64)>>,
    stop: Stop,
) -> JoinHandle<()> {
    let mut reader = Reader::new(stream, stop);
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        let mut dropped = 0u64;
        while let Some(n) = reader.next(&mut buf) {
            let mut guard = log.lock().expect("log lock");
            let (file, written) = &mut *guard;
            let room = LOG_CAP_BYTES.saturating_sub(*written).min(n as u64) as usize;
            if room > 0 && file.write_all(&buf[..room]).is_ok() {
                *written += room as u64;
            }
            dropped += (n - room) as u64;
        }
        if dropped > 0 {
            let mut guard = log.lock().expect("log lock");
            let _ = writeln!(
                guard.0,
                "\n[kbench: {dropped} more bytes of output dropped]"
            );
        }
    })
}

/// The reply lines of a worker's pipe (each with its newline), read on a thread of their own
/// until the pipe ends or `stop`; a line longer than `MAX_REPLY_BYTES`, one cut off by the
/// end, or one that is not UTF-8 ends them with an error.
pub(super) fn read_replies(pipe: OwnedFd, stop: Stop) -> Receiver<std::io::Result<String>> {
    let (tx, replies) = mpsc::channel();
    let mut reader = Reader::new(pipe, stop);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut pending = Vec::new();
        while let Some(n) = reader.next(&mut buf) {
            let mut from = pending.len();
            pending.extend_from_slice(&buf[..n]);
            while let Some(at) = pending[from..].iter().position(|b| *b == b'\n') {
                let line = String::from_utf8(pending.drain(..=from + at).collect())
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e));
                let bad = line.is_err();
                if tx.send(line).is_err() || bad {
                    return;
                }
                from = 0;
            }
            if pending.len() > MAX_REPLY_BYTES {
                break;
            }
        }
        if !pending.is_empty() {
            let _ = tx.send(Err(std::io::Error::other("reply line too long or cut off")));
        }
    });
    replies
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{pipe, read_replies, Stop};

    /// What the reply reader hands over of what a worker wrote before its pipe ended.
    #[test]
    fn reply_lines_are_read_whole_and_a_cut_or_broken_line_ends_them() {
        type Case = (&'static [u8], &'static [Result<&'static str, ()>]);
        let cases: [Case; 5] = [
            (b"", &[]),
            (b"a\nbc\n", &[Ok("a\n"), Ok("bc\n")]),
            (b"a\nbc", &[Ok("a\n"), Err(())]),
            (b"\xff\nafter\n", &[Err(())]),
            (b"\n", &[Ok("\n")]),
        ];
        for (written, want) in cases {
            let (read, write) = pipe().unwrap();
            let replies = read_replies(read, Stop::default());
            std::fs::File::from(write).write_all(written).unwrap();
            let got: Vec<Result<String, ()>> = replies.iter().map(|r| r.map_err(|_| ())).collect();
            let want: Vec<Result<String, ()>> = want.iter().map(|r| r.map(String::from)).collect();
            assert_eq!(got, want, "{written:?}");
        }
    }

    /// Told to stop, a reader ends though the pipe's other end stays open.
    #[test]
    fn a_reader_told_to_stop_ends_with_the_pipe_still_open() {
        let (read, _write) = pipe().unwrap();
        let stop = Stop::default();
        let replies = read_replies(read, stop.clone());
        stop.set();
        let ended = replies.recv_timeout(std::time::Duration::from_secs(5));
        assert!(
            matches!(ended, Err(std::sync::mpsc::RecvTimeoutError::Disconnected)),
            "{ended:?}"
        );
    }
}
