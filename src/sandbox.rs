//! Confinement of every process that runs submission code (the candidate worker and the
//! compile pool): new PID, mount, network, IPC and UTS namespaces (a user namespace too when
//! kbench is not root), a private root of read-only bind mounts with a private `/tmp`, its
//! exchange folder (or a private tmpfs) as `/dev/shm`, a minimal `/dev` (plus the GPU's device
//! files), a read-only `/proc/sys`, a separate uid when kbench is root, no capabilities,
//! `no_new_privs`, and rlimits. Built from util-linux (`unshare`, `mount`, `pivot_root`,
//! `prlimit`, `setpriv`) and `sh`, which base images carry, so nothing is installed at run time.
//! The worker is PID 1 of its namespace: when it dies the kernel kills every process it left,
//! so nothing outlives an evaluation.
//!
//! The trusted reference worker runs in such a sandbox too (`beside`), as the same uid but in
//! the host's PID namespace, and an evaluation's two workers share one folder as their
//! `/dev/shm`: CUDA IPC needs both. The driver lets a process open another's memory only when
//! both run as the same user, and the importer reads the exporter's
//! `/dev/shm/cuda.shm.<uid>.<pid>` file (measured: `benchmarks/ipc_probe.sh`); the host PID keeps
//! the reference's file name apart from the candidate's (PID 1 of its namespace), and the
//! candidate's PID namespace keeps the reference out of its sight (no signals, no /proc).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::worker::Spawn;

/// A host folder bound into the sandbox (`host`), and where the confined process sees it.
pub type Bind<'a> = (&'a Path, &'a Path);

/// The uid and gid submission code runs as when kbench is root (`nobody`).
pub const SANDBOX_UID: u32 = 65534;
/// Most open files of a confined process.
const MAX_OPEN_FILES: u64 = 4096;
/// Most processes and threads of the sandbox uid (torch starts a thread per core).
const MAX_PROCESSES: u64 = 16384;
/// Largest file a confined process may write (outputs handed over as files, build objects).
const MAX_FILE_BYTES: u64 = 64 << 30;

/// `--sandbox`: confine when the host allows it, insist, or run submission code unconfined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Auto,
    Require,
    Off,
}

/// How submission code runs in this run: confined by `jail`, or not at all (`label` says why).
#[derive(Clone, Debug)]
pub struct Confinement {
    jail: Option<Jail>,
    /// What the record names as each evaluation's `sandbox`.
    pub label: String,
}

/// What a confined process sees, beside its own private and writable paths.
#[derive(Clone, Debug)]
struct Jail {
    /// Host paths bound read-only at the same place (system folders, Python, worker code, tasks).
    readonly: Vec<PathBuf>,
    /// kbench is root: submission code gets its own uid; else a user namespace maps kbench's.
    as_root: bool,
    /// The GPU's device files (`/dev/nvidia*`) are bound too.
    gpu: bool,
    /// An empty folder the private root is mounted on (in the process's own mount namespace).
    mountpoint: PathBuf,
}

/// System folders bound read-only (or recreated as the links they are).
const SYSTEM: [&str; 10] = [
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sys",
];
/// Device files every process may use.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

impl Confinement {
    /// Decide the run's confinement: with `Auto` and `Require`, try it once with `true` in
    /// place of the worker. `readonly` are the paths submission code must read (Python's prefixes
    /// are added here). `Auto` on a host that refuses says so on stderr; `Require` fails.
    pub fn probe(
        mode: Mode,
        python: &str,
        readonly: &[PathBuf],
        cache: &Path,
        gpu: bool,
    ) -> Result<Confinement, String> {
        if mode == Mode::Off {
            return Ok(Confinement::none("none (--sandbox off)".into()));
        }
        let mountpoint = cache.join("sandbox-root");
        let readonly: Vec<PathBuf> = readonly
            .iter()
            .cloned()
            .chain(python_prefixes(python))
            .collect();
        // SAFETY: plain syscall without arguments.
        let root = unsafe { libc::geteuid() } == 0;
        // As root: a separate uid; where the host refuses root that (a container without
        // CAP_SYS_ADMIN), a user namespace, which unprivileged processes may create.
        let tried = std::fs::create_dir_all(&mountpoint)
            .map_err(|e| format!("create {}: {e}", mountpoint.display()))
            .and_then(|()| {
                let mut why = String::new();
                for as_root in [true, false].into_iter().filter(|r| root || !r) {
                    let jail = Jail {
                        readonly: readonly.clone(),
                        as_root,
                        gpu,
                        mountpoint: mountpoint.clone(),
                    };
                    match jail.try_true() {
                        Ok(()) => return Ok(jail),
                        Err(e) => why = e,
                    }
                }
                Err(why)
            });
        match (tried, mode) {
            (Ok(jail), _) => Ok(Confinement {
                label: jail.label(),
                jail: Some(jail),
            }),
            (Err(why), Mode::Require) => Err(format!("confine submission code: {why}")),
            (Err(why), _) => {
                eprintln!(
                    "kbench: WARNING: NO SANDBOX: this host refused the namespaces ({why}); \
                     submission code runs with kbench's own rights and can reach the trusted side"
                );
                Ok(Confinement::none(format!("none (the host refused: {why})")))
            }
        }
    }

