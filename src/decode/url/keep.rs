//! `--keep-archive FILE`: the copy of a download, written as `FILE.incomplete` and named FILE
//! once the run has ended well (docs/SECURITY.md, "The server").
//!
//! FILE's directory is often DIR itself, where an earlier archive, or this one while it is
//! extracted, may have put anything at `FILE.incomplete`: a symlink to a file outside DIR, a
//! file of its own. Until issue 40 the copy was opened with a plain create, which followed
//! such a symlink and filled the file outside with the server's bytes; and a member named
//! `FILE.incomplete` replaced the download, was renamed to FILE, and the run said the
//! checksum matched. So:
//!
//! - FILE's directory is opened once, at the start (its path is resolved as given, as any
//!   tool resolves a path it is handed); every later step is relative to that descriptor.
//! - The copy is created `O_CREAT | O_EXCL | O_NOFOLLOW`, after unlinking whatever is at
//!   `FILE.incomplete` (a stale copy of a failed run, or a symlink: the name, never what it
//!   points to). O_EXCL never follows a symlink and never opens what is there: something put
//!   back in between makes the create fail, and after a few tries the run stops with one line.
//! - The copy's device and inode are kept. At the end, once the writers have finished (no
//!   member can land any more), `FILE.incomplete` is renamed to FILE only if it still holds
//!   that inode; then FILE must hold it. Otherwise (a member of that name replaced it during
//!   the run) the run fails with one line and exit 2: the bytes that were hashed are in an
//!   unlinked inode no call can give a name again, and FILE is never something else.
//!
//! Why not O_TMPFILE, linked into place at the end (which no member could replace): the copy
//! would have no name while it is written (README promises `FILE.incomplete`, and a failed run
//! leaves it to look at), some filesystems refuse O_TMPFILE (FUSE, vfat, older NFS), and
//! linking it needs /proc or CAP_DAC_READ_SEARCH. A member named like the copy is an
//! archive's doing, and the line names it.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};

/// Tries at making the copy when something keeps coming back at its name.
const CREATE_TRIES: usize = 3;

/// A system call again while it fails with EINTR, a few times at most: `place` runs on the
/// writer thread, whose io_uring completions can interrupt a call (write/mod.rs `restart`,
/// which this room is below and does not reach).
fn restart<T: Copy + Into<i64>>(mut call: impl FnMut() -> T) -> T {
    let mut tries = 0;
    loop {
        let r = call();
        tries += 1;
        if r.into() >= 0
            || tries >= 8
            || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted
        {
            return r;
        }
    }
}

/// The kept copy: where it is and which inode it is.
pub struct Kept {
    /// FILE's directory, opened at the start.
    dir: OwnedFd,
    /// `FILE.incomplete` and FILE, as names in `dir`.
    part: CString,
    name: CString,
    /// The two paths as given, for messages.
    part_path: PathBuf,
    path: PathBuf,
    /// The copy's device and inode.
    id: (u64, u64),
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn stat_at(dir: &OwnedFd, name: &CStr) -> io::Result<libc::stat> {
    // Safety: an open directory fd, a C string and a zeroed stat the call fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW;
    cvt(restart(|| unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) }))?;
    Ok(st)
}

