//! Files replaced whole: written beside the target, then renamed over it, so a reader (or a run
//! killed mid-write) never sees half a report or cache entry. The file written beside it is
//! created new under a name of its own (`O_EXCL`), so a link or file already in the folder is
//! never written through, and the rename replaces a link at the target rather than following it.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::{Error, Result};

pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // Mode 0666 less the umask, as a file written in place would have.
    let mut file = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| Error::write(path, e))?;
    file.write_all(bytes).map_err(|e| Error::write(path, e))?;
    file.persist(path)
        .map_err(|e| Error::write(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_folder_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "kept").unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        // The names an older kbench wrote beside its target, and the target itself, as links.
        std::os::unix::fs::symlink(&outside, out.join("results.tmp")).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("results.json")).unwrap();
        write(&out.join("results.json"), b"new").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"kept");
        assert_eq!(std::fs::read(out.join("results.json")).unwrap(), b"new");
        assert!(!out.join("results.json").is_symlink());
        let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
        assert_eq!(left.len(), 2, "only the target and the old link: {left:?}");
    }
}
