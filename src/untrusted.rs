//! Folders that submission code can write, or could write before (a build folder, a workspace),
//! as the trusted side touches them: through descriptors, never by a path that a planted link
//! could redirect. A folder is opened without following a link; its entries are reached from
//! its descriptor (`openat`), each without following a link and without blocking (a FIFO
//! planted in place of a file is seen and skipped, never read); only regular files are read.
//! kbench keeps nothing it trusts in such a folder (its records live in its own folders).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

/// Flags of every open here: no link followed, no blocking on a FIFO, no controlling terminal.
fn flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY
}

/// The folder at `path`, itself not a link (the folders above it are kbench's).
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rfs::open(path, flags() | OFlags::DIRECTORY, Mode::empty())?)
}

/// What an entry of a walked folder is.
#[derive(Debug)]
pub enum Entry {
    /// A regular file, open for reading.
    File(File),
    /// A link, FIFO, socket or device: never opened, never followed.
    Other(&'static str),
}

/// The names in the folder `dir` (a descriptor), sorted, without `.` and `..`.
fn names(dir: &OwnedFd) -> io::Result<Vec<std::ffi::CString>> {
    let mut names = Vec::new();
    for entry in rfs::Dir::read_from(dir)? {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Every entry under the folder `root`, depth first in name order, as its path relative to
/// `root` and what it is; folders are descended into, never reported. Nothing is followed.
pub fn walk(root: &Path, visit: &mut dyn FnMut(&Path, Entry)) -> io::Result<()> {
    walk_fd(&open_dir(root)?, PathBuf::new(), visit)
}

fn walk_fd(dir: &OwnedFd, rel: PathBuf, visit: &mut dyn FnMut(&Path, Entry)) -> io::Result<()> {
    for name in names(dir)? {
        let path = rel.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
        let fd = match rfs::openat(dir, name.as_c_str(), flags(), Mode::empty()) {
            Ok(fd) => fd,
            // A link (ELOOP), or an entry gone since the listing.
            Err(rustix::io::Errno::LOOP) => {
                visit(&path, Entry::Other("a symbolic link"));
                continue;
            }
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        match FileType::from_raw_mode(rfs::fstat(&fd)?.st_mode) {
            FileType::Directory => walk_fd(&fd, path, visit)?,
            FileType::RegularFile => visit(&path, Entry::File(File::from(fd))),
            other => visit(&path, Entry::Other(kind(other))),
        }
    }
    Ok(())
}

/// A word for a file type that is neither a folder nor a regular file.
fn kind(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

/// Give the folder `root` and everything in it to `uid`:`gid`, through descriptors: a link is
/// given itself (never what it points to), and a folder swapped for a link while this walks is
/// not entered. What is theirs already is left as it is.
pub fn chown_tree(root: &Path, uid: u32, gid: u32) -> io::Result<()> {
    chown_fd(&open_dir(root)?, uid, gid)
}

fn chown_fd(dir: &OwnedFd, uid: u32, gid: u32) -> io::Result<()> {
    let owner = |st: &rfs::Stat| st.st_uid != uid || st.st_gid != gid;
    let (u, g) = (Some(rfs::Uid::from_raw(uid)), Some(rfs::Gid::from_raw(gid)));
    if owner(&rfs::fstat(dir)?) {
        rfs::fchown(dir, u, g)?;
    }
    for name in names(dir)? {
        let st = match rfs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            match rfs::openat(
                dir,
                name.as_c_str(),
                flags() | OFlags::DIRECTORY,
                Mode::empty(),
            ) {
                Ok(sub) => chown_fd(&sub, uid, gid)?,
                // Swapped for a link or a file since: not entered.
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {}
                Err(e) => return Err(e.into()),
            }
        } else if owner(&st) {
            rfs::chownat(dir, name.as_c_str(), u, g, AtFlags::SYMLINK_NOFOLLOW)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A folder with a file, a folder, a link to a file outside, a link to a folder outside
    /// and a FIFO.
    fn planted() -> (tempfile::TempDir, tempfile::TempDir) {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"root only").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.so"), b"object").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/b.o"), b"b").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join("sub/folder")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, d.join("fifo"), Mode::from_raw_mode(0o600)).unwrap();
        (dir, outside)
    }

    #[test]
    fn a_walk_reads_regular_files_and_names_everything_else_without_following_or_blocking() {
        let (dir, _outside) = planted();
        let mut seen = Vec::new();
        walk(dir.path(), &mut |rel, entry| {
            let what = match entry {
                Entry::File(mut f) => {
                    let mut s = String::new();
                    f.read_to_string(&mut s).unwrap();
                    s
                }
                Entry::Other(kind) => kind.to_string(),
            };
            seen.push(format!("{}={what}", rel.display()));
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                "a.so=object",
                "fifo=a FIFO",
                "link=a symbolic link",
                "sub/b.o=b",
                "sub/folder=a symbolic link"
            ]
        );
    }

    #[test]
    fn a_folder_that_is_a_link_is_not_walked() {
        let (dir, outside) = planted();
        let link = dir.path().join("sub/folder");
        assert!(walk(&link, &mut |_, _| panic!("followed")).is_err());
        assert!(chown_tree(&link, 0, 0).is_err());
        assert!(outside.path().join("secret").exists());
    }

    /// Only root can give files away; elsewhere giving them to oneself must still walk safely.
    #[test]
    fn chown_gives_the_tree_and_not_what_links_point_to() {
        use std::os::unix::fs::MetadataExt;
        let (dir, outside) = planted();
        let me = rustix::process::geteuid().as_raw();
        let to = if me == 0 { 65534 } else { me };
        chown_tree(dir.path(), to, to).unwrap();
        for p in ["a.so", "sub", "sub/b.o", "fifo"] {
            assert_eq!(
                std::fs::symlink_metadata(dir.path().join(p)).unwrap().uid(),
                to,
                "{p}"
            );
        }
        let secret = std::fs::metadata(outside.path().join("secret")).unwrap();
        assert_eq!(secret.uid(), me, "a link's target was given away");
        assert_eq!(
            std::fs::metadata(outside.path()).unwrap().uid(),
            me,
            "a linked folder was given away"
        );
    }
}
