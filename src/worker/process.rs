//! One worker process: spawn in its own process group with the protocol on private pipes
//! (fds 3 and 4, never stdout), deadlines per request, capped logs, kill of the whole group.
//! Every worker is started through `live`, which ends it with kbench. It knows nothing of tasks
//! or verdicts.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::link::{Failure, Link};
use super::live::{self, Registration};
use super::protocol::{self, Reply, Unread};
use super::request::{Exit, Request};
use super::streams::{drain, pipe, read_replies, Stop};
use super::tree::{self, Beside};

/// How often a request's wait looks whether the worker's process has ended.
const EXIT_CHECK: Duration = Duration::from_millis(100);
/// How long the processes of a killed worker's PID namespace may take to end (the kernel kills
/// and reaps them all before its init ends) before the worker counts as not gone.
const NAMESPACE_END: Duration = Duration::from_secs(30);
/// How long the reader of a worker whose process has ended may take to hand over what it wrote
/// before it ended (already in the pipe).
const LAST_WORDS: Duration = Duration::from_millis(200);

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

pub struct Worker {
    child: Child,
    requests: Option<File>,
    replies: Receiver<std::io::Result<String>>,
    /// The key its replies are signed with (`protocol::key`).
    key: String,
    /// No request failed or was answered with an error, and it was not killed (`Link::clean`).
    clean: bool,
    /// The readers of its stdout and stderr.
    drains: Vec<JoinHandle<()>>,
    /// Tells its readers it is gone (`kill`).
    stop: Stop,
    /// Every process of it is known to have ended, its PID namespace's too (`kill`).
    gone: bool,
    /// The processes `pause` stopped, for `resume`.
    paused: Vec<u32>,
    /// Its group among the live ones (`live`), let go of when the worker is dropped.
    _live: Registration,
}

