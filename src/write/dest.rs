//! The destination directory: every path resolution and namespace change in DIR happens here.
//!
//! Paths are resolved through `tree.rs`: one component at a time, relative to the parent's
//! cached fd, never through a symlink. Leaves are created with O_EXCL / O_NOFOLLOW and, when
//! something is in the way, that thing is unlinked first (GNU tar's default), so nothing is ever
//! written through an existing symlink or into an existing hard link's inode. Every metadata
//! change acts on an open fd of the very inode that was created, or with AT_SYMLINK_NOFOLLOW
//! (docs/SECURITY.md, "Metadata without races").
//!
//! Directory permissions and times are deferred as GNU tar defers them (`delayed_set_stat`):
//! a directory member's metadata is applied once a later member lies outside it, after the
//! files in flight beneath it have landed, and only to the directory that was created (checked
//! by inode). The deferred set is the chain of directories above the latest member, so it is
//! bounded by the path length, not by the number of directories in the archive.
//!
//! This file holds `Dest` and its start; `existing.rs` deals with what is in a member's way,
//! `dirs.rs` with directories and their deferred metadata, `leaves.rs` with files, links and
//! nodes, `meta.rs` with the metadata set on each, `errors.rs` with which failures are a
//! member's (the typed `write::outcome::MemberError` every operation on a member returns).

mod dirs;
mod errors;
mod existing;
mod leaves;
mod meta;
#[cfg(test)]
mod tests;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::backup::Backup;
use super::delayed::Delayed;
use super::events::Events;
use super::restart;
use super::tree::{NodeId, Removals, SetgidDirs, Tree};
use crate::policy::admit::FileCount;
use crate::policy::conflict::{OldFiles, Policy};
use crate::policy::safety::SafePath;
use dirs::DeferredDir;
use meta::{MetaOf, fset_xattrs, is_acl_attr, set_meta, set_meta_opath};

use super::outcome::{KeptExisting, MemberError};
pub(super) use existing::{Removed, empty_tree, remove_entry};

/// Mode a directory member is created with; its own mode is applied once it is complete, so a
/// 0555 directory can still be filled.
const DIR_CREATE_MODE: u32 = 0o700;

pub struct Dest {
    tree: Tree,
    /// What a member does with what is at its path (conflict.rs).
    policy: Policy,
    /// Where what is done is said (events.rs).
    events: Arc<dyn Events>,
    /// DIR itself is writable (`outcome::errno_is_members`).
    dir_writable: bool,
    /// Modes are restored exactly (root, or `-p`).
    exact: bool,
    /// The user's umask, applied when not `exact`.
    umask: u32,
    /// Mode of directories created on the way to a member: 0777 minus the user's umask,
    /// as GNU tar makes them.
    implied_dir_mode: u32,
    /// `--max-files`, which implied directories count against too.
    pub(super) files: Arc<FileCount>,
    /// Directory members above the latest member, outermost first.
    open: Vec<DeferredDir>,
    /// Directory members the archive has left, waiting for files in flight beneath them.
    closing: Vec<DeferredDir>,
    /// Bytes of extended attributes `open` and `closing` hold (at most DEFERRED_XATTRS).
    deferred_xattrs: usize,
    /// `--delay-directory-restore`, or a directory member of an incremental archive met
    /// (`Entry::delay_restore`): directories the archive leaves wait for the end of the run
    /// in `delayed` (write/delayed.rs), not in `closing`.
    delay: bool,
    delayed: Delayed,
    /// A record that could not be kept (its file failed), said by the next `settle`.
    delay_failed: Option<io::Error>,
    /// `leave_all` was called: the run has ended, `settle` applies `delayed` last.
    left: bool,
    /// `--backup` (`DestOptions`).
    backup: Option<Arc<Backup>>,
    /// The effective uid and gid new files get (outside set-group-ID directories).
    own_ids: (u32, u32),
    /// `--one-file-system`: `-G` removes nothing on another filesystem than DIR's.
    one_file_system: bool,
    /// A resumed run (`restore_carried`): directories it fills again may have been stamped by
    /// the interrupted run after its resume point (`refill`).
    resumed: bool,
}