    /// Unconfined, with the reason recorded.
    fn none(label: String) -> Confinement {
        Confinement { jail: None, label }
    }

    /// The uid confined processes run as, where kbench gives them their own.
    pub fn uid(&self) -> Option<u32> {
        self.jail
            .as_ref()
            .filter(|j| j.as_root)
            .map(|_| SANDBOX_UID)
    }

    /// `spec` run inside the sandbox, with each of `writable` (a host folder, and where the
    /// process sees it) bound read-write, and `shm` (a host folder) as its `/dev/shm` where given
    /// (else a private one); unchanged when unconfined.
    pub fn wrap(&self, spec: &Spawn, writable: &[Bind<'_>], shm: Option<&Path>) -> Spawn {
        match &self.jail {
            Some(jail) => jail.wrap(spec, writable, shm, true),
            None => spec.clone(),
        }
    }

    /// A trusted worker run beside a confined one that shares `shm` as its /dev/shm: the same
    /// sandbox and uid, in the host's PID namespace, writing nothing else; unchanged when
    /// unconfined.
    pub fn beside(&self, spec: &Spawn, shm: &Path) -> Spawn {
        match &self.jail {
            Some(jail) => jail.wrap(spec, &[], Some(shm), false),
            None => spec.clone(),
        }
    }

    /// Whether submission code runs confined (else it sees and writes what kbench does).
    pub fn confines(&self) -> bool {
        self.jail.is_some()
    }

    /// Where a process started by `wrap` with `shm` sees that folder.
    pub fn seen(&self, shm: &Path) -> PathBuf {
        match &self.jail {
            Some(_) => PathBuf::from("/dev/shm"),
            None => shm.to_path_buf(),
        }
    }

    /// Hand `path` (a folder a confined process writes) and everything in it to the sandbox uid:
    /// a cached build may come from another run or machine, owned by whoever copied it. What is
    /// the sandbox's already is left as it is (a reused build is walked on every run). Walked
    /// through descriptors (`untrusted::chown_tree`): a link the sandbox planted is given
    /// itself, never what it points to.
    pub fn give(&self, path: &Path) -> std::io::Result<()> {
        match self.uid() {
            Some(uid) => crate::untrusted::chown_tree(path, uid, uid),
            None => Ok(()),
        }
    }

    /// Make `path` (a folder kbench made) a staging folder for a confined process: kbench's,
    /// sticky and open to all (`1777`), so that the process may add files beside what kbench
    /// staged there but not replace, rename or remove it.
    pub fn stage_folder(&self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777))
    }
}

/// The prefixes a Python needs: its venv (as given and canonical) and the base installation.
fn python_prefixes(python: &str) -> Vec<PathBuf> {
    let given = Path::new(python);
    let resolved = if given.components().count() > 1 {
        Some(given.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(python))
                .find(|c| c.is_file())
        })
    };
    let mut prefixes = Vec::new();
    if let Some(path) = resolved {
        let venv = path.parent().and_then(Path::parent).map(Path::to_path_buf);
        prefixes.extend(venv.clone());
        prefixes.extend(venv.and_then(|v| v.canonicalize().ok()));
        let base = path.canonicalize().ok();
        prefixes.extend(
            base.as_deref()
                .and_then(Path::parent)
                .and_then(Path::parent)
                .map(Path::to_path_buf),
        );
    }
    prefixes
}