impl Worker {
    pub fn spawn(spec: &Spawn) -> std::io::Result<Worker> {
        let (req_read, req_write) = pipe()?;
        let (rep_read, rep_write) = pipe()?;
        let stop = Stop::new()?;
        let log = File::create(&spec.log)?;
        let mut cmd = Command::new(&spec.python);
        venv_path(&mut cmd, &spec.python);
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
        let open_max = open_max();
        let kbench = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe fcntl/dup2/close/close_range/prctl between fork and
        // exec. The worker is killed when kbench ends (`live::die_with_parent`). The
        // pipe fds may themselves be 3 or 4, so they are first moved above 10; dup2 then clears
        // CLOEXEC on 3 and 4. Every fd above 4 is then closed at exec, whoever opened it and
        // wherever kbench got it from (a library, kbench's own parent): the worker starts with
        // stdin, stdout, stderr and its protocol pipes only, so no process it leaves behind can
        // hold anyone else's pipe open.
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
                close_at_exec_from(5, open_max);
                live::die_with_parent(kbench)
            });
        }
        let (mut child, registration) = live::spawn(cmd)?;
        drop(req_read);
        drop(rep_write);
        let log = Arc::new(Mutex::new((log, 0u64)));
        let drains = vec![
            drain(
                child.stdout.take().expect("piped stdout"),
                log.clone(),
                stop.clone(),
            ),
            drain(
                child.stderr.take().expect("piped stderr"),
                log,
                stop.clone(),
            ),
        ];
        let replies = read_replies(rep_read, stop.clone());
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
            stop,
            key,
            clean: true,
            gone: false,
            paused: Vec::new(),
            _live: registration,
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
        match self.next_line(deadline)? {
            Ok(line) => protocol::parse(&line, &nonce, &self.key).map_err(|unread| {
                self.kill();
                match unread {
                    Unread::Forged(why) => Failure::Forged(why),
                    Unread::Malformed(why) => Failure::Protocol(why),
                }
            }),
            Err(e) => {
                self.kill();
                Err(Failure::Protocol(e.to_string()))
            }
        }
    }

    /// The next reply line within `deadline`. A worker whose process has ended is reported as
    /// soon as that is seen, not at its reply pipe's end: a process that left its group may
    /// hold the pipe open.
    fn next_line(&mut self, deadline: Duration) -> Result<std::io::Result<String>, Failure> {
        let until = Instant::now() + deadline;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left.min(EXIT_CHECK)) {
                Ok(line) => return Ok(line),
                Err(RecvTimeoutError::Disconnected) => return Err(Failure::Exited(self.reap())),
                Err(RecvTimeoutError::Timeout) if left <= EXIT_CHECK => {
                    self.kill();
                    return Err(Failure::Timeout(deadline));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if matches!(self.child.try_wait(), Ok(Some(_))) {
                        return self
                            .replies
                            .recv_timeout(LAST_WORDS)
                            .map_err(|_| Failure::Exited(self.reap()));
                    }
                }
            }
        }
    }

    fn reap(&mut self) -> String {
        let status = self.child.wait_timeout_or_kill();
        describe(status)
    }

    /// Ask the worker to exit, then make sure it and its children are gone. Whether every process
    /// it started is known to have ended (a confined worker's whole PID namespace, detached
    /// processes included): until then nothing it could touch may serve another evaluation.
    pub fn finish(self) -> bool {
        self.finish_within(Duration::ZERO)
    }

    /// `finish`, once the worker had `grace` to exit on its own: a tool that wraps it (the
    /// sanitizer) writes its report as it exits.
    pub fn finish_within(mut self, grace: Duration) -> bool {
        let _ = self.requests.as_mut().map(|f| {
            let line = protocol::request(&Request::Exit(Exit {}), &protocol::nonce()) + "\n";
            f.write_all(line.as_bytes())
        });
        let until = Instant::now() + grace;
        while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        for d in self.drains.drain(..) {
            let _ = d.join();
        }
        self.gone
    }

    /// The processes that are the worker itself: the one started and, where that is the
    /// sandbox's `unshare`, the init of its PID namespace (the worker's Python).
    fn own(&self) -> Vec<u32> {
        let root = self.child.id();
        let mut own = vec![root];
        let inner = std::fs::read_to_string(format!("/proc/{root}/task/{root}/children"))
            .unwrap_or_default();
        let mut kids = inner.split_whitespace().filter_map(|c| c.parse().ok());
        if let (Some(only), None) = (kids.next(), kids.next()) {
            let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
            if ns(only).is_some() && ns(only) != ns(root) {
                own.push(only);
            }
        }
        own
    }
}

impl Link for Worker {
    fn exchange(&mut self, request: Request, deadline: Duration) -> Result<Reply, Failure> {
        let reply = self.send(&request, deadline);
        self.clean &= matches!(reply, Ok(Reply::Ok(_)));
        reply
    }

    /// The process that runs the worker's Python: the one started, or, where that is the
    /// sandbox's `unshare`, the init of its PID namespace (never a process the worker forked).
    fn python_pid(&self) -> u32 {
        *self
            .own()
            .last()
            .expect("the worker's own processes start with the one started")
    }

    fn pause(&mut self) {
        let spared: Vec<u32> = self
            .own()
            .into_iter()
            .chain(self.paused.iter().copied())
            .collect();
        let stopped = tree::stop(self.child.id(), &spared);
        self.paused.extend(stopped);
    }

    fn resume(&mut self) {
        tree::resume(&std::mem::take(&mut self.paused));
    }

    fn beside(&self) -> Vec<Beside> {
        tree::census(self.child.id(), &self.own())
    }

