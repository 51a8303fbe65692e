//! One worker process: spawn in its own process group with the protocol on private pipes
//! (fds 3 and 4, never stdout), deadlines per request, capped logs, kill of the whole group.
//! It knows nothing of tasks or verdicts.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::link::Link;
use super::protocol::{self, Reply};
use super::request::{Exit, Request};

/// What a worker's stdout and stderr may write to its log before the rest is dropped.
pub const LOG_CAP_BYTES: u64 = 4 << 20;
/// Longest reply line accepted; a longer one is a protocol failure, not an allocation.
const MAX_REPLY_BYTES: u64 = 64 << 20;

/// How to start a worker.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub python: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub log: PathBuf,
    pub cwd: PathBuf,
}

impl Spawn {
    /// `python -m kbench_worker ROLE` with the embedded package on PYTHONPATH, running in `cwd`.
    pub fn role(python: &str, worker_path: &Path, role: &str, log: PathBuf, cwd: PathBuf) -> Spawn {
        Spawn {
            python: python.into(),
            args: vec!["-m".into(), "kbench_worker".into(), role.into()],
            env: vec![("PYTHONPATH".into(), worker_path.display().to_string())],
            log,
            cwd,
        }
    }

    pub fn env(mut self, name: &str, value: impl Into<String>) -> Spawn {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// Why a request got no reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No reply within the deadline; the worker was killed.
    Timeout(Duration),
    /// The worker ended without replying (crash, signal, `os._exit`).
    Exited(String),
    /// The reply could not be read as the protocol.
    Protocol(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no reply within {:.0} s", d.as_secs_f64()),
            Failure::Exited(how) => write!(f, "worker exited without replying ({how})"),
            Failure::Protocol(why) => write!(f, "protocol error: {why}"),
        }
    }
}

