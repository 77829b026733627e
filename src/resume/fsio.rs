//! The state file on disk, and what the protocol asks of the filesystem: the lock on DIR,
//! reading a state with the checks an input needs, writing one after everything it covers is
//! durable (write, syncfs, rename, fsync DIR), and looking at probes without leaving DIR.

use std::ffi::{CStr, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::decide::Found;
use super::state::{STATE_MAX, STATE_NAME, State, TMP_NAME};
use crate::mark::hook::{self, Event};
use crate::policy::safety::SafePath;
use crate::write::restart;

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in our names")
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// DIR opened as a directory, not following a symlink at its last component (None when it
/// does not exist yet: there is no state then).
pub fn open_dir(dest: &Path) -> io::Result<Option<OwnedFd>> {
    let c = CString::new(dest.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // Safety: a valid C string; the result is checked.
    let fd = restart(|| unsafe { libc::open(c.as_ptr(), flags) });
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    // Safety: a fresh descriptor we own.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Takes the run's lock on DIR (`flock`, released when the process dies, SIGKILL included):
/// false when another fastuntar holds it.
pub fn lock(dir: &OwnedFd) -> io::Result<bool> {
    // Safety: an open fd; flock takes no pointers.
    if restart(|| unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// DIR's filesystem id (statvfs `f_fsid`) and inode.
pub fn dir_id(dir: &OwnedFd) -> io::Result<(u64, u64)> {
    // Safety: an open fd and zeroed structs the calls fill.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstatvfs(dir.as_raw_fd(), &mut vfs) })?;
    let st = fstat(dir.as_raw_fd())?;
    Ok((vfs.f_fsid as u64, st.st_ino))
}

pub(super) fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // Safety: an open fd and a zeroed stat the call fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

/// The state file in DIR, read as an input: opened without following a symlink and without
/// blocking (a FIFO planted there), it must be a regular file of ours with one link that
/// neither group nor others may write (whoever could write it could make a resumed run skip
/// members and keep files they planted), of at most STATE_MAX bytes; then decoded and checked
/// (state.rs).
pub fn read_state(dir: &OwnedFd) -> Found {
    let name = cstr(STATE_NAME);
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // Safety: an open directory fd and a C string; the result is checked.
    let fd = restart(|| unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) });
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Found::Absent,
            Some(libc::ELOOP) => Found::Unusable(format!("{STATE_NAME} is a symlink")),
            _ => Found::Unusable(format!("{STATE_NAME} cannot be read: {e}")),
        };
    }
    // Safety: a fresh descriptor we own.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    let st = match fstat(file.as_raw_fd()) {
        Ok(st) => st,
        Err(e) => return Found::Unusable(format!("{STATE_NAME} cannot be read: {e}")),
    };
    // Safety: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink != 1 {
        return Found::Unusable(format!("{STATE_NAME} is not a regular file of one link"));
    }
    if st.st_uid != euid || st.st_mode & 0o022 != 0 {
        return Found::Unusable(format!(
            "{STATE_NAME} is not ours (uid {}, mode {:o})",
            st.st_uid,
            st.st_mode & 0o7777
        ));
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(STATE_MAX as u64 + 1).read_to_end(&mut bytes) {
        return Found::Unusable(format!("{STATE_NAME} cannot be read: {e}"));
    }
    match State::decode(&bytes) {
        Ok(s) => Found::Valid(Box::new(s)),
        Err(bad) => {
            Found::Unusable(format!("{STATE_NAME} is not a usable resume state: {}", bad.0))
        }
    }
}

/// Removes the state file and a temporary one left by a killed run, and makes that durable
/// (a state of an earlier run must not outlive this one's first writes).
pub fn remove_state(dir: &OwnedFd) -> io::Result<()> {
    if unlink_state(dir)? {
        // Safety: an open fd.
        cvt(restart(|| unsafe { libc::fsync(dir.as_raw_fd()) }))?;
    }
    Ok(())
}

/// Unlinks the state and its temporary file: whether there was either.
fn unlink_state(dir: &OwnedFd) -> io::Result<bool> {
    let mut removed = false;
    for name in [STATE_NAME, TMP_NAME] {
        let c = cstr(name);
        // Safety: an open directory fd and a C string.
        if restart(|| unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }) == 0 {
            removed = true;
        } else {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e);
            }
        }
    }
    Ok(removed)
}

