//! What is already at a member's path, dealt with as policy/conflict.rs decides: removed
//! (GNU tar's default), kept, backed up, or kept when newer; the leaf then created with
//! O_EXCL, retried once what was in the way is gone.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::*;
use crate::plan::Entry;
use crate::policy::conflict::{self, Decision, Member, There};
use crate::policy::safety::SafePath;
use crate::write::events::Event;
use crate::write::restart;
use crate::write::tree::open_dir_beneath;

impl Dest {
    /// Clears the way for a new non-directory at `slot`, whose creation found the name taken,
    /// as `conflict::decide` says: with -k refuses (EEXIST), with --skip-old-files passes
    /// (`KeptExisting`), with --keep-newer-files passes what is as new as the member or newer,
    /// otherwise backs up or unlinks what is there (an empty directory is removed; a non-empty
    /// one is an error, unless --recursive-unlink).
    pub fn remove_existing(&mut self, entry: &Entry, slot: &Slot) -> Result<(), MemberError> {
        let newer =
            self.policy.compares_age() && self.newer_there(entry, slot.dirfd(), &slot.name)?;
        let there = There::Other { newer, dir_link: false };
        match conflict::decide(&self.policy, Member::Other, there) {
            Decision::Replace { backup, recursive } => self.clear(entry, slot, backup, recursive),
            kept => Err(self.kept(entry, kept)),
        }
    }

    /// Moves what is at `slot` out of the member's way: renamed to its backup name (`backup`,
    /// where backup.rs finds one), else removed, a directory only when empty unless
    /// `recursive`.
    fn clear(
        &mut self,
        entry: &Entry,
        slot: &Slot,
        backup: bool,
        recursive: bool,
    ) -> Result<(), MemberError> {
        if backup && self.backed_up(entry, slot.dirfd(), &slot.name)? {
            return Ok(());
        }
        match remove_entry(slot.dirfd(), &slot.name)? {
            Removed::Entry => return Ok(()),
            Removed::Dir => {}
            Removed::Full(e) if !recursive => return Err(e.into()),
            Removed::Full(_) => empty_tree(slot.dirfd(), &slot.name)?,
        }
        self.tree.detach(entry.path.components());
        Ok(())
    }

    /// Makes the directory `name` in `dirfd` (DIR's `p`) anew where one was just removed: the
    /// tree forgets the old one first.
    pub(super) fn remake_dir(&mut self, dirfd: RawFd, name: &CStr, p: &SafePath) -> io::Result<()> {
        self.tree.detach(p.components());
        // Safety: valid dirfd and C string.
        if restart(|| unsafe { libc::mkdirat(dirfd, name.as_ptr(), DIR_CREATE_MODE) }) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `--backup`: renames what is at `name` (the member's path) to its backup name, and says
    /// so (`Event::Renamed`); whether it did.
    pub(super) fn backed_up(&self, entry: &Entry, dirfd: RawFd, name: &CStr) -> io::Result<bool> {
        let Some(backup) = &self.backup else { return Ok(false) };
        let Some(new) = backup.keep(dirfd, name)? else { return Ok(false) };
        let path = entry.path.as_path();
        let to = path.with_file_name(std::ffi::OsStr::from_bytes(&new));
        let (from, to) = (path.as_os_str().as_bytes(), to.as_os_str().as_bytes());
        self.events.event(Event::Renamed { from, to });
        Ok(true)
    }

    /// The outcome of a member that leaves what is at its path as it is: -k's EEXIST, or
    /// `KeptExisting` for --skip-old-files and --keep-newer-files.
    pub(super) fn kept(&self, entry: &Entry, decision: Decision) -> MemberError {
        MemberError::Kept(match decision {
            Decision::Refuse => return io::Error::from_raw_os_error(libc::EEXIST).into(),
            Decision::Skip => KeptExisting::Skipped,
            // GNU tar names the path as it extracts it, a leading `./` kept.
            Decision::KeepNewer => KeptExisting::Newer { path: entry.shown_path() },
            other => unreachable!("{other:?} keeps nothing"),
        })
    }

    /// `--keep-newer-files`: whether what is at `slot` now (fstatat of the name in the held
    /// parent directory, a symlink not followed) is a non-directory whose mtime is the same as
    /// the member's archived one or later (GNU tar's `file_newer_p`; a directory never is).
    /// Nothing there: false. Asked by the writer that found the name taken, when it is about to
    /// replace it, so the entry compared is the one replaced.
    pub(super) fn newer_there(&self, entry: &Entry, dirfd: RawFd, name: &CStr) -> io::Result<bool> {
        let st = match fstatat_nofollow(dirfd, name) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Ok(false);
        }
        let m = entry.archived_mtime;
        Ok((st.st_mtime, st.st_mtime_nsec) >= (m.secs as libc::time_t, m.nanos as _))
    }

    /// With `--keep-newer-files`, `KeptExisting::Newer` when `newer_there`.
    pub(super) fn keep_if_newer(
        &self,
        entry: &Entry,
        dirfd: RawFd,
        name: &CStr,
    ) -> Result<(), MemberError> {
        if self.policy.compares_age() && self.newer_there(entry, dirfd, name)? {
            return Err(self.kept(entry, Decision::KeepNewer));
        }
        Ok(())
    }

    /// Runs `create` at the member's slot; when it fails with EEXIST, clears the way and tries
    /// once more. `create` gets the parent fd and the leaf name.
    pub fn create_with<T>(
        &mut self,
        entry: &Entry,
        create: impl FnMut(RawFd, &CStr) -> io::Result<T>,
    ) -> Result<T, MemberError> {
        let slot = self.slot(&entry.path)?;
        self.create_at(entry, &slot, create)
    }

    /// `create_with` at a slot the caller already resolved (it needs the slot afterwards).
    pub(super) fn create_at<T>(
        &mut self,
        entry: &Entry,
        slot: &Slot,
        mut create: impl FnMut(RawFd, &CStr) -> io::Result<T>,
    ) -> Result<T, MemberError> {
        let tree = &mut self.tree;
        match tree.retry_emfile(|| create(slot.dirfd(), &slot.name)) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.remove_existing(entry, slot)?;
                Ok(self.tree.retry_emfile(|| create(slot.dirfd(), &slot.name))?)
            }
            other => Ok(other?),
        }
    }
}

