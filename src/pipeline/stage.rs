//! What an evaluation puts where, and how things cross between its workers: the exchange folder
//! (the only host folder the candidate may write), the submission's copy staged there, the
//! workers' logs, and the `Handover` of the candidate's outputs to the reference worker (CUDA
//! IPC, or files). It moves bytes and replies; it judges nothing (a reply's meaning is the
//! stages').

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::compat::Compat;
use crate::config::Device;
use crate::record::{Check, Outcome};
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::timing::Failed;
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::{CheckOutputs, Command};
use crate::worker::{CheckName, ErrorKind, Link, Reply};

use super::replies::{Checked, Shipped};

/// The folder an evaluation's two workers share, the only host folder the candidate may write:
/// its outputs handed over as files, and its copy of the submission.
pub(super) struct Exchange {
    pub dir: tempfile::TempDir,
    /// Where the workers see it: their `/dev/shm` when confined (`Confinement::seen`).
    seen: PathBuf,
}

impl Exchange {
    /// The folder, where the workers see it.
    pub(super) fn seen(&self) -> PathBuf {
        self.seen.clone()
    }

    /// Remove everything in the folder (without following links), so that nothing an earlier
    /// candidate left there reaches the next one or the reference.
    pub(super) fn clear(&self) -> std::io::Result<()> {
        for entry in std::fs::read_dir(self.dir.path())? {
            let path = entry?.path();
            if std::fs::symlink_metadata(&path)?.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// The file `name` in the folder: where kbench finds it, and where the workers do.
    fn file(&self, name: &str) -> (PathBuf, PathBuf) {
        (self.dir.path().join(name), self.seen.join(name))
    }

    /// The exchange as a folder to stage a submission in (a compile worker's, or an unconfined
    /// candidate's).
    pub(super) fn stage(&self) -> Stage {
        Stage {
            host: self.dir.path().to_path_buf(),
            seen: self.seen.clone(),
        }
    }
}

/// A folder a submission's copy is staged in for a worker: where kbench writes it, and where the
/// worker sees it.
pub(super) struct Stage {
    pub host: PathBuf,
    pub seen: PathBuf,
}

/// A folder on tmpfs that confined workers may write (their uid owns it), removed when
/// dropped.
pub(super) fn exchange(confinement: &Confinement) -> Result<Exchange, String> {
    new_exchange(confinement, |dir| confinement.give(dir))
}

/// An exchange that is kbench's and sticky (`Confinement::stage_folder`): a compile worker's,
/// which writes there (its /dev/shm) but cannot replace the copy staged in it.
pub(super) fn stage_exchange(confinement: &Confinement) -> Result<Exchange, String> {
    new_exchange(confinement, |dir| confinement.stage_folder(dir))
}

fn new_exchange(
    confinement: &Confinement,
    prepare: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<Exchange, String> {
    let dir = tempfile::Builder::new()
        .prefix("kbench-")
        .tempdir_in(exchange_root())
        .map_err(|e| format!("create an exchange folder: {e}"))?;
    prepare(dir.path())
        .map_err(|e| format!("hand {} to the sandbox: {e}", dir.path().display()))?;
    Ok(Exchange {
        seen: confinement.seen(dir.path()),
        dir,
    })
}

/// Where the submission's log of `role` goes in the run's folder `out`: the path, and the path
/// relative to `out` that the record names.
pub(super) fn log_path(out: &Path, submission: &Submission, role: &str) -> (PathBuf, String) {
    let rel = format!("logs/{}.{role}.log", slug(submission));
    (out.join(&rel), rel)
}

/// A pair's logs (reference, candidate) named for the submission it evaluates, updated in
/// `logs`; the names the record keeps. A provisional log is renamed (the worker keeps writing
/// to it); the log of a reference that served an earlier candidate (`shared`) gets the new
/// name beside its old one (a hard link: one log of all the candidates it served).
pub(super) fn claim_logs(
    out: &Path,
    sub: &Submission,
    logs: &mut [PathBuf; 2],
    shared: bool,
) -> Vec<String> {
    let (ref_log, ref_rel) = log_path(out, sub, "reference");
    let (cand_log, cand_rel) = log_path(out, sub, "candidate");
    let claimed = if shared {
        // A log of that name from an earlier run (`--resume`) gives way, as a rename's would.
        let _ = std::fs::remove_file(&ref_log);
        std::fs::hard_link(&logs[0], &ref_log)
    } else {
        std::fs::rename(&logs[0], &ref_log)
    };
    if claimed.is_ok() {
        logs[0] = ref_log;
    }
    if std::fs::rename(&logs[1], &cand_log).is_ok() {
        logs[1] = cand_log;
    }
    vec![ref_rel, cand_rel]
}

/// A file-name-safe form of a submission's path, for its logs.
fn slug(submission: &Submission) -> String {
    let name: String = submission
        .file
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{}-{}",
        name.trim_end_matches(".py"),
        &submission.sha256[..8]
    )
}

/// Outputs travel through tmpfs where there is one: no disk writes for multi-GB tensors.
fn exchange_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A copy of the submission in `stage` (a folder the confined worker can read, whatever the
/// permissions of the submission's own folders), under its own file name, with `--compat`'s
/// rewrites (`compat`) applied: where the worker sees it, and the rewrites. The copy is a new
/// file of kbench's, read-only (mode 0444), made without following a link planted in its place.
pub(super) fn stage_submission(
    submission: &Submission,
    stage: &Stage,
    compat: Option<&Compat>,
) -> Result<(PathBuf, Vec<String>), String> {
    let name = submission.path.file_name().map_or_else(
        || "submission.py".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (staged, seen) = (stage.host.join(&name), stage.seen.join(&name));
    let copy = || -> std::io::Result<Vec<String>> {
        let source = std::fs::read_to_string(&submission.path)?;
        let (text, rewrites) = match compat {
            Some(compat) => compat.rewrite(&source),
            None => (source, Vec::new()),
        };
        // What an earlier stage left under the name goes first: unlinking follows no link.
        match std::fs::remove_file(&staged) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&staged)?;
        file.write_all(text.as_bytes())?;
        Ok(rewrites)
    };
    let rewrites = copy().map_err(|e| {
        format!(
            "copy {} to {}: {e}",
            submission.path.display(),
            staged.display()
        )
    })?;
    Ok((seen, rewrites))
}

/// A candidate request's outcome, flattened: a body, or what the candidate did instead.
pub(super) fn ask<C: Command>(
    worker: &mut impl Link,
    body: C,
    deadline: Duration,
) -> Result<C::Reply, Failed> {
    match worker.request(body, deadline) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err(e)) => Err(Cause::Raised(e)),
        Err(f) => Err(Cause::Silent(f)),
    }
}

/// How outputs cross at first: CUDA IPC on the GPU, files on the CPU.
pub(super) fn first_transport(device: Device) -> &'static str {
    match device {
        Device::Cuda => "ipc",
        Device::Cpu => "file",
    }
}

