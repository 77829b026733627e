//! The state file on disk, and what the protocol asks of the filesystem: the lock on DIR,
//! reading a state with the checks an input needs, writing one after everything it covers is
//! durable (write, syncfs, rename, fsync DIR), and looking at probes without leaving DIR.

use std::ffi::{CStr, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::decide::Found;
use super::state::{STATE_MAX, STATE_NAME, State, TMP_NAME, owner};
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

/// What is at one of the state's names in DIR, looked at as a state file of this DIR's
/// (`look`).
enum Look {
    Absent,
    /// Not a state of this DIR's (why, as the line says it): left alone.
    Foreign(String),
    /// Ours (as far as `state::owner` and the file's owner and mode tell): its first
    /// STATE_MAX + 1 bytes.
    Ours(Vec<u8>),
}

/// Smallest file whose owner block is whole: a temporary state shorter than that is a write
/// cut by a kill before its first bytes, made by a run as the owner and mode say.
const OWNED_HEAD: usize = 16 + 24;

/// Looks at `name` in DIR as a state of the DIR `dest` (filesystem id, inode): opened without
/// following a symlink and without blocking (a FIFO planted there), it must be a regular
/// file of one link, owned by this user and writable by neither group nor others (whoever
/// could write it could make a resumed run skip members and keep files they planted), of this
/// format (`state::owner`), naming `dest` and, from version 3 on, the inode it is. Anything
/// else there is not ours: a member of an archive extracted into DIR, someone else's file, a
/// state copied from another DIR. `cut_ok`: a file too short for its owner block, made as a
/// run makes its temporary file (mode 0600), is ours (a kill right after its create).
fn look(dir: &OwnedFd, name: &str, dest: (u64, u64), cut_ok: bool) -> Look {
    let c = cstr(name);
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // Safety: an open directory fd and a C string; the result is checked.
    let fd = restart(|| unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) });
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Look::Absent,
            Some(libc::ELOOP) => Look::Foreign("a symlink".into()),
            _ => Look::Foreign(format!("it cannot be read: {e}")),
        };
    }
    // Safety: a fresh descriptor we own.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    let st = match fstat(file.as_raw_fd()) {
        Ok(st) => st,
        Err(e) => return Look::Foreign(format!("it cannot be read: {e}")),
    };
    // Safety: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink != 1 {
        return Look::Foreign("not a regular file of one link".into());
    }
    if st.st_uid != euid || st.st_mode & 0o022 != 0 {
        return Look::Foreign(format!(
            "uid {}, mode {:o}: not this user's file",
            st.st_uid,
            st.st_mode & 0o7777
        ));
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(STATE_MAX as u64 + 1).read_to_end(&mut bytes) {
        return Look::Foreign(format!("it cannot be read: {e}"));
    }
    if cut_ok && bytes.len() < OWNED_HEAD && st.st_mode & 0o7777 == 0o600 {
        return Look::Ours(bytes);
    }
    match owner(&bytes) {
        None => Look::Foreign("not a fastuntar resume state".into()),
        Some(o) if o.dest != dest => Look::Foreign("a resume state of another directory".into()),
        Some(o) if o.own_ino.is_some_and(|i| i != st.st_ino) => {
            Look::Foreign("not the file a run wrote there (another inode)".into())
        }
        Some(_) => Look::Ours(bytes),
    }
}

/// The state file in DIR (of identity `dest`), read as an input (`look`), then decoded and
/// checked (state.rs).
pub fn read_state(dir: &OwnedFd, dest: (u64, u64)) -> Found {
    match look(dir, STATE_NAME, dest, false) {
        Look::Absent => Found::Absent,
        Look::Foreign(why) => Found::Foreign(why),
        Look::Ours(bytes) => match State::decode(&bytes) {
            Ok(s) => Found::Valid(Box::new(s)),
            Err(bad) => {
                Found::Unusable(format!("{STATE_NAME} is not a usable resume state: {}", bad.0))
            }
        },
    }
}

/// Why this run cannot write states in DIR although no state stops it: a temporary state's
/// name holds a file that is not ours (left alone, so there is nowhere to write).
pub fn foreign_tmp(dir: &OwnedFd, dest: (u64, u64)) -> Option<String> {
    match look(dir, TMP_NAME, dest, true) {
        Look::Foreign(why) => Some(format!("{TMP_NAME} is there and is not ours ({why})")),
        _ => None,
    }
}

/// Removes the state file and a temporary one left by a killed run, each only if it is ours
/// (`look`), and makes that durable (a state of an earlier run must not outlive this one's
/// first writes).
pub fn remove_state(dir: &OwnedFd, dest: (u64, u64)) -> io::Result<()> {
    if unlink_state(dir, dest)? {
        // Safety: an open fd.
        cvt(restart(|| unsafe { libc::fsync(dir.as_raw_fd()) }))?;
    }
    Ok(())
}