/// A word for sh, in single quotes.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Jail {
    fn label(&self) -> String {
        let who = if self.as_root {
            format!("uid {SANDBOX_UID}")
        } else {
            "user namespace".into()
        };
        format!(
            "namespaces (pid, mount, net, ipc, uts), {who}, no capabilities, read-only root with private /tmp, rlimits (files, processes, file size{}); the reference worker beside it, as the same uid, shares its /dev/shm",
            if self.gpu { "" } else { ", address space" }
        )
    }

    /// Run `true` confined: whether this host allows the jail (its stderr when not).
    fn try_true(&self) -> Result<(), String> {
        let spec = Spawn {
            python: "true".into(),
            args: Vec::new(),
            env: Vec::new(),
            log: PathBuf::new(),
            cwd: std::env::temp_dir(),
        };
        let wrapped = self.wrap(&spec, &[], None, true);
        let out = Command::new(&wrapped.python)
            .args(&wrapped.args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run {}: {e}", wrapped.python))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// Script lines binding the system folders read-only (links recreated as links) and the
    /// device files: the basic ones, and on a GPU the driver's.
    fn system_and_devices(&self) -> String {
        let mut s = String::new();
        for dir in SYSTEM {
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(dir) {
                        s += &format!("l {} {dir}\n", quote(&target.display().to_string()));
                    }
                }
                Ok(m) if m.is_dir() => s += &format!("b {dir} {dir}\n"),
                _ => {}
            }
        }
        let mut devices: Vec<String> = DEVICES.iter().map(|d| d.to_string()).collect();
        if self.gpu {
            if let Ok(entries) = std::fs::read_dir("/dev") {
                devices.extend(
                    entries
                        .flatten()
                        .map(|e| e.path().display().to_string())
                        .filter(|p| p.starts_with("/dev/nvidia") && !Path::new(p).is_dir()),
                );
            }
        }
        for dev in devices.iter().filter(|d| Path::new(d).exists()) {
            s += &format!("d {}\n", quote(dev));
        }
        s
    }

    /// Script lines binding the read-only paths at their places and `writable` where they are
    /// seen, outer first where places lie under each other.
    fn binds(&self, writable: &[Bind<'_>]) -> String {
        let mut binds: Vec<(&Path, &Path, bool)> = self
            .readonly
            .iter()
            .map(|p| (p.as_path(), p.as_path(), false))
            .chain(writable.iter().map(|&(host, seen)| (host, seen, true)))
            .collect();
        binds.sort_by_key(|(_, seen, _)| seen.as_os_str().len());
        binds.dedup();
        let mut s = String::new();
        for (host, seen, rw) in binds {
            let real = host.canonicalize().unwrap_or_else(|_| host.to_path_buf());
            let f = if rw { "w" } else { "b" };
            s += &format!(
                "{f} {} {}\n",
                quote(&real.display().to_string()),
                quote(&seen.display().to_string())
            );
        }
        s
    }

    /// The shell script that builds the private root and drops privileges, then runs "$@".
    fn script(&self, writable: &[Bind<'_>], shm: Option<&Path>, own_pids: bool) -> String {
        let mut s = String::from(
            "set -e\n\
             b() { mkdir -p \"$R$2\"; mount --rbind \"$1\" \"$R$2\"; \
             o=$(findmnt -no VFS-OPTIONS \"$R$2\" | sed 's/^rw/ro/'); \
             mount -o \"remount,bind,$o,nosuid,nodev\" \"$R$2\"; }\n\
             w() { mkdir -p \"$R$2\"; mount --rbind \"$1\" \"$R$2\"; }\n\
             d() { touch \"$R$1\"; mount --bind \"$1\" \"$R$1\"; }\n\
             l() { mkdir -p \"$(dirname \"$R$2\")\"; ln -s \"$1\" \"$R$2\"; }\n",
        );
        s += &format!("R={}\n", quote(&self.mountpoint.display().to_string()));
        s += "mount -t tmpfs -o mode=0755,size=16m kbench-root \"$R\"\n";
        s += "mkdir -p \"$R/tmp\" \"$R/dev/shm\" \"$R/proc\"\n";
        s += &self.system_and_devices();
        s += "mount -t tmpfs -o mode=1777,nosuid,nodev kbench-tmp \"$R/tmp\"\n";
        match shm {
            Some(dir) => s += &format!("w {} /dev/shm\n", quote(&dir.display().to_string())),
            None => s += "mount -t tmpfs -o mode=1777,nosuid,nodev kbench-shm \"$R/dev/shm\"\n",
        }
        // A fresh /proc shows the PID namespace it is mounted in; without one of its own (and in
        // a user namespace, which may not mount the host's) the host's is bound instead.
        if own_pids {
            s += "mount -t proc -o nosuid,nodev,noexec proc \"$R/proc\"\n";
        } else {
            s += "mount --rbind /proc \"$R/proc\"\n";
        }
        s += "mount --bind \"$R/proc/sys\" \"$R/proc/sys\"; mount -o remount,bind,ro \"$R/proc/sys\"\n";
        s += &self.binds(writable);
        s += "cd \"$R\"\npivot_root . .\numount -l .\ncd /tmp\n";
        let mut limits = format!(
            "--nofile={} --nproc={MAX_PROCESSES} --fsize={MAX_FILE_BYTES}",
            open_files()
        );
        if !self.gpu {
            // CUDA reserves far more address space than memory, so a GPU worker has no such limit.
            limits += &format!(" --as={}", physical_memory());
        }
        let who = if self.as_root {
            format!("--reuid={SANDBOX_UID} --regid={SANDBOX_UID} --clear-groups ")
        } else {
            String::new()
        };
        s += &format!(
            "exec prlimit {limits} -- setpriv {who}--inh-caps=-all --bounding-set=-all --no-new-privs -- \"$@\"\n"
        );
        s
    }

    /// `own_pids`: a PID namespace of its own, where the process is PID 1 and takes everything
    /// it started with it when it ends.
    fn wrap(
        &self,
        spec: &Spawn,
        writable: &[Bind<'_>],
        shm: Option<&Path>,
        own_pids: bool,
    ) -> Spawn {
        let pids = ["--pid", "--fork", "--kill-child"];
        let mut args: Vec<String> = pids
            .iter()
            .filter(|_| own_pids)
            .chain(&["--mount", "--net", "--ipc", "--uts"])
            .map(|s| s.to_string())
            .collect();
        if !self.as_root {
            args.push("--user".into());
            args.push("--map-root-user".into());
        }
        args.extend(["--propagation".into(), "private".into()]);
        args.extend([
            "sh".into(),
            "-c".into(),
            self.script(writable, shm, own_pids),
        ]);
        args.push("kbench-sandbox".into());
        args.push(spec.python.clone());
        args.extend(spec.args.iter().cloned());
        let mut env = spec.env.clone();
        env.push(("HOME".into(), "/tmp".into()));
        env.push(("TMPDIR".into(), "/tmp".into()));
        // The venv's tools (ninja) beside its python, as activating it would, before the PATH
        // the command was given (a tool's that runs the worker: the venv's beside its python).
        if let Some(bin) = Path::new(&spec.python)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let given = spec.env.iter().rev().find(|(k, _)| k == "PATH");
            let path = given
                .map(|(_, v)| std::ffi::OsString::from(v))
                .or_else(|| std::env::var_os("PATH"))
                .unwrap_or_default();
            if let Ok(joined) = std::env::join_paths(
                std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
            ) {
                env.push(("PATH".into(), joined.to_string_lossy().into_owned()));
            }
        }
        Spawn {
            python: "unshare".into(),
            args,
            env,
            log: spec.log.clone(),
            cwd: spec.cwd.clone(),
        }
    }
}

/// The open-file limit: `MAX_OPEN_FILES`, or less where the hard limit is lower.
fn open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        MAX_OPEN_FILES.min(limit.rlim_max)
    } else {
        MAX_OPEN_FILES
    }
}