/// The two workers of an evaluation and how outputs travel between them.
pub(super) struct Handover<'h, W> {
    pub reference: &'h mut W,
    pub candidate: &'h mut W,
    /// "ipc" (CUDA IPC) or "file"; IPC that fails once falls back to files for the evaluation.
    pub transport: &'h mut &'static str,
    pub exchange: &'h Exchange,
    /// Seconds the candidate's requests and the reference's checks of them took so far.
    pub spent: TrialTimes,
}

/// The correctness trials' time by worker (`Phases::trials_candidate_s`, `trials_reference_s`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TrialTimes {
    pub candidate_s: f64,
    pub reference_s: f64,
}

impl<W: Link> Handover<'_, W> {
    /// Ask the candidate for outputs (the request `request` makes from the file name the
    /// candidate sees and the transport), then have the reference check them with the request
    /// `check` makes from the candidate's reply (None: nothing to check; its file and IPC
    /// handles are set here). Returns both replies.
    pub(super) fn exchange<C: Command<Reply = Shipped>>(
        &mut self,
        request: impl Fn(PathBuf, String) -> C,
        mut check: impl FnMut(&Shipped) -> Option<CheckOutputs>,
        deadline: Duration,
        file: &str,
    ) -> Result<(Shipped, Option<Checked>), Failed> {
        let (out, seen) = self.exchange.file(file);
        loop {
            let asked = request(seen.clone(), (*self.transport).into());
            let started = Instant::now();
            let ran = ask(self.candidate, asked, deadline);
            self.spent.candidate_s += started.elapsed().as_secs_f64();
            let ran = ran?;
            let Some(mut body) = check(&ran) else {
                return Ok((ran, None));
            };
            body.candidate_out = seen.clone();
            body.ipc = ran.ipc.clone();
            let started = Instant::now();
            let checked = self.reference.request(body, deadline);
            self.spent.reference_s += started.elapsed().as_secs_f64();
            let result = match checked {
                Ok(Reply::Ok(v)) => Ok((ran, Some(v))),
                Ok(Reply::Err(e)) if e.kind == ErrorKind::Transfer && *self.transport == "ipc" => {
                    *self.transport = "file";
                    continue;
                }
                Ok(Reply::Err(e)) if e.kind == ErrorKind::Output => Err(Cause::Wrong(e.message)),
                Ok(Reply::Err(e)) => Err(Cause::ReferenceError(ReferenceStep::Check, e)),
                Err(f) => Err(Cause::ReferenceDied(f)),
            };
            let _ = std::fs::remove_file(&out);
            return result;
        }
    }
}

/// `harness.transfer`: how outputs crossed from the (confined) candidate to the reference
/// worker; files on a GPU mean CUDA IPC failed.
pub(super) fn transfer_check(device: Device, transport: &str) -> Check {
    Check {
        name: CheckName::HarnessTransfer,
        outcome: if device == Device::Cuda && transport == "file" {
            Outcome::Warn
        } else {
            Outcome::Pass
        },
        evidence: match transport {
            "ipc" => "CUDA IPC".into(),
            _ if device == Device::Cuda => "a tensors-only file (CUDA IPC failed)".into(),
            _ => "a tensors-only file".into(),
        },
        seconds: 0.0,
        runs: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clearing_the_exchange_removes_everything_but_follows_no_link() {
        let outside = tempfile::tempdir().unwrap();
        let kept = outside.path().join("kept.pt");
        std::fs::write(&kept, b"x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let exchange = Exchange {
            seen: dir.path().to_path_buf(),
            dir,
        };
        let root = exchange.dir.path();
        std::fs::write(root.join("trial0.pt"), b"x").unwrap();
        std::fs::create_dir_all(root.join("kept/deep")).unwrap();
        std::os::unix::fs::symlink(&kept, root.join("link.pt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("folder")).unwrap();
        exchange.clear().unwrap();
        assert_eq!(std::fs::read_dir(root).unwrap().count(), 0);
        assert!(kept.exists());
    }
}
