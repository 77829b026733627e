//! Directories: made (and the implied ones on the way), entered, their metadata deferred as
//! GNU tar defers it (`delayed_set_stat`) and stamped once the members beneath have landed;
//! the waiting ones carried across a resume point and filled again.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use super::*;
use crate::archive::Timestamp;
use crate::archive::{Xattr, xattr_bytes};
use crate::mark::CarriedDir;
use crate::mark::hook;
use crate::mark::record::Record;
use crate::plan::Entry;
use crate::policy::conflict::{self, Decision, Member, There};
use crate::policy::safety::SafePath;
use crate::write::events::Event;
use crate::write::restart;
use crate::write::tree::{Create, NodeId};

/// A directory member whose owner, mode and mtime wait to be applied. Only the sanitised path
/// is kept (a raw name can be a megabyte of `/`), and the node keeps the directory's fd handy.
pub(super) struct DeferredDir {
    node: NodeId,
    path: SafePath,
    /// The final permission bits (after `Dest::mode`, or the directory's own with
    /// `--no-overwrite-dir`).
    pub(super) mode: u32,
    mtime: Option<Timestamp>,
    owner: Option<(u32, u32)>,
    /// `--xattrs`: set with the rest of its metadata, through its fd.
    xattrs: Option<Arc<[Xattr]>>,
    /// The member name, for messages about its attributes.
    name: String,
    dev: u64,
    ino: u64,
    /// Archive offset of the member that moved it to `closing` (u64::MAX at the end): with
    /// several writer threads, every member before that one must have landed first.
    closed_at: u64,
    /// `--no-overwrite-dir` as a user who is not root: an existing directory of theirs got
    /// u+wx to be filled, and `mode` must come back even if the run fails (`Drop for Dest`).
    pub(super) borrowed: bool,
}

impl From<Record> for DeferredDir {
    /// A delayed directory read back: no node (its path is walked), closed at the end.
    fn from(r: Record) -> DeferredDir {
        let path = SafePath(std::path::PathBuf::from(std::ffi::OsString::from_vec(r.path)));
        DeferredDir {
            node: crate::write::tree::NONE,
            path,
            mode: r.mode,
            mtime: r.mtime,
            owner: r.owner,
            xattrs: r.xattrs,
            name: r.name,
            dev: r.dev,
            ino: r.ino,
            closed_at: u64::MAX,
            borrowed: r.borrowed,
        }
    }
}

/// How a directory member's directory is there (`Dest::make_dir`).
enum DirMade {
    /// Made by this member.
    New,
    /// There before, and the member's: it gets the member's metadata (`keep_mode`:
    /// `--no-overwrite-dir`, its mode and owner stay).
    There { keep_mode: bool },
}