/// Unlinks the state and its temporary file where they are ours: whether there was either.
fn unlink_state(dir: &OwnedFd, dest: (u64, u64)) -> io::Result<bool> {
    let mut removed = false;
    for name in [STATE_NAME, TMP_NAME] {
        if !matches!(look(dir, name, dest, name == TMP_NAME), Look::Ours(_)) {
            continue;
        }
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

/// The run completed: the state goes (if ours), and DIR keeps the modification time it had
/// (the archive's `./` member stamped it in the final pass; the unlink would move it on, where
/// GNU tar's tree has the archived time). Not synced: were the unlink lost to a power cut, the
/// rerun would resume at the last point and extract the rest again, which is right too.
pub fn remove_state_at_end(dir: &OwnedFd, dest: (u64, u64)) -> io::Result<()> {
    let fd = dir.as_raw_fd();
    // Safety: an open fd and a stat buffer of the right size.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    if unlink_state(dir, dest)? {
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

/// Removes a temporary state a killed run left (it was never renamed: not a state), if ours.
pub fn remove_state_tmp(dir: &OwnedFd, dest: (u64, u64)) -> io::Result<()> {
    if !matches!(look(dir, TMP_NAME, dest, true), Look::Ours(_)) {
        return Ok(());
    }
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
///
/// The temporary file is made anew (`O_CREAT | O_EXCL | O_NOFOLLOW`, after unlinking one this
/// run left: only this run writes that name while it holds DIR's lock, and a member of that
/// name stops its states first, `Session::retire_if_ours`), and `state` is written with the
/// inode it got (`State::own_ino`: what makes it this run's, `look`).
pub fn write_state(dir: &OwnedFd, syncs: &[OwnedFd], state: &mut State) -> Result<(), WriteError> {
    let tmp = cstr(TMP_NAME);
    // Safety: an open directory fd and a C string.
    if restart(|| unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) }) != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(WriteError::State(e));
        }
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // Safety: an open directory fd and a C string; the result is checked.
    let fd = restart(|| unsafe { libc::openat(dir.as_raw_fd(), tmp.as_ptr(), flags, 0o600) });
    if fd < 0 {
        return Err(WriteError::State(io::Error::last_os_error()));
    }
    // Safety: a fresh descriptor we own.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    state.own_ino = fstat(file.as_raw_fd()).map_err(WriteError::State)?.st_ino;
    file.write_all(&state.encode()).map_err(WriteError::State)?;
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

    /// What is not a state of this DIR's is left alone and stops nothing (a symlink, a FIFO,
    /// a file writable by others or of two links, a file of another format, another DIR's
    /// state, a copy of ours under another inode); what is ours but not valid is refused.
    #[test]
    fn a_hostile_or_foreign_state_file_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir(d.path()).unwrap().unwrap();
        let id = dir_id(&dir).unwrap();
        let at = d.path().join(STATE_NAME);
        let foreign = |why: &str| match read_state(&dir, id) {
            Found::Foreign(w) => assert!(w.contains(why), "{w}"),
            f => panic!("{why}: {f:?}"),
        };
        assert!(matches!(read_state(&dir, id), Found::Absent));
        // A symlink to a file elsewhere: not followed.
        std::os::unix::fs::symlink("/etc/passwd", &at).unwrap();
        foreign("symlink");
        std::fs::remove_file(&at).unwrap();
        // A FIFO: not waited on.
        let c = CString::new(at.as_os_str().as_bytes()).unwrap();
        // Safety: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        foreign("regular");
        std::fs::remove_file(&at).unwrap();
        // Writable by others, or with two links.
        std::fs::write(&at, b"x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o666)).unwrap();
        foreign("mode 666");
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&at, d.path().join("other")).unwrap();
        foreign("one link");
        std::fs::remove_file(d.path().join("other")).unwrap();
        // Ours by its owner and mode, but not of this format: not a state.
        foreign("not a fastuntar resume state");
        // Written, read back; removed.
        let mut s = super::super::state::tests::sample();
        s.dest = id;
        let syncs = filesystems(d.path(), &dir);
        assert!(write_state(&dir, &syncs, &mut s).is_ok());
        assert!(matches!(read_state(&dir, id), Found::Valid(v) if *v == s));
        // Another DIR's, or copied under another inode: not ours.
        foreign_of(&dir, (id.0, id.1 + 1), "another directory");
        let bytes = std::fs::read(&at).unwrap();
        std::fs::remove_file(&at).unwrap();
        std::fs::write(&at, &bytes).unwrap();
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap();
        foreign("another inode");
        remove_state(&dir, id).unwrap();
        assert!(at.exists(), "a file not ours is not removed");
        std::fs::remove_file(&at).unwrap();
        // Ours and corrupt: refused (Unusable), and removed by --no-resume.
        assert!(write_state(&dir, &syncs, &mut s).is_ok());
        let mut bytes = std::fs::read(&at).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&at)
            .and_then(|mut f| f.write_all(&bytes))
            .unwrap();
        assert!(matches!(read_state(&dir, id), Found::Unusable(w) if w.contains("corrupt")));
        remove_state(&dir, id).unwrap();
        assert!(matches!(read_state(&dir, id), Found::Absent));
        // A temporary file cut before its first bytes is ours; a member's is not.
        let tmp = d.path().join(TMP_NAME);
        std::fs::write(&tmp, b"").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(foreign_tmp(&dir, id), None);
        std::fs::write(&tmp, b"a file of an archive member, of another format than ours").unwrap();
        assert!(foreign_tmp(&dir, id).is_some());
        remove_state_tmp(&dir, id).unwrap();
        assert!(tmp.exists());
    }

    fn foreign_of(dir: &OwnedFd, dest: (u64, u64), why: &str) {
        match read_state(dir, dest) {
            Found::Foreign(w) => assert!(w.contains(why), "{w}"),
            f => panic!("{why}: {f:?}"),
        }
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