/// Most bytes of extended attributes deferred directories may hold. Past it a directory's
/// attributes are set when it is made, through the fd just opened (GNU tar sets them with the
/// rest of its metadata, after its contents; only a default ACL, `system.posix_acl_default`,
/// would differ, and only for files made inside it that have no ACL of their own). Without
/// it, 2,000 nested directories of 256 KiB of attributes each held 550 MB.
const DEFERRED_XATTRS: usize = 16 << 20;

/// Where a member goes: its parent directory and the last component.
pub struct Slot {
    pub dir: Arc<OwnedFd>,
    /// The parent directory's node in the tree.
    pub node: NodeId,
    pub name: CString,
}

impl Slot {
    pub fn dirfd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }
}

/// What `Dest::open` needs besides the directory.
pub struct DestOptions {
    pub old_files: OldFiles,
    /// Where what is done is said (events.rs).
    pub events: Arc<dyn Events>,
    /// Apply modes exactly (root, or `-p`).
    pub exact: bool,
    pub user_umask: u32,
    /// Directory fds to keep open at most (from the fd budget).
    pub dir_fds: usize,
    pub files: Arc<FileCount>,
    /// `--keep-directory-symlink`: a symlink to a directory stays, and paths through it are
    /// followed (inside DIR only, tree.rs).
    pub keep_dir_symlinks: bool,
    /// `-h`: a directory member kept as a symlink gives its directory its metadata.
    pub dereference: bool,
    /// `--overwrite -h`: a file member writes through a symlink at its path, inside DIR.
    pub write_through: bool,
    /// `--delay-directory-restore`: directory metadata waits for the end of the run.
    pub delay_restore: bool,
    /// `--recursive-unlink`: a directory in a member's way is removed with its contents.
    pub recursive_unlink: bool,
    /// `--backup`: what a member replaces is renamed out of its way (backup.rs).
    pub backup: Option<Arc<Backup>>,
    /// `--one-file-system` (`-G`'s removals stay on DIR's filesystem).
    pub one_file_system: bool,
    /// Shared by the Dests of one run over the same DIR (several writer threads): the
    /// directories each removed, for the others to forget (tree.rs).
    pub removals: Option<Arc<Removals>>,
    /// Shared by the Dests of one run: whether a set-group-ID directory was seen (tree.rs).
    pub setgid: Arc<SetgidDirs>,
}

impl Drop for Dest {
    /// A run that failed leaves deferred directories without their metadata (GNU tar's DIR of
    /// a failed run is garbage too), but a directory of the user's that `--no-overwrite-dir`
    /// lent u+wx gets its own mode back: it existed before the run.
    fn drop(&mut self) {
        let mut borrowed: Vec<DeferredDir> =
            self.open.drain(..).chain(self.closing.drain(..)).filter(|d| d.borrowed).collect();
        let mut delayed = std::mem::take(&mut self.delayed);
        let _ = delayed.drain(|r| {
            if r.borrowed {
                borrowed.push(DeferredDir::from(r));
            }
            Ok(())
        });
        for d in &borrowed {
            if let Some(fd) = self.deferred_fd(d) {
                // Safety: fd is an open directory.
                let _ = restart(|| unsafe { libc::fchmod(fd.as_raw_fd(), d.mode) });
            }
        }
    }
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // Safety: fd is open and st points to writable memory of the right size.
    if restart(|| unsafe { libc::fstat(fd, st.as_mut_ptr()) }) != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fstat succeeded, so st is initialised.
    Ok(unsafe { st.assume_init() })
}

/// fstatat of `name` in `dirfd` itself (a symlink is not followed).
pub(super) fn fstatat_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = libc::AT_SYMLINK_NOFOLLOW;
    // Safety: valid dirfd, C string and output buffer.
    if restart(|| unsafe { libc::fstatat(dirfd, name.as_ptr(), st.as_mut_ptr(), flags) }) != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fstatat succeeded.
    Ok(unsafe { st.assume_init() })
}