/// The machine's memory in bytes: a confined CPU process's address-space limit.
fn physical_memory() -> u64 {
    // SAFETY: sysconf reads system constants.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && size > 0 {
        pages as u64 * size as u64
    } else {
        64 << 30
    }
}

/// Make this process not dumpable: no core dumps, and /proc/<pid>/mem, fd and environ of kbench
/// are root's alone even for processes of the same uid.
pub fn protect_self() {
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c script`, as a worker is spawned.
    fn sh(script: String) -> Spawn {
        Spawn {
            python: "sh".into(),
            args: vec!["-c".into(), script],
            env: Vec::new(),
            log: PathBuf::new(),
            cwd: std::env::temp_dir(),
        }
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn off_runs_unconfined_and_says_so() {
        let c = Confinement::probe(Mode::Off, "python3", &[], Path::new("/nonexistent"), false)
            .unwrap();
        assert!(c.jail.is_none());
        assert!(c.label.starts_with("none"));
        let spec = Spawn::role("py", Path::new("/w"), "candidate", "l".into(), "/".into());
        assert_eq!(c.wrap(&spec, &[], None).python, "py");
        assert_eq!(c.seen(Path::new("/x/exchange")), Path::new("/x/exchange"));
    }

    /// On a host that allows the namespaces (CI does: the end-to-end corpus needs them), a
    /// confined process sees no other process, cannot write what it only reads, can write its
    /// own folder and its private /tmp, has no network but loopback, and runs as uid 65534
    /// when kbench is root.
    #[test]
    fn a_confined_process_sees_and_writes_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (ro, mnt) = (dir.path().join("ro"), dir.path().join("mnt"));
        for d in [&ro, &mnt] {
            std::fs::create_dir(d).unwrap();
        }
        // SAFETY: plain syscall without arguments.
        let root = unsafe { libc::geteuid() } == 0;
        for as_root in [true, false].into_iter().filter(|r| root || !r) {
            let jail = Jail {
                readonly: vec![ro.clone()],
                as_root,
                gpu: false,
                mountpoint: mnt.clone(),
            };
            let rw = dir.path().join(format!("rw-{as_root}"));
            let shm = dir.path().join(format!("shm-{as_root}"));
            let c = Confinement {
                jail: Some(jail.clone()),
                label: String::new(),
            };
            for d in [&rw, &shm] {
                std::fs::create_dir(d).unwrap();
                c.give(d).unwrap();
            }
            let inner = format!(
                "ls /proc | grep -c '^[0-9]'; touch {ro}/x 2>/dev/null && echo ro-written; \
                 touch {rw}/y && echo rw-written; touch /tmp/z && echo tmp-written; \
                 touch /dev/shm/s && echo shm-written; \
                 tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; id -u",
                ro = ro.display(),
                rw = rw.display()
            );
            let spec = sh(inner);
            let wrapped = jail.wrap(&spec, &[(&rw, &rw)], Some(&shm), true);
            let out = Command::new(&wrapped.python)
                .args(&wrapped.args)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let processes: u32 = lines[0].parse().unwrap();
            assert!(processes <= 3, "sees {processes} processes: {text}");
            assert!(!text.contains("ro-written"), "{text}");
            assert!(
                text.contains("rw-written") && text.contains("tmp-written"),
                "{text}"
            );
            // The shared folder is its /dev/shm, as the other worker of an evaluation sees it.
            assert!(text.contains("shm-written"), "{text}");
            assert!(shm.join("s").exists(), "{text}");
            assert_eq!(lines[lines.len() - 2].trim(), "lo", "{text}");
            let uid = if as_root { "65534" } else { "0" };
            assert_eq!(lines[lines.len() - 1], uid, "{text}");
        }
    }

    /// A worker started before it knows its submission (the candidate) writes only the folder
    /// bound for it: the build folder moved into that folder after it started is writable there,
    /// a sibling build folder and the builds root are out of its sight.
    #[test]
    fn a_confined_process_cannot_write_a_sibling_build_folder() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (builds, workspace, mnt) = (
            dir.path().join("builds"),
            dir.path().join("workspace"),
            dir.path().join("mnt"),
        );
        for d in [&builds.join("own"), &builds.join("other"), &workspace, &mnt] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(builds.join("other/build.json"), "{}").unwrap();
        // SAFETY: plain syscall without arguments.
        let root = unsafe { libc::geteuid() } == 0;
        let jail = Jail {
            readonly: Vec::new(),
            as_root: root,
            gpu: false,
            mountpoint: mnt,
        };
        if jail.try_true().is_err() {
            return; // this host cannot confine: nothing to check
        }
        let c = Confinement {
            jail: Some(jail),
            label: String::new(),
        };
        for d in [&builds, &workspace] {
            c.give(d).unwrap();
        }
        let inner = format!(
            "read go; touch /kbench/build/mine && echo own-written; \
             echo poisoned > {b}/other/build.json 2>/dev/null && echo sibling-written; \
             ls {b} >/dev/null 2>&1 && echo root-seen; \
             find / \\( -path /proc -o -path /sys -o -path /usr \\) -prune -o -name build.json \\
             -print 2>/dev/null | grep -q . && echo sibling-found; echo done",
            b = builds.display()
        );
        let spec = sh(inner);
        let wrapped = c.wrap(&spec, &[(&workspace, Path::new("/kbench"))], None);
        let mut child = Command::new(&wrapped.python)
            .args(&wrapped.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Lent once the process runs, as an evaluation lends its submission's build.
        std::fs::rename(builds.join("own"), workspace.join("build")).unwrap();
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("own-written"), "{text}");
        assert!(workspace.join("build/mine").exists(), "{text}");
        for escaped in ["sibling-written", "root-seen", "sibling-found"] {
            assert!(!text.contains(escaped), "{text}");
        }
        assert!(text.contains("done"), "{text}");
        let other = std::fs::read_to_string(builds.join("other/build.json")).unwrap();
        assert_eq!(other, "{}");
    }

    /// The trusted worker beside a confined one runs as the same uid, sees their shared folder
    /// as /dev/shm, and keeps the host's PIDs (more processes than a namespace of its own).
    #[test]
    fn beside_shares_the_uid_and_dev_shm_in_the_hosts_pids() {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        // SAFETY: plain syscall without arguments.
        let root = unsafe { libc::geteuid() } == 0;
        for as_root in [true, false].into_iter().filter(|r| root || !r) {
            let c = Confinement {
                jail: Some(Jail {
                    readonly: Vec::new(),
                    as_root,
                    gpu: false,
                    mountpoint: mnt.clone(),
                }),
                label: String::new(),
            };
            let shm = dir.path().join(format!("shm-{as_root}"));
            std::fs::create_dir(&shm).unwrap();
            c.give(&shm).unwrap();
            std::fs::write(shm.join("from-candidate"), b"").unwrap();
            let spec = sh("id -u; ls /dev/shm; ls /proc | grep -c '^[0-9]'".into());
            let wrapped = c.beside(&spec, &shm);
            let out = Command::new(&wrapped.python)
                .args(&wrapped.args)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lines: Vec<&str> = text.lines().collect();
            let uid = if as_root { "65534" } else { "0" };
            assert_eq!(lines[0], uid, "{text}");
            assert_eq!(lines[1], "from-candidate", "{text}");
            let processes: u32 = lines[2].parse().unwrap();
            assert!(processes > 3, "sees only {processes} processes: {text}");
            assert_eq!(c.seen(&shm), Path::new("/dev/shm"));
        }
    }

    /// A folder handed over (a cached build copied from elsewhere) is the sandbox uid's all the
    /// way down. Only root can give files away, so elsewhere there is nothing to check.
    #[test]
    fn give_hands_over_the_whole_tree() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: plain syscall without arguments.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("torch_extensions/ext");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("ext.so"), b"").unwrap();
        let c = Confinement {
            jail: Some(Jail {
                readonly: Vec::new(),
                as_root: true,
                gpu: false,
                mountpoint: dir.path().join("mnt"),
            }),
            label: String::new(),
        };
        c.give(dir.path()).unwrap();
        for p in [dir.path(), &deep, &deep.join("ext.so")] {
            assert_eq!(
                std::fs::metadata(p).unwrap().uid(),
                SANDBOX_UID,
                "{}",
                p.display()
            );
        }
    }

    #[test]
    fn the_script_binds_writable_paths_and_drops_privileges() {
        let jail = Jail {
            readonly: vec!["/opt/py".into()],
            as_root: true,
            gpu: false,
            mountpoint: "/c/sandbox-root".into(),
        };
        let script = jail.script(
            &[(Path::new("/x/builds/ab"), Path::new("/kbench/build"))],
            None,
            true,
        );
        assert!(script.contains("b '/opt/py' '/opt/py'"), "{script}");
        assert!(
            script.contains("w '/x/builds/ab' '/kbench/build'"),
            "{script}"
        );
        assert!(script.contains("kbench-shm"), "{script}");
        let shared = jail.script(&[], Some(Path::new("/x/exchange")), false);
        assert!(shared.contains("w '/x/exchange' /dev/shm"), "{shared}");
        assert!(!shared.contains("kbench-shm"), "{shared}");
        assert!(shared.contains("mount --rbind /proc"), "{shared}");
        assert!(script.contains("--reuid=65534"), "{script}");
        assert!(script.contains("--as="), "{script}");
        assert!(script.contains("pivot_root . ."), "{script}");
    }
}
