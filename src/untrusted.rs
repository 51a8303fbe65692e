//! Files that something kbench does not trust could have placed, as the trusted side opens them:
//! a shard's record and logs (`kbench merge`), a published corpus (`kbench import`). A file is
//! read only when it is a regular file reached through no symbolic link, up to a cap, and
//! without blocking: the entry is looked at first without opening it (a FIFO or a device is
//! refused unopened), then opened with `O_NOFOLLOW | O_NONBLOCK` and checked again with `fstat`
//! (it could have been swapped in between). A file written beside such files is created new
//! (`O_EXCL`), never opened through a link. Beneath a trusted folder a path is walked one
//! component at a time (`openat` with `O_NOFOLLOW | O_DIRECTORY`), so a link anywhere below that
//! folder is refused, not only at the path's end. A folder confined submission code writes (a
//! build folder, a workspace) is walked the same way, from its own descriptor (`walk`), and
//! handed to the sandbox's uid through descriptors (`chown_tree`), or its regular files copied
//! (`copy_tree`): a link counts as a link and is never followed, a FIFO is seen and never read.
//! This module owns those rules and nothing else.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// How every file is opened for reading: no link followed at the end, no wait on a FIFO's writer,
/// no controlling terminal taken.
const READ: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// How each folder on the way down is opened: a folder, and not through a link.
const FOLDER: OFlags = READ.union(OFlags::DIRECTORY);

/// Read the regular file at `path`: refused when its last component is a symbolic link, when it
/// is anything but a regular file, or when it holds more than `cap` bytes. Folders above it are
/// followed as named (the caller names them); `read_regular_beneath` also refuses links there.
pub fn read_regular(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    regular_or_missing(rfs::lstat(path).ok())?;
    let fd = rfs::open(path, READ, Mode::empty())
        .map_err(|e| refusal(e, "a regular file", || rfs::lstat(path).ok()))?;
    read_capped(fd, cap)
}

/// Read the regular file at `rel` beneath the folder `base` (trusted, followed as named): `rel`
/// must be a relative path of plain names (no `..`, no root), no component of it may be a
/// symbolic link, its last must be a regular file of at most `cap` bytes.
pub fn read_regular_beneath(base: &Path, rel: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let (dir, name) = descend(base, rel, false)?;
    regular_or_missing(lstat_at(&dir, name))?;
    let fd = rfs::openat(&dir, name, READ, Mode::empty())
        .map_err(|e| refusal(e, "a regular file", || lstat_at(&dir, name)))?;
    read_capped(fd, cap)
}

/// Create the file `rel` beneath `base` with `bytes`, making the folders on the way (none through
/// a link): a file, link or anything else already at `rel` is refused (`O_EXCL`), never followed
/// or overwritten.
pub fn create_new_beneath(base: &Path, rel: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = descend(base, rel, true)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rfs::openat(&dir, name, flags, Mode::from_raw_mode(0o666))
        .map_err(|e| refusal(e, "a new file", || lstat_at(&dir, name)))?;
    File::from(fd).write_all(bytes)
}

/// The folder holding `rel`'s last component, opened component by component from `base`
/// (made where missing when `make`), and that last component's name.
fn descend<'a>(base: &Path, rel: &'a Path, make: bool) -> io::Result<(OwnedFd, &'a OsStr)> {
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain relative path", rel.display()),
                ))
            }
        }
    }
    let Some(last) = names.pop() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an empty path names no file",
        ));
    };
    let mut dir = rfs::open(base, FOLDER.difference(OFlags::NOFOLLOW), Mode::empty())?;
    for name in names {
        if make {
            match rfs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        dir = rfs::openat(&dir, name, FOLDER, Mode::empty())
            .map_err(|e| refusal(e, "a folder", || lstat_at(&dir, name)))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", Path::new(name).display())))?;
    }
    Ok((dir, last))
}

/// What reading an entry of kind `kind` (as a walk that follows no link saw it) would be refused
/// with, when it is not a regular file: the same words `read_regular` uses, without opening it.
pub fn not_regular(kind: std::fs::FileType) -> Option<io::Error> {
    use std::os::unix::fs::FileTypeExt;
    let kind = [
        (kind.is_file(), FileType::RegularFile),
        (kind.is_dir(), FileType::Directory),
        (kind.is_symlink(), FileType::Symlink),
        (kind.is_fifo(), FileType::Fifo),
        (kind.is_socket(), FileType::Socket),
        (kind.is_char_device(), FileType::CharacterDevice),
        (kind.is_block_device(), FileType::BlockDevice),
    ]
    .into_iter()
    .find_map(|(is, kind)| is.then_some(kind))
    .unwrap_or(FileType::Unknown);
    (kind != FileType::RegularFile).then(|| refused(kind, "a regular file"))
}