/// The run completed: the state goes, and DIR keeps the modification time it had (the
/// archive's `./` member stamped it in the final pass; the unlink would move it on, where GNU
/// tar's tree has the archived time). Not synced: were the unlink lost to a power cut, the
/// rerun would resume at the last point and extract the rest again, which is right too.
pub fn remove_state_at_end(dir: &OwnedFd) -> io::Result<()> {
    let fd = dir.as_raw_fd();
    // Safety: an open fd and a stat buffer of the right size.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    if unlink_state(dir)? {
        let times = [
            libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
            libc::timespec { tv_sec: st.st_mtime, tv_nsec: st.st_mtime_nsec },
        ];
        // Safety: an open fd and two timespecs. Best effort: a DIR not ours keeps the time
        // the unlink gave it.
        unsafe { libc::futimens(fd, times.as_ptr()) };
    }
    Ok(())
}

/// Removes a temporary state a killed run left (it was never renamed: not a state).
pub fn remove_state_tmp(dir: &OwnedFd) -> io::Result<()> {
    let c = cstr(TMP_NAME);
    // Safety: an open directory fd and a C string.
    if restart(|| unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }) != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
    Ok(())
}

/// syncfs on each descriptor: DIR's filesystem, and those mounted beneath DIR.
pub fn sync_all(fds: &[OwnedFd]) -> io::Result<()> {
    for fd in fds {
        // Safety: an open fd.
        cvt(restart(|| unsafe { libc::syncfs(fd.as_raw_fd()) }))?;
    }
    Ok(())
}

/// What a state write failed at: the syncfs (the extraction's own data may not be on disk:
/// fatal) or the state file itself (no resume point this time).
pub enum WriteError {
    Sync(io::Error),
    State(io::Error),
}

/// Writes `bytes` as the new state: into the temporary file, then syncfs of every filesystem
/// under DIR (everything the resume point covers, and the file's bytes, reach the disk), then
/// the rename over the old state, then fsync of DIR. A power cut at any moment leaves either
/// the old state or the new one, each behind what is on disk (docs/DESIGN.md, "Resuming").
pub fn write_state(dir: &OwnedFd, syncs: &[OwnedFd], bytes: &[u8]) -> Result<(), WriteError> {
    let tmp = cstr(TMP_NAME);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // Safety: an open directory fd and a C string; the result is checked.
    let fd = restart(|| unsafe { libc::openat(dir.as_raw_fd(), tmp.as_ptr(), flags, 0o600) });
    if fd < 0 {
        return Err(WriteError::State(io::Error::last_os_error()));
    }
    // Safety: a fresh descriptor we own.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes).map_err(WriteError::State)?;
    drop(file);
    hook::at(Event::Written);
    sync_all(syncs).map_err(WriteError::Sync)?;
    hook::at(Event::Synced);
    let name = cstr(STATE_NAME);
    // Safety: an open directory fd and C strings.
    let renamed = restart(|| unsafe {
        libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr())
    });
    cvt(renamed).map_err(WriteError::State)?;
    hook::at(Event::Renamed);
    // Safety: an open fd.
    cvt(restart(|| unsafe { libc::fsync(dir.as_raw_fd()) })).map_err(WriteError::State)
}

/// What is at `path` beneath DIR, not followed: each directory on the way is opened
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (tree.rs), so a path from a state file never looks
/// outside DIR or through a symlink.
pub fn stat_beneath(dir: &OwnedFd, path: &SafePath) -> io::Result<libc::stat> {
    let mut parent: Option<OwnedFd> = None;
    for c in path.parent_components() {
        let at = parent.as_ref().map_or(dir.as_raw_fd(), |p| p.as_raw_fd());
        let name = CString::new(c).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        parent = Some(crate::write::tree::open_dir_beneath(at, &name)?);
    }
    let at = parent.as_ref().map_or(dir.as_raw_fd(), |p| p.as_raw_fd());
    let name =
        CString::new(path.file_name()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    fstatat_nofollow(at, &name)
}

fn fstatat_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<libc::stat> {
    // Safety: an open directory fd, a C string and a zeroed stat the call fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW;
    cvt(restart(|| unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, flags) }))?;
    Ok(st)
}

