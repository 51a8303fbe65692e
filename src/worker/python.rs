//! The Python side, embedded in the binary so that kbench is one file to install, and written
//! to the cache on first use (a folder per content hash, so versions never mix).

use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

static WORKER: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/src/worker/python");

fn hash_dir(dir: &Dir<'_>, hasher: &mut Sha256) {
    for file in dir.files() {
        hasher.update(file.path().to_string_lossy().as_bytes());
        hasher.update(file.contents());
    }
    for sub in dir.dirs() {
        hash_dir(sub, hasher);
    }
}

/// Whether every embedded file of `dir` is on disk below `root` with the same contents (files
/// added beside them are harmless: Python imports only what the package names).
fn intact(dir: &Dir<'_>, root: &Path) -> bool {
    dir.files()
        .all(|f| std::fs::read(root.join(f.path())).is_ok_and(|b| b == f.contents()))
        && dir.dirs().all(|d| intact(d, root))
}

/// Write each `(folder, dir)` below `root/<name>-<hash>/<folder>` unless it is there already;
/// return `root/<name>-<hash>`. The hash covers every file, so versions never mix.
pub fn extract(parts: &[(&str, &Dir<'_>)], root: &Path, name: &str) -> Result<PathBuf> {
    let mut hasher = Sha256::new();
    for (folder, dir) in parts {
        hasher.update(folder.as_bytes());
        hash_dir(dir, &mut hasher);
    }
    let hash = format!("{:x}", hasher.finalize());
    let target = root.join(format!("{name}-{}", &hash[..16]));
    if target.join(".complete").exists() {
        // The hash in the name says what the folder should hold, not what it holds: a process
        // that could write the cache may have rewritten a file since. Compare before reuse.
        if parts
            .iter()
            .all(|(folder, dir)| intact(dir, &target.join(folder)))
        {
            return Ok(target);
        }
        eprintln!(
            "kbench: {} differs from the code built into kbench; writing it again",
            target.display()
        );
        std::fs::remove_dir_all(&target).map_err(|e| Error::write(&target, e))?;
    }
    // Write into a private folder and rename it in place, so concurrent runs never see half a tree.
    let staging = root.join(format!(".{name}-{}-{}", &hash[..16], std::process::id()));
    for (folder, dir) in parts {
        let dest = staging.join(folder);
        std::fs::create_dir_all(&dest).map_err(|e| Error::write(&dest, e))?;
        dir.extract(&dest).map_err(|e| Error::write(&dest, e))?;
    }
    std::fs::write(staging.join(".complete"), "").map_err(|e| Error::write(&staging, e))?;
    if std::fs::rename(&staging, &target).is_err() {
        // Another run won the race; its copy is identical.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Ok(target)
}

/// The folder to put on PYTHONPATH for `python -m kbench_worker`.
pub fn worker_path(cache: &Path) -> Result<PathBuf> {
    extract(&[("", &WORKER)], cache, "python")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_cached_file_is_written_again() {
        let cache = tempfile::tempdir().unwrap();
        let path = worker_path(cache.path()).unwrap();
        // Subpackages ship too.
        assert!(path.join("kbench_worker/static_check/registry.py").exists());
        let reference = path.join("kbench_worker/roles/reference.py");
        let original = std::fs::read(&reference).unwrap();
        std::fs::write(&reference, b"def run(channel): pass\n").unwrap();
        assert_eq!(worker_path(cache.path()).unwrap(), path);
        assert_eq!(std::fs::read(&reference).unwrap(), original);
    }
}