/// The directory and last component of `path` (`.` for a bare name), or why not.
fn split(path: &Path) -> Result<(PathBuf, CString)> {
    let Some(leaf) = path.file_name() else {
        bail!("--keep-archive {}: not a file name", path.display());
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let leaf = CString::new(leaf.as_bytes())
        .map_err(|_| anyhow!("--keep-archive {}: a NUL in the name", path.display()))?;
    Ok((parent, leaf))
}

impl Kept {
    /// Creates the copy of FILE (`keep`) at `part` (`FILE.incomplete`, in the same directory):
    /// the copy, and the file to write it through.
    pub fn create(keep: &Path, part: &Path) -> Result<(Kept, File)> {
        let shown = || part.display();
        let (parent, name) = split(keep)?;
        let (_, part_name) = split(part)?;
        let c = CString::new(parent.as_os_str().as_bytes())
            .map_err(|_| anyhow!("--keep-archive {}: a NUL in the name", keep.display()))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // Safety: a valid C string; the result is checked.
        let fd = restart(|| unsafe { libc::open(c.as_ptr(), flags) });
        if fd < 0 {
            let e = io::Error::last_os_error();
            bail!("--keep-archive {}: cannot open its directory: {e}", shown());
        }
        // Safety: a fresh descriptor we own.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = create_excl(&dir, &part_name)
            .map_err(|e| anyhow!("--keep-archive {}: cannot create: {e}", shown()))?;
        let st = file.metadata().map_err(|e| anyhow!("--keep-archive {}: {e}", shown()))?;
        let copy = Kept {
            dir,
            part: part_name,
            name,
            part_path: part.to_path_buf(),
            path: keep.to_path_buf(),
            id: (st.dev(), st.ino()),
        };
        Ok((copy, file))
    }

    /// Whether `name` in the copy's directory is the copy (not followed).
    fn holds_copy(&self, name: &CStr) -> bool {
        stat_at(&self.dir, name).is_ok_and(|st| (st.st_dev, st.st_ino) == self.id)
    }

    /// The run ended well, its writers finished (no member can land any more): the copy,
    /// synced, is renamed to FILE if `FILE.incomplete` still holds it. If it does not (a member
    /// of that name replaced it during the run), the bytes hashed are no longer under any name
    /// (an unlinked file cannot be linked again, linkat(2): ENOENT) and the run fails in one
    /// line, the other file left where it is.
    pub fn place(&self) -> Result<()> {
        let (part, path) = (self.part_path.display(), self.path.display());
        let dirfd = self.dir.as_raw_fd();
        if !self.holds_copy(&self.part) {
            bail!(
                "--keep-archive: {part} is no longer the download (replaced during the run, by a \
                 member of the archive of that name?); the download is not kept"
            );
        }
        // Safety: an open directory fd and C strings.
        let renamed = restart(|| unsafe {
            libc::renameat(dirfd, self.part.as_ptr(), dirfd, self.name.as_ptr())
        });
        if renamed != 0 {
            let e = io::Error::last_os_error();
            bail!("--keep-archive: cannot rename {part} to {path}: {e}");
        }
        if !self.holds_copy(&self.name) {
            bail!("--keep-archive: {path} was replaced as it was named; the download is not kept");
        }
        Ok(())
    }

    /// The download failed its checksum: the copy goes, if `FILE.incomplete` is still the copy
    /// (something else there is left alone).
    pub fn discard(&self) {
        if self.holds_copy(&self.part) {
            // Safety: an open directory fd and a C string.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.part.as_ptr(), 0) };
        }
    }
}

/// `name` in `dir` made anew: whatever is there unlinked (not followed), then created
/// `O_CREAT | O_EXCL | O_NOFOLLOW`, again if something came back in between.
fn create_excl(dir: &OwnedFd, name: &CStr) -> io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let mut tries = 0;
    loop {
        // Safety: an open directory fd and a C string.
        if restart(|| unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }) != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e);
            }
        }
        // Safety: as above; the result is checked.
        let fd = restart(|| unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o666) });
        if fd >= 0 {
            // Safety: a fresh descriptor we own.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() != Some(libc::EEXIST) || tries == CREATE_TRIES {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn set_up() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let keep = d.path().join("k.tar");
        let part = d.path().join("k.tar.incomplete");
        (d, keep, part)
    }

    /// A symlink planted at `FILE.incomplete` is replaced, not written through; a stale copy
    /// is not reused (a hard link to another file keeps that file's bytes).
    #[test]
    fn a_planted_symlink_or_link_is_never_written_through() {
        let (d, keep, part) = set_up();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"victim").unwrap();
        std::os::unix::fs::symlink(&victim, &part).unwrap();
        let (copy, mut f) = Kept::create(&keep, &part).unwrap();
        f.write_all(b"download").unwrap();
        copy.place().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"victim");
        assert_eq!(std::fs::read(&keep).unwrap(), b"download");
        assert!(!part.exists());

        std::fs::hard_link(&victim, &part).unwrap();
        let (copy, mut f) = Kept::create(&keep, &part).unwrap();
        f.write_all(b"again").unwrap();
        copy.place().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"victim");
        assert_eq!(std::fs::read(&keep).unwrap(), b"again");
    }

    /// Replaced during the run: one line, FILE not made, the other file left; a checksum
    /// failure removes only the copy.
    #[test]
    fn a_replaced_copy_is_one_line_and_not_kept() {
        let (_d, keep, part) = set_up();
        let (copy, mut f) = Kept::create(&keep, &part).unwrap();
        f.write_all(b"download").unwrap();
        std::fs::remove_file(&part).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &part).unwrap();
        let e = copy.place().unwrap_err().to_string();
        assert!(e.contains("no longer the download") && !e.contains('\n'), "{e}");
        assert!(!keep.exists());
        assert!(std::fs::symlink_metadata(&part).unwrap().file_type().is_symlink());
        std::fs::remove_file(&part).unwrap();

        let (copy, _f) = Kept::create(&keep, &part).unwrap();
        std::fs::remove_file(&part).unwrap();
        std::fs::write(&part, b"member").unwrap();
        copy.discard();
        assert_eq!(std::fs::read(&part).unwrap(), b"member");
        let (copy, _f) = Kept::create(&keep, &part).unwrap();
        copy.discard();
        assert!(!part.exists());
    }

    #[test]
    fn a_directory_in_the_way_is_one_line() {
        let (_d, keep, part) = set_up();
        std::fs::create_dir(&part).unwrap();
        let e = Kept::create(&keep, &part).err().unwrap().to_string();
        assert!(e.contains("cannot create") && !e.contains('\n'), "{e}");
    }
}