/// The filesystems to sync for DIR: DIR's own, and every one mounted beneath it (a validator
/// may mount `accounts/` on another disk; syncfs covers one filesystem). From
/// /proc/self/mountinfo; a mount point that cannot be opened is left out (it is then not
/// covered, as it would not be by a syncfs of DIR either).
pub fn filesystems(dest: &Path, dir: &OwnedFd) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    // Safety: dup of an open fd; the result is checked.
    let own = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if own >= 0 {
        // Safety: a fresh descriptor we own.
        fds.push(unsafe { OwnedFd::from_raw_fd(own) });
    }
    let Ok(real) = std::fs::canonicalize(dest) else { return fds };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return fds };
    for point in mounts_beneath(&info, &real) {
        if let Ok(Some(fd)) = open_dir(&point) {
            fds.push(fd);
        }
    }
    fds
}

/// The mount points in `mountinfo` (its fifth field, octal escapes undone) strictly beneath
/// `dir`.
fn mounts_beneath(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let unescape = |s: &str| -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let octal = b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
            match (b[i], octal) {
                (b'\\', Some(d)) => {
                    out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                    i += 4;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        out
    };
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(p))))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_beneath_dir() {
        let info = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 8:2 / /ledger/accounts rw - ext4 /dev/sdb rw
31 22 8:3 / /ledger2 rw - ext4 /dev/sdc rw
32 22 8:4 / /ledger/with\\040space rw - ext4 /dev/sdd rw
";
        let got = mounts_beneath(info, Path::new("/ledger"));
        assert_eq!(got, [PathBuf::from("/ledger/accounts"), PathBuf::from("/ledger/with space")]);
    }

    #[test]
    fn a_hostile_state_file_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir(d.path()).unwrap().unwrap();
        assert!(matches!(read_state(&dir), Found::Absent));
        // A symlink to a file elsewhere: not followed.
        std::os::unix::fs::symlink("/etc/passwd", d.path().join(STATE_NAME)).unwrap();
        assert!(matches!(read_state(&dir), Found::Unusable(w) if w.contains("symlink")));
        std::fs::remove_file(d.path().join(STATE_NAME)).unwrap();
        // A FIFO: not waited on.
        let c = CString::new(d.path().join(STATE_NAME).as_os_str().as_bytes()).unwrap();
        // Safety: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(read_state(&dir), Found::Unusable(_)));
        std::fs::remove_file(d.path().join(STATE_NAME)).unwrap();
        // Writable by others, or with two links.
        std::fs::write(d.path().join(STATE_NAME), b"x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let p = std::fs::Permissions::from_mode(0o666);
        std::fs::set_permissions(d.path().join(STATE_NAME), p).unwrap();
        assert!(matches!(read_state(&dir), Found::Unusable(w) if w.contains("not ours")));
        let p = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(d.path().join(STATE_NAME), p).unwrap();
        std::fs::hard_link(d.path().join(STATE_NAME), d.path().join("other")).unwrap();
        assert!(matches!(read_state(&dir), Found::Unusable(w) if w.contains("one link")));
        std::fs::remove_file(d.path().join("other")).unwrap();
        // Ours, but not a state.
        assert!(matches!(read_state(&dir), Found::Unusable(w) if w.contains("not a usable")));
        // Written, read back; removed.
        let s = super::super::state::tests::sample();
        let syncs = filesystems(d.path(), &dir);
        assert!(write_state(&dir, &syncs, &s.encode()).is_ok());
        assert!(matches!(read_state(&dir), Found::Valid(v) if *v == s));
        remove_state(&dir).unwrap();
        assert!(matches!(read_state(&dir), Found::Absent));
    }

    #[test]
    fn probes_stay_beneath_dir() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        std::fs::write(d.path().join("a/f"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("up")).unwrap();
        let dir = open_dir(d.path()).unwrap().unwrap();
        let p = |s: &str| super::super::state::safe_path(s.as_bytes()).unwrap();
        assert_eq!(stat_beneath(&dir, &p("a/f")).unwrap().st_size, 1);
        assert!(stat_beneath(&dir, &p("up/passwd")).is_err(), "through a symlink");
        assert!(stat_beneath(&dir, &p("a/missing")).is_err());
    }
}