pub struct Worker {
    child: Child,
    requests: Option<File>,
    replies: Receiver<std::io::Result<String>>,
    /// The key its replies are signed with (`protocol::key`).
    key: String,
    /// No request failed or was answered with an error, and it was not killed (`Link::clean`).
    clean: bool,
    drains: Vec<JoinHandle<()>>,
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array; both are owned from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fds were just created and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Copy a stream into the shared log until `LOG_CAP_BYTES`, then count what is dropped.
fn drain(mut stream: impl Read + Send + 'static, log: Arc<Mutex<(File, u64)>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        let mut dropped = 0u64;
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
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

/// The reply lines of a worker's pipe, read on a thread of their own (up to `MAX_REPLY_BYTES`
/// each; a longer or cut-off line ends them with an error).
fn read_replies(pipe: OwnedFd) -> Receiver<std::io::Result<String>> {
    let (tx, replies) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(File::from(pipe));
        loop {
            let mut line = String::new();
            match reader.by_ref().take(MAX_REPLY_BYTES).read_line(&mut line) {
                Ok(0) => break,
                Ok(_) if !line.ends_with('\n') => {
                    let _ = tx.send(Err(std::io::Error::other("reply line too long or cut off")));
                    break;
                }
                Ok(_) => {
                    if tx.send(Ok(line)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    replies
}

impl Worker {
    pub fn spawn(spec: &Spawn) -> std::io::Result<Worker> {
        let (req_read, req_write) = pipe()?;
        let (rep_read, rep_write) = pipe()?;
        let log = File::create(&spec.log)?;
        let mut cmd = Command::new(&spec.python);
        // A venv's tools (ninja, nvcc from pip) sit beside its python: put them on PATH, as
        // activating the venv would.
        if let Some(bin) = Path::new(&spec.python)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let joined = std::env::join_paths(
                std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
            );
            if let Ok(joined) = joined {
                cmd.env("PATH", joined);
            }
        }
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("KBENCH_PROTOCOL_FDS", "3,4")
            .env("PYTHONUNBUFFERED", "1")
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .process_group(0);
        let (r, w) = (req_read.as_raw_fd(), rep_write.as_raw_fd());
        // SAFETY: only async-signal-safe fcntl/dup2/close between fork and exec. The pipe fds may
        // themselves be 3 or 4, so they are first moved above 10; dup2 then clears CLOEXEC on 3 and 4.
        unsafe {
            cmd.pre_exec(move || {
                let (r, w) = (
                    libc::fcntl(r, libc::F_DUPFD, 10),
                    libc::fcntl(w, libc::F_DUPFD, 10),
                );
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(r);
                libc::close(w);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        drop(req_read);
        drop(rep_write);
        let log = Arc::new(Mutex::new((log, 0u64)));
        let drains = vec![
            drain(child.stdout.take().expect("piped stdout"), log.clone()),
            drain(child.stderr.take().expect("piped stderr"), log),
        ];
        let replies = read_replies(rep_read);
        let key = protocol::key();
        let mut requests = File::from(req_write);
        // The pipe holds the line until the worker reads it, before its first request. A worker
        // gone already is reported by that request, with how it ended.
        let _ = requests.write_all(protocol::key_line(&key).as_bytes());
        Ok(Worker {
            child,
            requests: Some(requests),
            replies,
            drains,
            key,
            clean: true,
        })
    }

    /// Send one request and wait for its reply line, parsed and authenticated; on any failure
    /// the worker is killed.
    fn send(&mut self, request: &Request, deadline: Duration) -> Result<Reply, Failure> {
        let nonce = protocol::nonce();
        let line = protocol::request(request, &nonce) + "\n";
        let sent = self
            .requests
            .as_mut()
            .map(|f| f.write_all(line.as_bytes()).and_then(|_| f.flush()));
        if !matches!(sent, Some(Ok(()))) {
            return Err(Failure::Exited(self.reap()));
        }
        match self.replies.recv_timeout(deadline) {
            Ok(Ok(line)) => protocol::parse(&line, &nonce, &self.key).map_err(|why| {
                self.kill();
                Failure::Protocol(why)
            }),
            Ok(Err(e)) => {
                self.kill();
                Err(Failure::Protocol(e.to_string()))
            }
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(Failure::Timeout(deadline))
            }
            Err(RecvTimeoutError::Disconnected) => Err(Failure::Exited(self.reap())),
        }
    }

    fn reap(&mut self) -> String {
        let status = self.child.wait_timeout_or_kill();
        describe(status)
    }

    /// Ask the worker to exit, then make sure it and its children are gone.
    pub fn finish(mut self) {
        let _ = self.requests.as_mut().map(|f| {
            let line = protocol::request(&Request::Exit(Exit {}), &protocol::nonce()) + "\n";
            f.write_all(line.as_bytes())
        });
        self.kill();
        for d in self.drains.drain(..) {
            let _ = d.join();
        }
    }
}

impl Link for Worker {
    fn exchange(&mut self, request: Request, deadline: Duration) -> Result<Reply, Failure> {
        let reply = self.send(&request, deadline);
        self.clean &= matches!(reply, Ok(Reply::Ok(_)));
        reply
    }

    /// The process that runs the worker's Python: the one started, or, where that was a
    /// launcher (the sandbox's `unshare`, `sh`), the innermost of its only children.
    fn python_pid(&self) -> u32 {
        let mut pid = self.child.id();
        loop {
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            let mut ids = children.split_whitespace().filter_map(|c| c.parse().ok());
            match (ids.next(), ids.next()) {
                (Some(only), None) => pid = only,
                _ => return pid,
            }
        }
    }

    /// Kill the worker's whole process group (a submission may have forked) and reap it.
    fn kill(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscall on the group this worker leads.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        self.requests = None;
        self.clean = false;
    }

    fn clean(&self) -> bool {
        self.clean
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.requests.is_some() {
            self.kill();
        }
    }
}

trait WaitOrKill {
    fn wait_timeout_or_kill(&mut self) -> Option<ExitStatus>;
}

impl WaitOrKill for Child {
    /// The worker closed its reply pipe: it is exiting. Give it a moment, then kill the group.
    fn wait_timeout_or_kill(&mut self) -> Option<ExitStatus> {
        for _ in 0..50 {
            if let Ok(Some(status)) = self.try_wait() {
                // SAFETY: the group may still hold a submission's children.
                unsafe {
                    libc::killpg(self.id() as libc::pid_t, libc::SIGKILL);
                }
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe {
            libc::killpg(self.id() as libc::pid_t, libc::SIGKILL);
        }
        self.wait().ok()
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) if s.signal().is_some() => format!("killed by signal {}", s.signal().unwrap_or(0)),
        Some(s) => format!("exit code {}", s.code().unwrap_or(-1)),
        None => "status unknown".into(),
    }
}
