//! A worker's processes as the host sees them: the tree under the process kbench started (the
//! sandbox's `unshare`, and under it the worker and whatever it forked, detached or not: an
//! orphan of a PID namespace goes to its init, the worker), stopped and continued as one,
//! counted with what each spent and holds, and the end of its PID namespace awaited. Read from
//! `/proc`; it decides nothing.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// How long a process that was sent SIGSTOP may take to stop before the next walk.
const STOP_WAIT: Duration = Duration::from_millis(200);
/// Most walks of a tree that keeps growing while it is stopped (a process forked between a walk
/// and its stop): past them, what is left runs.
const STOP_WALKS: usize = 32;

/// The processes whose parent is `pid` (any of its threads).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `root` and every process under it, parents first.
pub fn pids(root: u32) -> Vec<u32> {
    let mut all = vec![root];
    let mut at = 0;
    while at < all.len() {
        let next = children(all[at]);
        all.extend(
            next.into_iter()
                .filter(|p| !all.contains(p))
                .collect::<Vec<_>>(),
        );
        at += 1;
    }
    all
}

/// A process's `stat` line after its name: state, parent, ... (fields 3 on), and its name.
fn stat(pid: u32) -> Option<(String, Vec<String>)> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = line.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    Some((name, rest.split_whitespace().map(str::to_string).collect()))
}

