//! Where confined workers write: the compile worker its submission's build folder, bound at
//! `BUILD_SEEN`; a candidate worker its workspace, an empty folder bound at `WORKSPACE_SEEN`, into
//! which the evaluation lends the submission's build folder once it knows the submission.
//!
//! Candidate workers start before kbench knows which submission they will run (Python, torch
//! and the CUDA context take seconds), and a sandbox's mounts are made when it starts. Binding
//! the whole builds folder let one submission rewrite another's cached build, and starting the
//! candidate once its submission is known would put its start-up back on every evaluation's
//! path. So each pre-started candidate gets a workspace of its own, and the evaluation moves the
//! build folder into it (a rename within the builds folder: no copy) and back once the workers
//! have ended. The candidate sees it at `BUILD_SEEN`, where the compile worker built it, so
//! torch's and ninja's paths match and the pool's build is found again.
//!
//! The workspace itself is kbench's (root's, readable by all): the candidate writes inside the
//! build folder lent to it, and may add files in the sticky staging folder `src` beside the
//! copy of its submission that kbench stages there (read-only, kbench's), but can replace,
//! rename or link nothing that kbench later moves or reads: the build folder goes back home by
//! a rename of a name only kbench can change, and only once every process of the candidate has
//! ended (`Lent::settle`).
//!
//! Workers run by a CUDA tool (`--sanitize`'s, side by side on one submission, and `--profile
//! ncu`'s) cannot share the one build folder a move lends: each gets a copy instead
//! (`lend_copy`), its regular files with their times so that it is found built, and the build
//! folder stays where it lies.
//!
//! Unconfined, the workers see the build folder where it lies and nothing is lent.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::sandbox::{Bind, Confinement};

use super::stage::Stage;

/// Where a confined candidate sees its workspace.
const WORKSPACE_SEEN: &str = "/kbench";
/// Where confined workers see the submission's build folder.
const BUILD_SEEN: &str = "/kbench/build";
/// Where a confined candidate sees the folder its submission is staged in.
const SOURCE_SEEN: &str = "/kbench/src";

/// A pre-started candidate's workspace: the one folder of the cache it may write, removed (with
/// whatever it left there) when dropped.
pub(super) struct Workspace(tempfile::TempDir);

/// A submission's build folder lent to a workspace for one evaluation, moved back once settled;
/// or a copy of it (`home` None), which goes with the workspace.
pub(super) struct Lent {
    workspace: Workspace,
    home: Option<PathBuf>,
}

impl Workspace {
    /// The candidate's one writable bind: its workspace, where it sees it.
    pub(super) fn bind(&self) -> Bind<'_> {
        (self.0.path(), Path::new(WORKSPACE_SEEN))
    }

    fn build(&self) -> PathBuf {
        self.0.path().join("build")
    }
}

impl Lent {
    /// The folder the submission is staged in for the candidate: `src` in its workspace,
    /// kbench's and sticky (`Confinement::stage_folder`), made the first time.
    pub(super) fn stage(&self, confinement: &Confinement) -> Result<Stage, String> {
        let host = self.workspace.0.path().join("src");
        std::fs::create_dir(&host)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .and_then(|()| confinement.stage_folder(&host))
            .map_err(|e| format!("create the staging folder {}: {e}", host.display()))?;
        Ok(Stage {
            host,
            seen: PathBuf::from(SOURCE_SEEN),
        })
    }

    /// The candidate's workers have ended: where every process of them is known gone (`gone`),
    /// the build folder goes back home; else it is dropped with the workspace, since a process
    /// still alive could write into it after the move.
    pub(super) fn settle(self, gone: bool) {
        if let (true, Some(home)) = (gone, &self.home) {
            // Where the build folder is back already (an identical file was built again
            // meanwhile), the rename fails and the lent copy goes with the workspace.
            let _ = std::fs::rename(self.workspace.build(), home);
        }
    }
}

/// A workspace in the run's cache `cache` for a candidate about to start, handed to the
/// sandbox; none when unconfined.
pub(super) fn workspace(
    cache: &Path,
    confinement: &Confinement,
) -> Result<Option<Workspace>, String> {
    if !confinement.confines() {
        return Ok(None);
    }
    // Inside the builds folder, so lending is a rename on one file system.
    let root = cache.join("builds/.workspaces");
    let dir = std::fs::create_dir_all(&root)
        .and_then(|()| tempfile::Builder::new().prefix("ws-").tempdir_in(&root))
        .and_then(|dir| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .map(|()| dir)
        })
        .map_err(|e| format!("create a workspace in {}: {e}", root.display()))?;
    Ok(Some(Workspace(dir)))
}

/// Lend a submission's build folder `home` to `workspace` until the returned guard settles; an
/// empty folder where another evaluation of an identical file holds it (the candidate then
/// builds there itself). Nothing where unconfined.
pub(super) fn lend(
    confinement: &Confinement,
    home: PathBuf,
    workspace: Option<Workspace>,
) -> Result<Option<Lent>, String> {
    let Some(workspace) = workspace else {
        return Ok(None);
    };
    let lent = workspace.build();
    let moved = match std::fs::rename(&home, &lent) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(&lent).and_then(|()| confinement.give(&lent))
        }
        other => other,
    };
    moved.map_err(|e| format!("lend {} to the candidate: {e}", home.display()))?;
    Ok(Some(Lent {
        workspace,
        home: Some(home),
    }))
}

/// The most a build folder's copy may hold (`lend_copy`): bytes, files.
const COPY_CAP: (u64, usize) = (1 << 30, 100_000);

/// Lend a copy of the build folder `home` to `workspace`, for workers a CUDA tool runs
/// (`alone::Alone::under_tool`): its regular files with their times, so the build is found
/// up to date (`untrusted::copy_tree`), given to the sandbox's uid; `home` stays where it is and
/// the copy goes with the workspace. An empty folder where `home` is missing or cannot be
/// copied whole (the candidate then builds there itself). Nothing where unconfined.
pub(super) fn lend_copy(
    confinement: &Confinement,
    home: &Path,
    workspace: Option<Workspace>,
) -> Result<Option<Lent>, String> {
    let Some(workspace) = workspace else {
        return Ok(None);
    };
    let lent = workspace.build();
    if crate::untrusted::copy_tree(home, &lent, COPY_CAP).is_err() {
        let _ = std::fs::remove_dir_all(&lent);
        std::fs::create_dir(&lent)
            .map_err(|e| format!("make the build folder {}: {e}", lent.display()))?;
    }
    confinement
        .give(&lent)
        .map_err(|e| format!("lend a copy of {} to the candidate: {e}", home.display()))?;
    Ok(Some(Lent {
        workspace,
        home: None,
    }))
}

/// Where workers see the build folder `dir`.
pub(super) fn build_seen(confinement: &Confinement, dir: &Path) -> PathBuf {
    if confinement.confines() {
        PathBuf::from(BUILD_SEEN)
    } else {
        dir.to_path_buf()
    }
}

/// The compile worker's one writable bind: the build folder `dir`, where it sees it.
pub(super) fn build_bind(dir: &Path) -> Bind<'_> {
    (dir, Path::new(BUILD_SEEN))
}