/// Refused unless the entry `lstat` saw is a regular file, or none (the open then says it is
/// missing): so that nothing else is opened at all.
fn regular_or_missing(lstat: Option<rfs::Stat>) -> io::Result<()> {
    match lstat.map(|stat| FileType::from_raw_mode(stat.st_mode)) {
        Some(kind) if kind != FileType::RegularFile => Err(refused(kind, "a regular file")),
        _ => Ok(()),
    }
}

/// The file's bytes, when it is a regular file of at most `cap` bytes.
fn read_capped(fd: OwnedFd, cap: u64) -> io::Result<Vec<u8>> {
    let kind = FileType::from_raw_mode(rfs::fstat(fd.as_fd())?.st_mode);
    if kind != FileType::RegularFile {
        return Err(refused(kind, "a regular file"));
    }
    let mut bytes = Vec::new();
    File::from(fd).take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// What `name` in `dir` is, looked at without following it.
fn lstat_at(dir: &OwnedFd, name: &OsStr) -> Option<rfs::Stat> {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

/// An open that failed, said as what the entry is (`lstat` looks at it without following it)
/// where `O_NOFOLLOW` (a link), `O_DIRECTORY` (not a folder), `O_EXCL` (already there) or the
/// entry's kind (a socket) refused it; any other error (missing, no permission) as it is.
fn refusal(e: Errno, expected: &str, lstat: impl FnOnce() -> Option<rfs::Stat>) -> io::Error {
    let refused_kind = matches!(e, Errno::LOOP | Errno::NOTDIR | Errno::NXIO | Errno::EXIST);
    match lstat().filter(|_| refused_kind) {
        Some(stat) => refused(FileType::from_raw_mode(stat.st_mode), expected),
        None => e.into(),
    }
}

/// The error for an entry of kind `kind` where `expected` was needed.
fn refused(kind: FileType, expected: &str) -> io::Error {
    let (what, error_kind) = match kind {
        FileType::RegularFile => ("a file already there", io::ErrorKind::AlreadyExists),
        FileType::Directory => ("a folder", io::ErrorKind::InvalidInput),
        FileType::Symlink => (
            "a symbolic link (not followed)",
            io::ErrorKind::InvalidInput,
        ),
        FileType::Fifo => ("a FIFO", io::ErrorKind::InvalidInput),
        FileType::Socket => ("a socket", io::ErrorKind::InvalidInput),
        FileType::CharacterDevice | FileType::BlockDevice => {
            ("a device", io::ErrorKind::InvalidInput)
        }
        FileType::Unknown => ("of an unknown kind", io::ErrorKind::InvalidInput),
    };
    io::Error::new(error_kind, format!("{what}, not {expected}"))
}

/// The folder at `path`, itself not a link (the folders above it are kbench's).
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rfs::open(path, FOLDER, Mode::empty())?)
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

/// How deep a walked folder may nest: a tree deeper than this is refused, not walked (each level
/// holds a descriptor and a frame of the walk).
const MAX_DEPTH: usize = 64;

/// Every entry under the folder `root`, depth first in name order, as its path relative to
/// `root` and what it is; folders are descended into, never reported. Nothing is followed. A
/// regular file with another hard link is reported as such, never opened (a link made to a file
/// elsewhere would hand its contents on); folders nested deeper than `MAX_DEPTH` are an error.
pub fn walk(root: &Path, visit: &mut dyn FnMut(&Path, Entry)) -> io::Result<()> {
    walk_fd(&open_dir(root)?, PathBuf::new(), visit)
}

/// The error for a folder nested deeper than `MAX_DEPTH`.
fn too_deep() -> io::Error {
    io::Error::other(format!("folders nested more than {MAX_DEPTH} deep"))
}

fn walk_fd(dir: &OwnedFd, rel: PathBuf, visit: &mut dyn FnMut(&Path, Entry)) -> io::Result<()> {
    if rel.components().count() > MAX_DEPTH {
        return Err(too_deep());
    }
    for name in names(dir)? {
        let path = rel.join(OsStr::from_bytes(name.as_bytes()));
        let fd = match rfs::openat(dir, name.as_c_str(), READ, Mode::empty()) {
            Ok(fd) => fd,
            // A link (ELOOP), or an entry gone since the listing.
            Err(Errno::LOOP) => {
                visit(&path, Entry::Other("a symbolic link"));
                continue;
            }
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let st = rfs::fstat(&fd)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => walk_fd(&fd, path, visit)?,
            FileType::RegularFile if st.st_nlink > 1 => {
                visit(&path, Entry::Other("a file with another hard link"))
            }
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

/// Copy the regular files under the folder `from` into the folder `to` (made where missing, and
/// the folders between, none through a link), each with its permission bits (no set-id bit) and
/// its times, so that a build copied this way is as up to date as where it lies. Links, FIFOs,
/// sockets and devices are left out, never opened or followed; past `cap`'s bytes or files in all
/// the copy stops with an error, what it made so far left for the caller to remove.
pub fn copy_tree(from: &Path, to: &Path, cap: (u64, usize)) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    let (mut left, mut files) = cap;
    let mut failed = None;
    walk(from, &mut |rel, entry| {
        let Entry::File(file) = entry else {
            return;
        };
        if failed.is_some() {
            return;
        }
        if files == 0 {
            failed = Some(io::Error::other(format!("more than {} files", cap.1)));
            return;
        }
        files -= 1;
        match copy_file(file, to, rel, &mut left) {
            Ok(true) => {}
            Ok(false) => failed = Some(io::Error::other(format!("more than {} bytes", cap.0))),
            Err(e) => failed = Some(e),
        }
    })?;
    failed.map_or(Ok(()), Err)
}

/// One file of `copy_tree`, open at `file`, to `rel` beneath `to`, out of the `left` bytes:
/// false where it held more.
fn copy_file(file: File, to: &Path, rel: &Path, left: &mut u64) -> io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    let meta = file.metadata()?;
    let (dir, name) = descend(to, rel, true)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut copy = File::from(rfs::openat(&dir, name, flags, Mode::from_raw_mode(0o600))?);
    let copied = io::copy(&mut file.take(*left + 1), &mut copy)?;
    if copied > *left {
        return Ok(false);
    }
    *left -= copied;
    copy.set_permissions(std::fs::Permissions::from_mode(
        meta.permissions().mode() & 0o777,
    ))?;
    let times = std::fs::FileTimes::new()
        .set_accessed(meta.accessed()?)
        .set_modified(meta.modified()?);
    copy.set_times(times).map(|()| true)
}

/// Give the folder `root` and everything in it to `uid`:`gid`, through descriptors: a link is
/// given itself (never what it points to), a file with another hard link is not given (that
/// would give the other name's file too), and a folder swapped for a link while this walks is
/// not entered. What is theirs already is left as it is; deeper than `MAX_DEPTH`, an error.
pub fn chown_tree(root: &Path, uid: u32, gid: u32) -> io::Result<()> {
    chown_fd(&open_dir(root)?, uid, gid, 0)
}

fn chown_fd(dir: &OwnedFd, uid: u32, gid: u32, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let owner = |st: &rfs::Stat| st.st_uid != uid || st.st_gid != gid;
    let (u, g) = (Some(rfs::Uid::from_raw(uid)), Some(rfs::Gid::from_raw(gid)));
    if owner(&rfs::fstat(dir)?) {
        rfs::fchown(dir, u, g)?;
    }
    for name in names(dir)? {
        let st = match rfs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            match rfs::openat(dir, name.as_c_str(), FOLDER, Mode::empty()) {
                Ok(sub) => chown_fd(&sub, uid, gid, depth + 1)?,
                // Swapped for a link or a file since: not entered.
                Err(Errno::LOOP | Errno::NOTDIR) => {}
                Err(e) => return Err(e.into()),
            }
        } else {
            chown_entry(dir, name.as_c_str(), (u, g), &owner)?;
        }
    }
    Ok(())
}

/// Give the entry `name` of `dir` (not a folder) through a descriptor of the entry itself
/// (`O_PATH`, the link where it is one), unless it is given already or has another hard link:
/// the link count is read from the inode that is then given, so swapping a hard link in for the
/// name meanwhile gives nothing away.
fn chown_entry(
    dir: &OwnedFd,
    name: &std::ffi::CStr,
    (u, g): (Option<rfs::Uid>, Option<rfs::Gid>),
    owner: &dyn Fn(&rfs::Stat) -> bool,
) -> io::Result<()> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rfs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let st = rfs::fstat(&fd)?;
    if owner(&st) && st.st_nlink <= 1 {
        rfs::chownat(&fd, c"", u, g, AtFlags::EMPTY_PATH)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A folder holding one of each kind of entry, and a secret outside it that links point to.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("base/sub")).unwrap();
        std::fs::write(p.join("secret"), "outside").unwrap();
        std::fs::write(p.join("base/file"), "inside").unwrap();
        std::fs::write(p.join("base/sub/deep"), "deep").unwrap();
        std::fs::write(p.join("base/big"), vec![b'x'; 11]).unwrap();
        symlink(p.join("secret"), p.join("base/link")).unwrap();
        symlink(p.join("base/sub"), p.join("base/dirlink")).unwrap();
        symlink(p, p.join("base/up")).unwrap();
        let fifo = std::ffi::CString::new(p.join("base/fifo").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        dir
    }

    #[test]
    fn only_regular_files_reached_through_no_link_are_read() {
        let dir = tree();
        let base = dir.path().join("base");
        // (path beneath base, Ok(contents) or the error's words)
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("file", Ok("inside")),
            ("./sub/deep", Ok("deep")),
            ("big", Err("larger than 10 bytes")),
            (
                "link",
                Err("a symbolic link (not followed), not a regular file"),
            ),
            ("fifo", Err("a FIFO, not a regular file")),
            ("sub", Err("a folder, not a regular file")),
            (
                "dirlink/deep",
                Err("dirlink: a symbolic link (not followed), not a folder"),
            ),
            (
                "up/secret",
                Err("up: a symbolic link (not followed), not a folder"),
            ),
            ("file/x", Err("file: a file already there, not a folder")),
            ("fifo/x", Err("fifo: a FIFO, not a folder")),
            ("../secret", Err("is not a plain relative path")),
            ("missing", Err("No such file")),
        ];
        for (rel, expected) in cases {
            let got = read_regular_beneath(&base, Path::new(rel), 10);
            match (expected, got) {
                (Ok(text), Ok(bytes)) => assert_eq!(bytes, text.as_bytes(), "{rel}"),
                (Err(words), Err(e)) => assert!(e.to_string().contains(words), "{rel}: {e}"),
                (expected, got) => panic!("{rel}: expected {expected:?}, got {got:?}"),
            }
        }
        let absolute = read_regular_beneath(&base, &dir.path().join("secret"), 10);
        assert!(absolute
            .unwrap_err()
            .to_string()
            .contains("not a plain relative path"));
        assert_eq!(
            read_regular_beneath(&base, Path::new("missing"), 10)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_path_read_whole_refuses_a_link_at_its_end_and_anything_not_a_regular_file() {
        let dir = tree();
        let base = dir.path().join("base");
        assert_eq!(read_regular(&base.join("file"), 10).unwrap(), b"inside");
        for (name, words) in [
            ("link", "a symbolic link"),
            ("fifo", "a FIFO"),
            ("sub", "a folder"),
            ("big", "larger than 10 bytes"),
        ] {
            let err = read_regular(&base.join(name), 10).unwrap_err().to_string();
            assert!(err.contains(words), "{name}: {err}");
        }
    }

    #[test]
    fn a_walked_entry_is_named_as_reading_it_would_be_refused() {
        let dir = tree();
        let base = dir.path().join("base");
        for (name, words) in [
            ("file", None),
            (
                "link",
                Some("a symbolic link (not followed), not a regular file"),
            ),
            ("fifo", Some("a FIFO, not a regular file")),
            ("sub", Some("a folder, not a regular file")),
        ] {
            let kind = base.join(name).symlink_metadata().unwrap().file_type();
            let said = not_regular(kind).map(|e| e.to_string());
            assert_eq!(said.as_deref(), words, "{name}");
        }
    }

    #[test]
    fn the_open_is_checked_again_for_an_entry_swapped_after_it_was_looked_at() {
        let dir = tree();
        let base = dir.path().join("base");
        // As if a regular file had become a link or a FIFO between the look and the open.
        let link = rfs::open(base.join("link"), READ, Mode::empty()).unwrap_err();
        let said = refusal(link, "a regular file", || {
            rfs::lstat(base.join("link")).ok()
        });
        assert_eq!(
            said.to_string(),
            "a symbolic link (not followed), not a regular file"
        );
        let fifo = rfs::open(base.join("fifo"), READ, Mode::empty()).unwrap();
        let said = read_capped(fifo, 10).unwrap_err();
        assert_eq!(said.to_string(), "a FIFO, not a regular file");
    }

    #[test]
    fn files_are_created_new_and_never_through_a_link() {
        let dir = tree();
        let base = dir.path().join("base");
        create_new_beneath(&base, Path::new("made/on/the/way"), b"new").unwrap();
        assert_eq!(std::fs::read(base.join("made/on/the/way")).unwrap(), b"new");
        for (rel, words) in [
            ("link", "a symbolic link (not followed), not a new file"),
            ("file", "a file already there, not a new file"),
            (
                "dirlink/new",
                "dirlink: a symbolic link (not followed), not a folder",
            ),
            ("../new", "not a plain relative path"),
        ] {
            let err = create_new_beneath(&base, Path::new(rel), b"x").unwrap_err();
            assert!(err.to_string().contains(words), "{rel}: {err}");
        }
        assert_eq!(
            std::fs::read(dir.path().join("secret")).unwrap(),
            b"outside"
        );
        assert_eq!(std::fs::read(base.join("file")).unwrap(), b"inside");
        assert!(!base.join("sub/new").exists() && !dir.path().join("new").exists());
    }

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
        symlink(outside.path().join("secret"), d.join("link")).unwrap();
        symlink(outside.path(), d.join("sub/folder")).unwrap();
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
        for p in ["a.so", "sub", "sub/b.o", "fifo", "link", "sub/folder"] {
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

    #[test]
    fn a_copied_tree_holds_its_regular_files_as_they_were_and_nothing_else() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, outside) = planted();
        let a = dir.path().join("a.so");
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::new(1_000_000, 123);
        let f = File::options().write(true).open(&a).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(old))
            .unwrap();
        let to = tempfile::tempdir().unwrap();
        let copy = to.path().join("build");
        copy_tree(dir.path(), &copy, (1 << 20, 10)).unwrap();
        let mut found = Vec::new();
        walk(&copy, &mut |rel, _| found.push(rel.display().to_string())).unwrap();
        // The links and the FIFO are left out; a linked folder is not copied from.
        assert_eq!(found, ["a.so", "sub/b.o"]);
        assert_eq!(std::fs::read(copy.join("a.so")).unwrap(), b"object");
        let meta = std::fs::metadata(copy.join("a.so")).unwrap();
        assert_eq!(meta.modified().unwrap(), old, "its time kept");
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o755,
            "its bits, no set-id"
        );
        assert!(outside.path().join("secret").exists());
        // Past the cap, in bytes or in files: an error (the caller removes what was made).
        let e = copy_tree(dir.path(), &to.path().join("bytes"), (6, 10)).unwrap_err();
        assert!(e.to_string().contains("more than 6 bytes"), "{e}");
        let e = copy_tree(dir.path(), &to.path().join("files"), (1 << 20, 1)).unwrap_err();
        assert!(e.to_string().contains("more than 1 files"), "{e}");
    }

    #[test]
    fn a_hard_linked_file_is_neither_read_nor_given_and_a_deep_tree_is_refused() {
        use std::os::unix::fs::MetadataExt;
        let (dir, outside) = planted();
        // A second name for a file outside: its contents must not be handed on, nor its owner changed.
        std::fs::hard_link(outside.path().join("secret"), dir.path().join("hard")).unwrap();
        let mut seen = Vec::new();
        walk(dir.path(), &mut |rel, entry| {
            if let Entry::Other(kind) = entry {
                seen.push(format!("{}={kind}", rel.display()));
            }
        })
        .unwrap();
        assert!(
            seen.contains(&"hard=a file with another hard link".to_string()),
            "{seen:?}"
        );
        let to = tempfile::tempdir().unwrap();
        copy_tree(dir.path(), &to.path().join("copy"), (1 << 20, 10)).unwrap();
        assert!(!to.path().join("copy/hard").exists());
        let me = rustix::process::geteuid().as_raw();
        let other = if me == 0 { 65534 } else { me };
        chown_tree(dir.path(), other, other).unwrap();
        let secret = std::fs::metadata(outside.path().join("secret")).unwrap();
        assert_eq!(secret.uid(), me, "a hard link's file was given away");
        // Folders nested past the limit: an error, not a walk as deep as the tree goes.
        let deep = tempfile::tempdir().unwrap();
        let mut p = deep.path().to_path_buf();
        for _ in 0..=MAX_DEPTH + 1 {
            p.push("d");
        }
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("f"), b"x").unwrap();
        let e = walk(deep.path(), &mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("more than 64 deep"), "{e}");
        assert!(chown_tree(deep.path(), other, other).is_err());
    }
}