    /// Kill the worker's whole process group (a submission may have forked) and reap it; a
    /// confined worker's PID namespace (processes that left the group too) is awaited until its
    /// init has ended, which it does only after every other process of it (`gone`).
    fn kill(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        let init = tree::namespace_init(self.child.id());
        // SAFETY: plain syscall on the group this worker leads.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        self.paused.clear();
        self.gone = init.is_none_or(|init| tree::ended(&init, NAMESPACE_END));
        self.requests = None;
        self.clean = false;
        self.stop.set();
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

/// The highest fd a process may hold, bounded (only `close_at_exec_from`'s fallback walks it).
/// A venv's tools (ninja, nvcc from pip) sit beside its python: put them on the command's PATH,
/// as activating the venv would.
fn venv_path(cmd: &mut Command, python: &str) {
    let Some(bin) = Path::new(python)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    else {
        return;
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let joined = std::env::join_paths(
        std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
    );
    if let Ok(joined) = joined {
        cmd.env("PATH", joined);
    }
}

fn open_max() -> libc::c_int {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    match got {
        0 => limit.rlim_cur.min(1 << 20) as libc::c_int,
        _ => 1 << 16,
    }
}

/// Mark every fd from `first` on close-on-exec: `close_range` (Linux 5.11), else one by one up
/// to `open_max`.
///
/// # Safety
/// Async-signal-safe (plain syscalls): callable between fork and exec.
unsafe fn close_at_exec_from(first: libc::c_int, open_max: libc::c_int) {
    // SAFETY: plain syscalls on this process's own fd table.
    unsafe {
        let all = libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if all != 0 {
            for fd in first..open_max {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::{Link, Spawn, Worker};
    use crate::worker::request::{Exit, Request};

    /// A worker that runs `script` in `sh`, in `dir`.
    fn shell(dir: &Path, script: &str) -> Worker {
        Worker::spawn(&Spawn {
            python: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            log: dir.join(format!("{}.log", rand::random::<u32>())),
            cwd: dir.to_path_buf(),
        })
        .unwrap()
    }

    /// The pid a script wrote to `name`, once it has.
    fn written_pid(dir: &Path, name: &str) -> libc::pid_t {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no {name}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn end(pid: libc::pid_t) {
        // SAFETY: plain syscall on the process the test's script started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    /// A process that left the worker's group (`setsid`) and holds its pipes does not keep
    /// kbench waiting for their end: neither `finish` (its stdout and stderr) nor a request (its
    /// reply pipe) once the worker itself has exited.
    #[test]
    fn a_process_that_left_the_group_holding_the_pipes_keeps_nothing_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let daemon = "setsid sleep 60 & echo $! > daemon.pid";
        type Case = (&'static str, fn(Worker) -> String, &'static str);
        let cases: [Case; 2] = [
            (
                "; sleep 60",
                |w| {
                    w.finish();
                    "finished".into()
                },
                "finished",
            ),
            (
                "; exit 3",
                |mut w| {
                    let request = Request::Exit(Exit {});
                    format!("{:?}", w.exchange(request, Duration::from_secs(60)))
                },
                r#"Err(Exited("exit code 3"))"#,
            ),
        ];
        for (rest, act, want) in cases {
            let worker = shell(dir.path(), &format!("{daemon}{rest}"));
            let pid = written_pid(dir.path(), "daemon.pid");
            std::fs::remove_file(dir.path().join("daemon.pid")).unwrap();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || tx.send(act(worker)));
            let got = rx.recv_timeout(Duration::from_secs(5));
            end(pid);
            assert_eq!(got, Ok(want.to_string()), "{rest}");
        }
    }

    /// Workers started at once hold only their own pipes (stdout, stderr, requests, replies):
    /// none of another's, which would keep its pipes open past its end.
    #[test]
    fn workers_started_at_once_hold_only_their_own_pipes() {
        let dir = tempfile::tempdir().unwrap();
        let workers: Vec<Worker> = std::thread::scope(|s| {
            let started: Vec<_> = (0..6)
                .map(|_| s.spawn(|| shell(dir.path(), "exec sleep 60")))
                .collect();
            started.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let pipes: Vec<HashSet<String>> = workers
            .iter()
            .map(|w| {
                std::fs::read_dir(format!("/proc/{}/fd", w.python_pid()))
                    .unwrap()
                    .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                    .map(|target| target.display().to_string())
                    .filter(|target| target.starts_with("pipe:"))
                    .collect()
            })
            .collect();
        let mut seen = HashSet::new();
        for held in &pipes {
            assert_eq!(held.len(), 4, "{held:?}");
            assert!(held.iter().all(|p| seen.insert(p.clone())), "{pipes:?}");
        }
        for w in workers {
            w.finish();
        }
    }
}
