//! A worker's pipes as kbench reads them: its stdout and stderr into a capped log (`drain`), its
//! reply lines (`read_replies`). Each reader waits on its pipe and on the worker's `Stop` at
//! once: the end of a worker is its process group's death (`Worker::kill`), never its pipes' end
//! of file, which a process that left the group (a daemon an unconfined submission started) can
//! hold off for ever. Told to stop, a reader takes what the pipe already holds and ends.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a worker's stdout and stderr may write to its log before the rest is dropped.
const LOG_CAP_BYTES: u64 = 4 << 20;
/// Longest reply line accepted; a longer one is a protocol failure, not an allocation.
const MAX_REPLY_BYTES: usize = 64 << 20;
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

/// Tells a worker's readers that the worker is gone: an eventfd that each reader polls beside
/// its pipe, so an idle reader does not wake until its pipe has data or it is stopped.
#[derive(Clone)]
pub(super) struct Stop(Arc<OwnedFd>);

impl Stop {
    pub(super) fn new() -> std::io::Result<Stop> {
        // SAFETY: eventfd returns a new fd or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the fd was just created and nothing else owns it.
        Ok(Stop(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Stop the readers (they stay stopped: nothing reads the count back).
    pub(super) fn set(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to an eventfd this value owns.
        unsafe {
            libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
    }
}

/// A pipe's read end, read until it ends or its `Stop`.
struct Reader {
    file: File,
    stop: Stop,
    /// When the reader first saw `stop`.
    stopped: Option<Instant>,
}

impl Reader {
    fn new(pipe: impl Into<OwnedFd>, stop: Stop) -> Reader {
        let file = File::from(pipe.into());
        // SAFETY: plain fcntl on an fd this reader owns. Non-blocking, a read after poll cannot
        // wait, even if the data it announced is gone.
        unsafe {
            let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Reader {
            file,
            stop,
            stopped: None,
        }
    }

    /// The next chunk; `None` once the pipe ended, or once stopped and the pipe holds nothing
    /// (or `STOP_GRACE` passed).
    fn next(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            if self.stopped.is_some_and(|at| at.elapsed() > STOP_GRACE) {
                return None;
            }
            let mut fds = [self.file.as_raw_fd(), self.stop.0.as_raw_fd()].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            let wait = if self.stopped.is_some() { 0 } else { -1 };
            // SAFETY: two pollfds, valid for the call.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) } < 0 {
                match std::io::Error::last_os_error().kind() {
                    std::io::ErrorKind::Interrupted => continue,
                    _ => return None,
                }
            }
            if fds[1].revents != 0 && self.stopped.is_none() {
                self.stopped = Some(Instant::now());
            }
            if fds[0].revents == 0 {
                match self.stopped {
                    Some(_) => return None,
                    None => continue,
                }
            }
            match self.file.read(buf) {
                Ok(0) => return None,
                Ok(n) => return Some(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return None,
            }
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
            let replies = read_replies(read, Stop::new().unwrap());
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
        let stop = Stop::new().unwrap();
        let replies = read_replies(read, stop.clone());
        stop.set();
        let ended = replies.recv_timeout(std::time::Duration::from_secs(5));
        assert!(
            matches!(ended, Err(std::sync::mpsc::RecvTimeoutError::Disconnected)),
            "{ended:?}"
        );
    }
}