/// What `remove_entry` did with a name.
pub(in crate::write) enum Removed {
    /// Nothing was there, or a non-directory that is gone now.
    Entry,
    /// An empty directory, gone now.
    Dir,
    /// A directory with something in it, left as it is (rmdir's error).
    Full(io::Error),
}

/// Removes `name` in `dirfd` the way a member clears its path (GNU tar's `remove_any_file`
/// without recursion): unlink, and where that finds a directory, rmdir.
pub(in crate::write) fn remove_entry(dirfd: RawFd, name: &CStr) -> io::Result<Removed> {
    // Safety (both): valid dirfd and C string.
    if restart(|| unsafe { libc::unlinkat(dirfd, name.as_ptr(), 0) }) == 0 {
        return Ok(Removed::Entry);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EISDIR | libc::EPERM) => {}
        Some(libc::ENOENT) => return Ok(Removed::Entry),
        _ => return Err(e),
    }
    if restart(|| unsafe { libc::unlinkat(dirfd, name.as_ptr(), libc::AT_REMOVEDIR) }) == 0 {
        return Ok(Removed::Dir);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOTEMPTY | libc::EEXIST) => Ok(Removed::Full(e)),
        _ => Err(e),
    }
}

/// `--recursive-unlink`: removes everything in the directory `name` in `dirfd` (which
/// `remove_entry` found not empty), then the directory. Depth first with a stack of open
/// directories (no recursion: any depth), each opened relative to its parent without
/// following a symlink (`open_dir_beneath`), so nothing outside the tree is touched; a
/// symlink inside is removed, not followed. A directory that is still not empty after its
/// entries were removed (something kept adding to it) fails with ENOTEMPTY.
pub(in crate::write) fn empty_tree(dirfd: RawFd, name: &CStr) -> io::Result<()> {
    /// Whether `name` is gone (removed now, or by someone else meanwhile).
    fn gone(dirfd: RawFd, name: &CStr) -> io::Result<bool> {
        match remove_entry(dirfd, name) {
            Ok(Removed::Full(_)) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(true),
            Err(e) => Err(e),
        }
    }
    let listed = |fd: &OwnedFd| -> io::Result<Vec<(CString, bool)>> {
        Ok(crate::write::names_in(fd.as_raw_fd())?.into_iter().map(|n| (n, false)).collect())
    };
    let top = open_dir_beneath(dirfd, name)?;
    let names = listed(&top)?;
    let mut stack: Vec<(OwnedFd, Vec<(CString, bool)>)> = vec![(top, names)];
    while let Some((fd, names)) = stack.last_mut() {
        let Some((n, emptied)) = names.pop() else {
            stack.pop();
            continue;
        };
        if gone(fd.as_raw_fd(), &n)? {
            continue;
        }
        if emptied {
            return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
        }
        let sub = open_dir_beneath(fd.as_raw_fd(), &n)?;
        // Back on the list, to be removed once what is in it has gone.
        names.push((n, true));
        let inner = listed(&sub)?;
        stack.push((sub, inner));
    }
    if gone(dirfd, name)? { Ok(()) } else { Err(io::Error::from_raw_os_error(libc::ENOTEMPTY)) }
}