impl Dest {
    /// Directory `comps` (relative to DIR), opening and, if `create`, making every missing
    /// component on the way (each counted against `--max-files`). Fails with ELOOP/ENOTDIR
    /// when a component is a symlink or not a directory.
    pub(in crate::write) fn dir<'a, I>(
        &mut self,
        comps: I,
        create: bool,
    ) -> Result<(NodeId, Arc<OwnedFd>), MemberError>
    where
        I: IntoIterator<Item = &'a [u8]>,
        I::IntoIter: Clone,
    {
        let mode = if create { Create::With(self.implied_dir_mode) } else { Create::No };
        self.tree.dir(comps, mode, &self.files)
    }

    /// Creates (or keeps, if a directory is already there) the directory member and defers its
    /// metadata until the archive has left it.
    pub fn mkdir(&mut self, entry: &Entry) -> Result<(), MemberError> {
        // GNU tar's `prepare_to_extract`: a dumpdir member turns delayed restore on for the
        // rest of the run (after this member's `enter`, as there).
        self.delay |= entry.delay_restore;
        let p = &entry.path;
        let (existed, keep_mode) = match self.make_dir(entry)? {
            None => return Ok(()),
            Some(DirMade::New) => (false, false),
            Some(DirMade::There { keep_mode }) => (true, keep_mode),
        };
        let mut mode = self.mode(entry.mode);
        let mut owner = entry.owner;
        let (node, fd) = self.dir(p.components(), false)?;
        let st = fstat(fd.as_raw_fd())?;
        self.tree.setgid().note_mode(st.st_mode);
        if existed && self.resumed && !keep_mode {
            // The interrupted run made it after the resume point, and may have stamped it.
            self.refill(&fd, st.st_mode)?;
        }
        let mut borrowed = false;
        if keep_mode {
            // GNU tar 1.34's --no-overwrite-dir: the directory keeps its mode and owner (the
            // member's mtime is set). A user who is not root gets u+wx meanwhile, to fill it;
            // on a directory not theirs (EPERM) it stays as it is, as in GNU tar.
            mode = st.st_mode & 0o7777;
            owner = None;
            // Safety: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 && mode & 0o300 != 0o300 {
                // Safety: fd is an open directory.
                match cvt(restart(|| unsafe { libc::fchmod(fd.as_raw_fd(), mode | 0o300) })) {
                    Ok(()) => borrowed = true,
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let mut xattrs = entry.xattrs.clone();
        if let Some(xs) = xattrs.as_deref() {
            let bytes = xattr_bytes(xs);
            if self.deferred_xattrs + bytes > DEFERRED_XATTRS {
                // ACLs stay deferred (a default ACL set now would be inherited by the files
                // made in the directory, which GNU tar does not let happen).
                let (acls, now): (Vec<Xattr>, Vec<Xattr>) =
                    xs.iter().cloned().partition(|x| is_acl_attr(&x.name));
                fset_xattrs(fd.as_raw_fd(), &entry.name, &now, &*self.events);
                xattrs = (!acls.is_empty()).then(|| acls.into());
                self.deferred_xattrs += xattrs.as_deref().map_or(0, xattr_bytes);
            } else {
                self.deferred_xattrs += bytes;
            }
        }
        // The name is only for messages about attributes.
        let name = if xattrs.is_some() { entry.name.clone() } else { String::new() };
        // Files made in it after its metadata is applied (an archive that comes back to it)
        // take its group.
        self.tree.setgid().note_mode(mode);
        self.tree.pin(node);
        self.open.push(DeferredDir {
            node,
            path: p.clone(),
            mode,
            mtime: entry.mtime,
            owner,
            xattrs,
            name,
            dev: st.st_dev,
            ino: st.st_ino,
            closed_at: u64::MAX,
            borrowed,
        });
        Ok(())
    }

    /// The directory of a directory member: made, or found there and kept, as
    /// `conflict::decide` says. None: the member changes nothing (what is there stays, its
    /// metadata too).
    fn make_dir(&mut self, entry: &Entry) -> Result<Option<DirMade>, MemberError> {
        let p = &entry.path;
        // DIR itself is always there.
        if p.is_root() {
            return self.carry_out_dir(entry, None, There::Dest);
        }
        let slot = self.slot(p)?;
        // Safety: valid dirfd and C string.
        let r =
            restart(|| unsafe { libc::mkdirat(slot.dirfd(), slot.name.as_ptr(), DIR_CREATE_MODE) });
        if r == 0 {
            return Ok(Some(DirMade::New));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e.into());
        }
        let there = if is_dir_nofollow(slot.dirfd(), &slot.name)? {
            There::Dir
        } else {
            // `--keep-directory-symlink`: a symlink that leads to a directory inside DIR.
            let dir_link = self.policy.keep_dir_symlinks
                && is_symlink_nofollow(slot.dirfd(), &slot.name)
                && self.dir(p.components(), false).is_ok();
            let newer =
                self.policy.compares_age() && self.newer_there(entry, slot.dirfd(), &slot.name)?;
            There::Other { newer, dir_link }
        };
        self.carry_out_dir(entry, Some(&slot), there)
    }

    /// Carries out `conflict::decide` for the directory member `entry` finding `there` at its
    /// `slot` (None: DIR itself).
    fn carry_out_dir(
        &mut self,
        entry: &Entry,
        slot: Option<&Slot>,
        there: There,
    ) -> Result<Option<DirMade>, MemberError> {
        let decision = conflict::decide(&self.policy, Member::Dir, there);
        let Some(slot) = slot else {
            // DIR itself: never made, removed or replaced.
            return match decision {
                Decision::Leave => Ok(None),
                Decision::Reuse { keep_mode } => Ok(Some(DirMade::There { keep_mode })),
                kept => Err(self.kept(entry, kept)),
            };
        };
        let (dirfd, name) = (slot.dirfd(), slot.name.as_ptr());
        match decision {
            Decision::Create => {}
            Decision::Refuse | Decision::Skip | Decision::KeepNewer => {
                return Err(self.kept(entry, decision));
            }
            // `--keep-directory-symlink` without `-h`, or a directory -k or
            // --keep-newer-files keeps: GNU tar 1.34 sets no mode, owner or time.
            Decision::Leave => return Ok(None),
            Decision::Reuse { keep_mode } => return Ok(Some(DirMade::There { keep_mode })),
            Decision::Replace { backup, .. } => {
                // A non-directory in the way.
                // Safety: valid dirfd and C string.
                if !(backup && self.backed_up(entry, dirfd, &slot.name)?)
                    && restart(|| unsafe { libc::unlinkat(dirfd, name, 0) }) != 0
                {
                    return Err(io::Error::last_os_error().into());
                }
                // Safety: as above.
                if restart(|| unsafe { libc::mkdirat(dirfd, name, DIR_CREATE_MODE) }) != 0 {
                    return Err(io::Error::last_os_error().into());
                }
            }
            Decision::Remake { recursive } => {
                // GNU tar's -U and --recursive-unlink: the directory there goes (when empty,
                // or with everything in it) and is made anew; a non-empty one stays under -U
                // alone, and the member fails (ENOTEMPTY), its metadata unset.
                match remove_entry(dirfd, &slot.name)? {
                    Removed::Full(e) if !recursive => return Err(e.into()),
                    Removed::Full(_) => empty_tree(dirfd, &slot.name)?,
                    Removed::Entry | Removed::Dir => {}
                }
                self.remake_dir(dirfd, &slot.name, &entry.path)?;
            }
            Decision::RemakeIfEmpty => {
                // GNU tar 1.34 with --keep-newer-files (`maybe_recoverable`): a directory is
                // never newer, so it is removed, which only works when it is empty; then it is
                // made anew, else it stays as it is, its metadata too.
                // Safety: valid dirfd and C string.
                if restart(|| unsafe { libc::unlinkat(dirfd, name, libc::AT_REMOVEDIR) }) != 0 {
                    let e = io::Error::last_os_error();
                    return match e.raw_os_error() {
                        Some(libc::ENOTEMPTY | libc::EEXIST | libc::EBUSY) => Ok(None),
                        _ => Err(e.into()),
                    };
                }
                self.remake_dir(dirfd, &slot.name, &entry.path)?;
            }
        }
        Ok(Some(DirMade::New))
    }

    /// A member at `path` is next: every deferred directory it does not lie beneath is done
    /// (GNU tar's `apply_nonancestor_delayed_set_stat`) and moves to `closing`. Returns true
    /// when `path` is at or beneath a closing directory: its metadata must be applied first
    /// (`settle` once nothing is in flight beneath it), so the member sees the directory as
    /// GNU tar would.
    pub fn enter(&mut self, path: &SafePath) -> bool {
        self.enter_at(path, u64::MAX)
    }

    /// `enter` for the member at archive offset `offset` (see `DeferredDir::closed_at`).
    pub fn enter_at(&mut self, path: &SafePath, offset: u64) -> bool {
        while let Some(top) = self.open.last() {
            if top.path.is_ancestor_of(path) {
                break;
            }
            let mut d = self.open.pop().expect("top exists");
            if self.delay {
                self.delay_dir(d);
                continue;
            }
            d.closed_at = offset;
            self.tree.set_marked(d.node, true);
            self.closing.push(d);
        }
        self.in_closing(path)
    }

    /// `--delay-directory-restore`: the directory waits for the end of the run as a record,
    /// its node no longer pinned (memory stays bounded: write/delayed.rs).
    fn delay_dir(&mut self, d: DeferredDir) {
        self.tree.unpin(d.node);
        self.deferred_xattrs -= d.xattrs.as_deref().map_or(0, xattr_bytes);
        let record = record_of(&d);
        if let Err(e) = self.delayed.push(&record)
            && self.delay_failed.is_none()
        {
            self.delay_failed = Some(e);
        }
    }

    /// The directories whose metadata is still to be applied, as they stand between two
    /// members, for a resume point (src/resume/): `open`, `closing` and the delayed ones, and
    /// whether directories are delayed. None past `cap` bytes of records (a point that large
    /// is not taken; a later one will be).
    pub fn carried(&self, cap: usize) -> Option<(bool, Vec<CarriedDir>)> {
        use crate::mark::DirState;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let waiting = self.open.iter().map(|d| (DirState::Open, d));
        for (state, d) in waiting.chain(self.closing.iter().map(|d| (DirState::Closing, d))) {
            let record = record_of(d);
            bytes += record.path.len() + record.xattrs.as_deref().map_or(0, xattr_bytes) + 64;
            if bytes > cap {
                return None;
            }
            out.push(CarriedDir { state, record });
        }
        if !self.delayed.is_empty() {
            let records = self.delayed.records(cap.saturating_sub(bytes))?;
            out.extend(
                records.into_iter().map(|record| CarriedDir { state: DirState::Delayed, record }),
            );
        }
        Some((self.delay, out))
    }

    /// A resumed run's first step: the directories a resume point carried (`carried`) wait
    /// for their metadata again, as they waited when the interrupted run stopped. One that is
    /// gone or replaced since is left alone, as `deferred_fd` leaves it.
    pub fn restore_carried(&mut self, delay: bool, dirs: Vec<CarriedDir>) -> Result<()> {
        use crate::mark::DirState;
        self.delay |= delay;
        self.resumed = true;
        for c in dirs {
            if c.state == DirState::Delayed {
                self.delayed.push(&c.record).map_err(|e| anyhow!("{e}"))?;
                continue;
            }
            let mut d = DeferredDir::from(c.record);
            let Ok((node, fd)) = self.dir(d.path.components(), false) else { continue };
            self.tree.pin(node);
            d.node = node;
            self.deferred_xattrs += d.xattrs.as_deref().map_or(0, xattr_bytes);
            match c.state {
                DirState::Open => {
                    // Outermost first (`open` is a stack), so a child is reached through a
                    // parent given u+x back.
                    let st = fstat(fd.as_raw_fd())?;
                    self.refill(&fd, st.st_mode)
                        .with_context(|| format!("{}: cannot fill it again", d.path.display()))?;
                    d.closed_at = u64::MAX;
                    self.open.push(d);
                }
                _ => {
                    // Stamped by the next settle: nothing of this run is in flight beneath it.
                    d.closed_at = 0;
                    self.tree.set_marked(node, true);
                    self.closing.push(d);
                }
            }
        }
        Ok(())
    }

    /// A resumed run is about to fill directory `fd` (mode `mode`) again: the interrupted run
    /// may have applied its metadata after the resume point (a 0555 directory stamped, then
    /// the kill, before the next state), which would refuse this user the members it still
    /// has to make there. It gets u+wx back until its own metadata is applied, as it had when
    /// the interrupted run filled it. One not ours (EPERM) stays as it is: its members are
    /// reported, as in any run.
    fn refill(&self, fd: &OwnedFd, mode: u32) -> io::Result<()> {
        let Some(mode) = refill_mode(mode & 0o7777, self.own_ids.0 == 0) else { return Ok(()) };
        // Safety: fd is an open directory; fchmod takes no pointers.
        match cvt(restart(|| unsafe { libc::fchmod(fd.as_raw_fd(), mode) })) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()),
            r => r,
        }
    }

    /// The delayed directories, each once with its last member's metadata and after everything
    /// beneath it (GNU tar's `extract_finish`; write/delayed.rs), stamped as a closing one is.
    fn apply_delayed(&mut self) -> Result<()> {
        let mut delayed = std::mem::take(&mut self.delayed);
        let applied = delayed.drain(|r| {
            let d = DeferredDir::from(r);
            self.deferred_xattrs += d.xattrs.as_deref().map_or(0, xattr_bytes);
            self.apply_dir(&d)
        });
        self.delayed = delayed;
        applied
    }

    /// Whether `path` is at or beneath a directory waiting to be stamped (`closing`).
    fn in_closing(&self, path: &SafePath) -> bool {
        !self.closing.is_empty() && self.tree.marked(path.components())
    }

    /// `--keep-directory-symlink` (or `-h`): a symlink to a directory inside DIR stands for
    /// it, so one file may be reached by two names.
    pub fn keeps_dir_symlinks(&self) -> bool {
        self.policy.keep_dir_symlinks
    }

    /// Whether `path` is at or beneath a directory the archive has left whose metadata is not
    /// applied yet (`closing`), as a user: a hard link to a file there must see the directory
    /// as stamped, as with one writer, since its search permission decides whether the link
    /// is made (a 0644 stamp takes it away, a later 0755 member gives it back). Root is not
    /// refused either way, so nothing waits for it (an archive of many hard links as root
    /// stays as fast as it was).
    pub fn awaits_stamp(&self, path: &SafePath) -> bool {
        self.own_ids.0 != 0 && self.in_closing(path)
    }

    /// The archive has ended (or failed): every deferred directory is done.
    pub fn leave_all(&mut self) {
        hook::final_pass();
        self.left = true;
        while let Some(d) = self.open.pop() {
            if self.delay {
                self.delay_dir(d);
                continue;
            }
            self.tree.set_marked(d.node, true);
            self.closing.push(d);
        }
    }

    /// Directories waiting to be stamped.
    pub fn closing(&self) -> usize {
        self.closing.len()
    }

    /// Applies owner, mode and mtime to every closing directory with no file in flight
    /// beneath it (deepest first: a parent waits while a child does). A directory that was
    /// removed or replaced since is left alone.
    pub fn settle(&mut self) -> Result<()> {
        self.settle_when(|_| true)
    }

    /// `settle`, also waiting for `landed(closed_at)`: every member before the one that closed
    /// the directory has landed (with several writer threads, files in flight are theirs, not
    /// this tree's). `landed` must be monotonic; a parent closes no earlier than its child.
    pub fn settle_when(&mut self, landed: impl Fn(u64) -> bool) -> Result<()> {
        let mut i = 0;
        while i < self.closing.len() {
            if self.tree.busy_at(self.closing[i].node) || !landed(self.closing[i].closed_at) {
                i += 1;
                continue;
            }
            let d = self.closing.remove(i);
            self.tree.set_marked(d.node, false);
            let applied = self.apply_dir(&d);
            self.tree.unpin(d.node);
            applied?;
        }
        if let Some(e) = self.delay_failed.take() {
            return Err(anyhow!("{e}"));
        }
        if self.left && self.closing.is_empty() && !self.delayed.is_empty() {
            self.apply_delayed()?;
        }
        Ok(())
    }

    /// The directory `d` names, if it is still the one deferred (same dev/ino).
    pub(super) fn deferred_fd(&mut self, d: &DeferredDir) -> Option<Arc<OwnedFd>> {
        // A delayed directory's node is gone (`crate::write::tree::NONE`): its path is walked.
        let cached =
            (d.node != crate::write::tree::NONE).then(|| self.tree.cached_fd(d.node)).flatten();
        let fd = match cached {
            Some(fd) => fd,
            None => self.dir(d.path.components(), false).ok()?.1,
        };
        let st = fstat(fd.as_raw_fd()).ok()?;
        (st.st_dev == d.dev && st.st_ino == d.ino).then_some(fd)
    }

    fn apply_dir(&mut self, d: &DeferredDir) -> Result<()> {
        hook::at(hook::Event::Stamp);
        self.deferred_xattrs -= d.xattrs.as_deref().map_or(0, xattr_bytes);
        let Some(fd) = self.deferred_fd(d) else { return Ok(()) };
        let entry = MetaOf {
            mode: d.mode,
            mtime: d.mtime,
            owner: d.owner,
            xattrs: d.xattrs.as_deref().map(|x| (d.name.as_str(), x)),
        };
        match set_meta(fd.as_raw_fd(), &entry, true, &*self.events) {
            // Someone else's directory (`-C /tmp` and an archive of `./`), a filesystem
            // without modes: the member is reported, the run goes on (GNU tar: "Cannot
            // utime", "Cannot change mode").
            Err(e) if self.is_member_error(&e) => {
                // Named as extracted (the member's name is only kept with attributes).
                let path = d.path.display().to_string();
                let path = if path.is_empty() { "." } else { &path };
                let why = format!("cannot set directory metadata: {e}");
                self.events.event(Event::NotRestored { name: path, why: &why });
                Ok(())
            }
            Err(e) => Err(anyhow!("{}: cannot set directory metadata: {e}", d.path.display())),
            Ok(()) => {
                // A user's directory stamped without search permission (0644): a later member
                // beneath it (an archive that comes back to it) is refused, as GNU tar's path
                // lookups refuse it, not made through an fd cached beneath it before.
                if self.own_ids.0 != 0 && d.mode & 0o100 == 0 {
                    self.tree.detach(d.path.components());
                }
                Ok(())
            }
        }
    }
}

/// The mode a directory a resumed run fills again needs meanwhile (`Dest::refill`), when it
/// lacks u+wx: a user who is not root could not make or replace its members. None for root,
/// whose writes no mode stops.
pub(super) fn refill_mode(mode: u32, root: bool) -> Option<u32> {
    (!root && mode & 0o300 != 0o300).then_some(mode | 0o300)
}

/// A deferred directory as a record (write/delayed.rs; a resume point carries these).
fn record_of(d: &DeferredDir) -> Record {
    Record {
        path: d.path.as_path().as_os_str().as_bytes().to_vec(),
        mode: d.mode,
        mtime: d.mtime,
        owner: d.owner,
        dev: d.dev,
        ino: d.ino,
        borrowed: d.borrowed,
        name: d.name.clone(),
        xattrs: d.xattrs.clone(),
    }
}
