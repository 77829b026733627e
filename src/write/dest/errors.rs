//! A member's failures: which errors concern one member only (reported, the run goes on)
//! and which end the run, and the words that say why (the symlink met on the way, the
//! metadata that could not be set, the file kept).

use std::ffi::CString;
use std::io;

use super::*;
use crate::policy::safety::SafePath;

/// A member that was made, but whose metadata (owner, attributes, mode, time) could not all be
/// set: `member_failed` reports it as "cannot set metadata", not as a failure to create it.
#[derive(Debug)]
pub struct MetadataFailed(pub io::Error);

impl std::fmt::Display for MetadataFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for MetadataFailed {}

/// A member whose path runs through a symlink (which fastuntar never follows, unless
/// `--keep-directory-symlink`): the ENOTDIR or ELOOP of the walk, with the symlink named
/// (`Dest::explain`).
#[derive(Debug)]
struct ThroughSymlink {
    link: String,
    source: io::Error,
}

impl std::fmt::Display for ThroughSymlink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' is a symlink; fastuntar does not extract through one \
             (--keep-directory-symlink follows those inside DIR)",
            self.link
        )
    }
}

impl std::error::Error for ThroughSymlink {}

/// A chown the kernel refused, named as GNU tar names it ("cannot change ownership to uid
/// 4242, gid 4242: Operation not permitted").
#[derive(Debug)]
struct OwnerRefused {
    uid: u32,
    gid: u32,
    source: io::Error,
}

impl std::fmt::Display for OwnerRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot change ownership to uid {}, gid {}: {}", self.uid, self.gid, self.source)
    }
}

impl std::error::Error for OwnerRefused {}

pub(super) fn owner_refused(uid: u32, gid: u32, source: io::Error) -> io::Error {
    io::Error::new(source.kind(), OwnerRefused { uid, gid, source })
}

/// The system's error inside our wrappers (`MetadataFailed`, `OwnerRefused`).
fn cause(e: &io::Error) -> &io::Error {
    let inner = e.get_ref();
    if let Some(m) = inner.and_then(|x| x.downcast_ref::<MetadataFailed>()) {
        return cause(&m.0);
    }
    if let Some(o) = inner.and_then(|x| x.downcast_ref::<OwnerRefused>()) {
        return cause(&o.source);
    }
    if let Some(t) = inner.and_then(|x| x.downcast_ref::<ThroughSymlink>()) {
        return cause(&t.source);
    }
    e
}

/// An error that concerns one member only (report it and go on); anything else is fatal.
/// EACCES concerns one member when DIR itself is writable (`dir_writable`, found by
/// `Dest::open`): a directory inside DIR that the user may not write to (an earlier
/// extraction's 0555 directory, someone else's), reported as GNU tar reports it while the rest
/// is extracted. Where DIR is not, every member would fail the same way, and the first one
/// ends the run. (Until 2026-11-24 EACCES always ended it, with the members already in flight.)
pub(super) fn is_member_error(e: &io::Error, dir_writable: bool) -> bool {
    let e = cause(e);
    // Our own refusals (no errno) concern the member.
    if e.raw_os_error().is_none() {
        return e.kind() == io::ErrorKind::InvalidInput;
    }
    if e.raw_os_error() == Some(libc::EACCES) {
        return dir_writable;
    }
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOTDIR
                | libc::ELOOP
                | libc::EEXIST
                | libc::ENOTEMPTY
                | libc::EISDIR
                | libc::ENAMETOOLONG
                | libc::EXDEV
                | libc::ENOENT
                | libc::EMLINK
                | libc::EINVAL
                | libc::EPERM
                // What the filesystem cannot do (FUSE: ENOSYS for an operation the daemon
                // lacks, EOPNOTSUPP; FAT through FUSE has no symlinks, no chmod).
                | libc::ENOSYS
                | libc::EOPNOTSUPP
                // A name the filesystem cannot store (invalid UTF-8 on exFAT, NTFS).
                | libc::EILSEQ
        )
    )
}

/// `--skip-old-files` or `--keep-newer-files` kept what was at a member's path. Not a
/// failure: `write::member_failed` says what it is told to (nothing, `skipping existing file`,
/// or `Current 'PATH' is newer or same age`), and the exit status stays as it was.
#[derive(Debug)]
pub enum KeptExisting {
    /// `--skip-old-files`.
    Skipped,
    /// `--keep-newer-files`: what is at `path` (the path as extracted, as GNU tar names it) is
    /// as new as the member or newer.
    Newer { path: String },
}

impl std::fmt::Display for KeptExisting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeptExisting::Skipped => f.write_str("skipping existing file"),
            KeptExisting::Newer { path } => write!(f, "Current '{path}' is newer or same age"),
        }
    }
}

impl std::error::Error for KeptExisting {}

impl Dest {
    /// `e`, a member's failure to be made at `path`, with the symlink named when the walk to
    /// it met one: ENOTDIR or ELOOP alone does not tell a user why `link/f` could not be made
    /// where GNU tar would have followed `link`. Only on the error path: one fstatat per
    /// directory of the path, from DIR, each without following (a component is looked at only
    /// after those above it were found to be directories).
    pub fn explain(&self, path: &SafePath, e: io::Error) -> io::Error {
        let errno = cause(&e).raw_os_error();
        if self.tree.follows() || !matches!(errno, Some(libc::ENOTDIR | libc::ELOOP)) {
            return e;
        }
        let mut prefix = Vec::new();
        for c in path.parent_components() {
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            prefix.extend_from_slice(c);
            let Ok(p) = CString::new(prefix.as_slice()) else { return e };
            let Ok(st) = fstatat_nofollow(self.root_fd(), &p) else { return e };
            let mode = st.st_mode & libc::S_IFMT;
            if mode == libc::S_IFLNK {
                let link = String::from_utf8_lossy(&prefix).into_owned();
                return io::Error::new(e.kind(), ThroughSymlink { link, source: e });
            }
            if mode != libc::S_IFDIR {
                // A file in the way: "Not a directory" says it.
                return e;
            }
        }
        e
    }

    /// An error that concerns one member only: report it and go on. Anything else is fatal.
    pub fn is_member_error(&self, e: &io::Error) -> bool {
        is_member_error(e, self.dir_writable)
    }
}
