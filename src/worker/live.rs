//! Every worker process group kbench has started and not let go of, and the one thread that
//! starts them all, so that no worker outlives kbench however kbench ends.
//!
//! - A termination signal's handler (the `signals` module) ends every live group, with
//!   whatever its leader started that left the group since (`end_all`); no worker starts after
//!   that.
//! - Against kbench's own SIGKILL, which no handler sees, each worker is started with
//!   `PR_SET_PDEATHSIG(SIGKILL)` (`die_with_parent`, in its `pre_exec`). That signal fires when
//!   the *thread* that forked the child ends, and kbench starts workers from short-lived
//!   threads (the compile pool's, scoped threads, pool refills), so every worker is forked by
//!   one thread that lives as long as the process (`spawn`). Only the worker itself dies so:
//!   what an unconfined worker started dies with it only in the sandbox, whose PID namespace
//!   ends with its first process.

use std::collections::BTreeMap;
use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// The live groups, by their leader's pid, with the leader's start time (so a pid the kernel
/// gave to another process since is never signalled); `ended` once `end_all` ran.
struct Live {
    groups: BTreeMap<u32, u64>,
    ended: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    groups: BTreeMap::new(),
    ended: false,
});

/// A command to start, and where its child goes.
type Order = (Command, Sender<io::Result<Child>>);

/// The spawning thread's queue: started on first use, never ended.
static SPAWNER: OnceLock<Sender<Order>> = OnceLock::new();

/// A live group, let go of when dropped (with its `Worker`).
pub struct Registration {
    pid: u32,
}

impl Drop for Registration {
    fn drop(&mut self) {
        live().groups.remove(&self.pid);
    }
}

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Start `cmd` (a process group leader whose `pre_exec` calls `die_with_parent`) on the
/// spawning thread and register its group; refused once `end_all` ran.
pub fn spawn(cmd: Command) -> io::Result<(Child, Registration)> {
    let gone = || io::Error::other("kbench's spawning thread is gone");
    let (tx, rx) = mpsc::channel();
    spawner().send((cmd, tx)).map_err(|_| gone())?;
    let mut child = rx.recv().map_err(|_| gone())??;
    let pid = child.id();
    let mut live = live();
    if live.ended {
        drop(live);
        kill_group(pid);
        let _ = child.wait();
        return Err(io::Error::other("kbench is stopping: no worker starts"));
    }
    live.groups.insert(pid, start_time(pid).unwrap_or_default());
    Ok((child, Registration { pid }))
}

/// The spawning thread's queue, the thread started on first use.
fn spawner() -> &'static Sender<Order> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Order>();
        std::thread::Builder::new()
            .name("kbench-spawner".into())
            .spawn(move || {
                for (mut cmd, child) in rx {
                    let _ = child.send(cmd.spawn());
                }
            })
            .expect("start kbench's spawning thread");
        tx
    })
}

/// In a forked child, before exec: be killed when the thread that forked it ends (the spawning
/// thread, which ends with kbench); an error where kbench has ended already (the child's parent
/// is another process).
///
/// # Safety
/// Async-signal-safe (plain syscalls): callable between fork and exec.
pub(super) unsafe fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: plain syscalls on this process.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// Kill every live group and every process its leader started that is still its descendant,
/// and start no worker from here on; how many groups were live.
pub fn end_all() -> usize {
    let mut live = live();
    live.ended = true;
    let leaders: Vec<u32> = live
        .groups
        .iter()
        .filter(|&(&pid, &started)| start_time(pid) == Some(started))
        .map(|(&pid, _)| pid)
        .collect();
    for &leader in &leaders {
        // The whole tree first: a process killed before its children are listed leaves them
        // to another parent.
        let tree = descendants(leader);
        kill_group(leader);
        for pid in tree {
            // SAFETY: plain syscall on a descendant of a worker kbench started.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
    leaders.len()
}

fn kill_group(pid: u32) {
    // SAFETY: plain syscall on the group a worker kbench started leads.
    unsafe {
        libc::killpg(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// The processes below `pid` (children of any of its threads, and theirs).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(parent) = next.pop() {
        let children = children(parent);
        found.extend(&children);
        next.extend(children);
    }
    found
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// When `pid` started (clock ticks since boot: /proc/PID/stat's 22nd field); None when no
/// such process exists.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use super::*;

    /// Whether `pid` is gone (or a zombie, which nothing runs in), within `within`.
    fn ends(pid: u32, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|at| stat[at + 1..].split_whitespace().next());
            if matches!(state, None | Some("Z")) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn start_times_name_live_processes_only() {
        let me = std::process::id();
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
        assert_eq!(start_time(u32::MAX), None);
    }

    /// A process started by `spawn` from a thread that then ends lives on (the spawning thread
    /// forked it), and the tree below a group leader is found, a process that left the group
    /// included.
    #[test]
    fn a_worker_outlives_the_thread_that_asked_for_it_and_its_tree_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("left.pid");
        let script = format!(
            "setsid sleep 60 & echo $! > {}; exec sleep 60",
            pid_file.display()
        );
        let (mut child, registration) = std::thread::spawn(move || {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &script])
                .stdout(Stdio::null())
                .process_group(0);
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: die_with_parent makes plain syscalls only.
            unsafe {
                cmd.pre_exec(move || die_with_parent(parent));
            }
            spawn(cmd).unwrap()
        })
        .join()
        .unwrap();
        let started = Instant::now();
        let left: u32 = loop {
            let text = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if let Ok(pid) = text.trim().parse() {
                break pid;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no pid written"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            !ends(child.id(), Duration::from_millis(300)),
            "killed with its thread"
        );
        assert!(descendants(child.id()).contains(&left));
        // The test's own kill (end_all would close the registry for the other tests).
        kill_group(child.id());
        // SAFETY: plain syscall on the process this test's script started.
        unsafe {
            libc::kill(left as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait();
        drop(registration);
        assert!(!live().groups.contains_key(&child.id()));
    }
}