/// Whether `pid` is stopped, dead or gone.
fn halted(pid: u32) -> bool {
    stat(pid)
        .is_none_or(|(_, f)| matches!(f.first().map(String::as_str), Some("T" | "t" | "Z" | "X")))
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: plain syscall; a pid gone since is ESRCH, ignored.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Stop every process of the tree under `root` but those in `spared` (SIGSTOP, which no process
/// can catch), walking it again until a walk finds none that was not stopped, and waiting until
/// each has stopped; a stopped process forks nothing. Returns the processes stopped, for
/// `resume`.
pub fn stop(root: u32, spared: &[u32]) -> Vec<u32> {
    let mut seen: BTreeSet<u32> = spared.iter().copied().collect();
    let mut stopped = Vec::new();
    for _ in 0..STOP_WALKS {
        let new: Vec<u32> = pids(root)
            .into_iter()
            .filter(|p| !seen.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        new.iter().for_each(|&p| signal(p, libc::SIGSTOP));
        let until = Instant::now() + STOP_WAIT;
        while Instant::now() < until && !new.iter().all(|&p| halted(p)) {
            std::thread::sleep(Duration::from_micros(200));
        }
        seen.extend(&new);
        stopped.extend(new);
    }
    stopped
}

/// Continue the processes `stop` stopped.
pub fn resume(stopped: &[u32]) {
    stopped.iter().for_each(|&p| signal(p, libc::SIGCONT));
}

/// A process of a worker's tree beside the worker's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Beside {
    pub pid: u32,
    pub name: String,
    /// CPU seconds it has spent, all its threads, since it started.
    pub cpu_s: f64,
    /// It holds the GPU's device files open (a CUDA context of its own, or one inherited).
    pub gpu: bool,
}

/// The processes of the tree under `root` other than `own` (the launchers and the worker).
pub fn census(root: u32, own: &[u32]) -> Vec<Beside> {
    pids(root)
        .into_iter()
        .filter(|p| !own.contains(p))
        .filter_map(|pid| {
            let (name, _) = stat(pid)?;
            Some(Beside {
                pid,
                name,
                cpu_s: cpu_s(pid),
                gpu: holds_gpu(pid),
            })
        })
        .collect()
}

/// CPU seconds `pid` has spent, all its threads: the scheduler's nanoseconds on a CPU
/// (`schedstat`), else the clock ticks of `stat` (utime and stime, a hundredth of a second).
fn cpu_s(pid: u32) -> f64 {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| tasks.flatten().map(|t| t.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    let ns: Option<u64> = threads
        .iter()
        .map(|t| {
            std::fs::read_to_string(t.join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    if let Some(ns) = ns.filter(|_| !threads.is_empty()) {
        return ns as f64 / 1e9;
    }
    // SAFETY: sysconf reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // utime and stime: fields 14 and 15 of `stat`, here 11 and 12 (from field 3 on).
    stat(pid).map_or(0.0, |(_, f)| {
        let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (field(11) + field(12)) / ticks
    })
}

/// Whether `pid` has a GPU device file (`/dev/nvidia*`) open.
fn holds_gpu(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("/dev/nvidia"))
        })
    })
}

/// The init of the PID namespace of the worker started as `root` (the sandbox's `unshare`), as
/// a pidfd: its only child, when that lives in another PID namespace than kbench. The init
/// ends only once every other process of its namespace has (the kernel reaps them first), so
/// its end means the whole namespace's.
pub fn namespace_init(root: u32) -> Option<OwnedFd> {
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let mut kids = children(root).into_iter();
    let (Some(init), None) = (kids.next(), kids.next()) else {
        return None;
    };
    if ns(&init.to_string())? == ns("self")? {
        return None;
    }
    let pid = rustix::process::Pid::from_raw(init as i32)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Whether the process of the pidfd `init` has ended within `deadline`.
pub fn ended(init: &OwnedFd, deadline: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let until = Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(init, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => return true,
            Ok(_) => return false,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => continue,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    use super::*;

    /// Host pids of the processes that run `sleep SECONDS`.
    fn sleeping(seconds: &str) -> Vec<u32> {
        let want = format!("sleep\0{seconds}\0");
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
            })
            .collect()
    }

    /// Wait up to 10 s for `ok`.
    fn until(ok: impl Fn() -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// A test's process group, killed (with what it left, by `also`) however the test ends.
    struct Group(Child, Vec<u32>);

    impl Drop for Group {
        fn drop(&mut self) {
            self.1.iter().for_each(|&p| signal(p, libc::SIGKILL));
            // SAFETY: plain syscall on the group this test started.
            unsafe {
                libc::killpg(self.0.id() as libc::pid_t, libc::SIGKILL);
            }
            let _ = self.0.wait();
        }
    }

    fn group(program: &str, args: &[&str]) -> std::io::Result<Group> {
        let child = Command::new(program).args(args).process_group(0).spawn()?;
        Ok(Group(child, Vec::new()))
    }

    /// A busy process the worker detached (`setsid`) is in its tree, stops with it (its CPU time
    /// stands still while stopped) and runs again when resumed.
    #[test]
    fn a_detached_busy_process_stops_and_continues_with_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("busy.pid");
        let script = format!(
            "setsid sh -c 'echo $$ > {}; while :; do :; done' & sleep 1000",
            pid_file.display()
        );
        let mut g = group("sh", &["-c", &script]).unwrap();
        let root = g.0.id();
        assert!(until(
            || std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        ));
        let busy: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        g.1.push(busy);
        assert!(pids(root).contains(&busy));
        let cpu = || {
            census(root, &[])
                .into_iter()
                .find(|b| b.pid == busy)
                .unwrap()
                .cpu_s
        };
        let stopped = stop(root, &[root]);
        assert!(
            stopped.contains(&busy) && !stopped.contains(&root),
            "{stopped:?}"
        );
        assert!(halted(busy));
        let frozen = cpu();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cpu(), frozen, "a stopped process ran");
        resume(&stopped);
        assert!(until(|| !halted(busy)), "not continued");
        assert!(until(|| cpu() > frozen), "not running again");
    }

    /// The init of a PID namespace ends only after every process of it: once `ended` says so, a
    /// process detached inside the namespace is gone too. Needs a host that allows PID namespaces
    /// (as root, or with user namespaces); elsewhere there is nothing to check.
    #[test]
    fn a_namespace_init_ends_after_every_process_of_its_namespace() {
        let seconds = format!("9{}", rand::random::<u32>() % 100_000_000);
        let script =
            format!("setsid sh -c 'trap \"\" TERM HUP; exec sleep {seconds}' & sleep 1000");
        let mut args = vec!["--pid", "--fork", "--kill-child"];
        if rustix::process::geteuid().as_raw() != 0 {
            args.extend(["--user", "--map-root-user"]);
        }
        args.extend(["sh", "-c", &script]);
        let Ok(mut g) = group("unshare", &args) else {
            return;
        };
        if !until(|| sleeping(&seconds).len() == 1) {
            return; // this host refuses PID namespaces
        }
        g.1 = sleeping(&seconds);
        let init = namespace_init(g.0.id()).expect("the namespace's init");
        assert!(!ended(&init, Duration::from_millis(50)));
        // SAFETY: plain syscall on the unshare process this test started.
        unsafe {
            libc::kill(g.0.id() as libc::pid_t, libc::SIGKILL);
        }
        assert!(ended(&init, Duration::from_secs(30)));
        assert!(
            sleeping(&seconds).is_empty(),
            "a detached process outlived the namespace"
        );
    }
}