/// Whether `name` in `dirfd` is a symlink (false when it cannot be told).
fn is_symlink_nofollow(dirfd: RawFd, name: &CStr) -> bool {
    fstatat_nofollow(dirfd, name).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

fn is_dir_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<bool> {
    Ok(fstatat_nofollow(dirfd, name)?.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

pub fn cstr_io(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

impl Dest {
    /// Opens (creating if missing, like `tar -C` with `mkdir -p`) the destination directory.
    pub fn open(dir: &Path, opts: DestOptions) -> Result<Dest> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        let c = CString::new(dir.as_os_str().as_bytes()).context("path contains a NUL byte")?;
        // Safety: `c` is a valid NUL-terminated path; the returned fd is checked below.
        let fd =
            unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("{}: cannot open", dir.display()));
        }
        // Safety: fd is a fresh descriptor we own.
        let root = unsafe { OwnedFd::from_raw_fd(fd) };
        // Safety: a valid fd and C string; faccessat only reads them.
        let writable = unsafe {
            libc::faccessat(
                root.as_raw_fd(),
                c".".as_ptr(),
                libc::W_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        } == 0;
        let mut tree = Tree::new(root, opts.dir_fds, opts.setgid);
        if let Some(r) = &opts.removals {
            tree.share_removals(r.clone());
        }
        if opts.keep_dir_symlinks {
            tree.follow_symlinks();
        }
        // DIR stays open as long as the tree, which the Dest owns with `delayed`.
        let delayed = Delayed::new(tree.root_fd().as_raw_fd());
        let policy = Policy {
            old_files: opts.old_files,
            recursive_unlink: opts.recursive_unlink,
            backup: opts.backup.is_some(),
            keep_dir_symlinks: opts.keep_dir_symlinks,
            dereference: opts.dereference,
            write_through: opts.write_through,
        };
        Ok(Dest {
            policy,
            delay: opts.delay_restore,
            delayed,
            delay_failed: None,
            left: false,
            backup: opts.backup,
            tree,
            events: opts.events,
            dir_writable: writable,
            exact: opts.exact,
            umask: opts.user_umask,
            implied_dir_mode: 0o777 & !opts.user_umask,
            files: opts.files,
            open: Vec::new(),
            closing: Vec::new(),
            deferred_xattrs: 0,
            // Safety: geteuid and getegid have no preconditions.
            own_ids: unsafe { (libc::geteuid(), libc::getegid()) },
            one_file_system: opts.one_file_system,
            resumed: false,
        })
    }

    pub fn root_fd(&self) -> RawFd {
        self.tree.root_fd().as_raw_fd()
    }

    /// Whether something other than a directory (a symlink, a file) is at `path` now, not
    /// followed. Where an earlier part of `path` is a symlink, fstatat follows it: then the
    /// member that asks fails on its own walk anyway, and the answer only decides a wait.
    pub fn holds_non_directory(&self, path: &SafePath) -> bool {
        self.type_at(path).is_some_and(|t| t != libc::S_IFDIR)
    }

    /// The file type (`S_IFMT` bits) of what is at `path` from DIR, not followed; None when
    /// nothing is (or it cannot be looked at).
    pub(super) fn type_at(&self, path: &SafePath) -> Option<libc::mode_t> {
        let p = CString::new(path.as_path().as_os_str().as_bytes()).ok()?;
        fstatat_nofollow(self.root_fd(), &p).ok().map(|st| st.st_mode & libc::S_IFMT)
    }

    /// Where what is done is said.
    pub fn events(&self) -> &dyn Events {
        &*self.events
    }

    /// `--one-file-system`.
    pub(super) fn one_file_system(&self) -> bool {
        self.one_file_system
    }

    /// -k or --skip-old-files: what exists stays as it is (a directory's metadata too).
    pub fn keeps_old(&self) -> bool {
        self.policy.old_files != OldFiles::Replace
    }

    pub fn tree(&mut self) -> &mut Tree {
        &mut self.tree
    }

    /// Final permission bits for a member's `mode`: exact as root or with `-p`; otherwise,
    /// like GNU tar without `-p`, minus the umask and without set-id and sticky bits.
    pub fn mode(&self, mode: u32) -> u32 {
        if self.exact { mode & 0o7777 } else { mode & 0o777 & !self.umask }
    }

    /// The parent directory of `path` (created as needed) and its last component.
    pub fn slot(&mut self, path: &SafePath) -> Result<Slot, MemberError> {
        let (node, dir) = self.dir(path.parent_components(), true)?;
        let name = cstr_io(path.file_name())?;
        Ok(Slot { dir, node, name })
    }
}
