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

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use super::backup::Backup;
use super::delayed::Delayed;
use super::events::{Event, Events};
use super::restart;
use super::tree::{Create, NodeId, Removals, SetgidDirs, Tree, open_dir_beneath};
use crate::archive::Timestamp;
use crate::archive::{Xattr, xattr_bytes};
use crate::mark::CarriedDir;
use crate::mark::hook;
use crate::mark::record::Record;
use crate::plan::{Entry, Node};
use crate::policy::admit::FileCount;
use crate::policy::conflict::{self, Decision, Member, OldFiles, Policy, There};
use crate::policy::safety::SafePath;

/// Mode a directory member is created with; its own mode is applied once it is complete, so a
/// 0555 directory can still be filled.
const DIR_CREATE_MODE: u32 = 0o700;

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

fn owner_refused(uid: u32, gid: u32, source: io::Error) -> io::Error {
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
fn is_member_error(e: &io::Error, dir_writable: bool) -> bool {
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

/// A directory member whose owner, mode and mtime wait to be applied. Only the sanitised path
/// is kept (a raw name can be a megabyte of `/`), and the node keeps the directory's fd handy.
struct DeferredDir {
    node: NodeId,
    path: SafePath,
    /// The final permission bits (after `Dest::mode`, or the directory's own with
    /// `--no-overwrite-dir`).
    mode: u32,
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
    borrowed: bool,
}

impl From<Record> for DeferredDir {
    /// A delayed directory read back: no node (its path is walked), closed at the end.
    fn from(r: Record) -> DeferredDir {
        let path = SafePath(std::path::PathBuf::from(std::ffi::OsString::from_vec(r.path)));
        DeferredDir {
            node: super::tree::NONE,
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

pub struct Dest {
    tree: Tree,
    /// What a member does with what is at its path (conflict.rs).
    policy: Policy,
    /// Where what is done is said (events.rs).
    events: Arc<dyn Events>,
    /// DIR itself is writable (`is_member_error`).
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

    /// Where what is done is said.
    pub fn events(&self) -> &dyn Events {
        &*self.events
    }

    /// An error that concerns one member only: report it and go on. Anything else is fatal.
    pub fn is_member_error(&self, e: &io::Error) -> bool {
        is_member_error(e, self.dir_writable)
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

    /// Directory `comps` (relative to DIR), opening and, if `create`, making every missing
    /// component on the way (each counted against `--max-files`). Fails with ELOOP/ENOTDIR
    /// when a component is a symlink or not a directory.
    pub(super) fn dir<'a, I>(
        &mut self,
        comps: I,
        create: bool,
    ) -> io::Result<(NodeId, Arc<OwnedFd>)>
    where
        I: IntoIterator<Item = &'a [u8]>,
        I::IntoIter: Clone,
    {
        let mode = if create { Create::With(self.implied_dir_mode) } else { Create::No };
        self.tree.dir(comps, mode, &self.files)
    }

    /// The parent directory of `path` (created as needed) and its last component.
    pub fn slot(&mut self, path: &SafePath) -> io::Result<Slot> {
        let (node, dir) = self.dir(path.parent_components(), true)?;
        let name = cstr_io(path.file_name())?;
        Ok(Slot { dir, node, name })
    }

    /// Clears the way for a new non-directory at `slot`, whose creation found the name taken,
    /// as `conflict::decide` says: with -k refuses (EEXIST), with --skip-old-files passes
    /// (`KeptExisting`), with --keep-newer-files passes what is as new as the member or newer,
    /// otherwise backs up or unlinks what is there (an empty directory is removed; a non-empty
    /// one is an error, unless --recursive-unlink).
    pub fn remove_existing(&mut self, entry: &Entry, slot: &Slot) -> io::Result<()> {
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
    ) -> io::Result<()> {
        if backup && self.backed_up(entry, slot.dirfd(), &slot.name)? {
            return Ok(());
        }
        match remove_entry(slot.dirfd(), &slot.name)? {
            Removed::Entry => return Ok(()),
            Removed::Dir => {}
            Removed::Full(e) if !recursive => return Err(e),
            Removed::Full(_) => empty_tree(slot.dirfd(), &slot.name)?,
        }
        self.tree.detach(entry.path.components());
        Ok(())
    }

    /// Makes the directory `name` in `dirfd` (DIR's `p`) anew where one was just removed: the
    /// tree forgets the old one first.
    fn remake_dir(&mut self, dirfd: RawFd, name: &CStr, p: &SafePath) -> io::Result<()> {
        self.tree.detach(p.components());
        // Safety: valid dirfd and C string.
        if restart(|| unsafe { libc::mkdirat(dirfd, name.as_ptr(), DIR_CREATE_MODE) }) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `--backup`: renames what is at `name` (the member's path) to its backup name, and says
    /// so (`Event::Renamed`); whether it did.
    fn backed_up(&self, entry: &Entry, dirfd: RawFd, name: &CStr) -> io::Result<bool> {
        let Some(backup) = &self.backup else { return Ok(false) };
        let Some(new) = backup.keep(dirfd, name)? else { return Ok(false) };
        let path = entry.path.as_path();
        let to = path.with_file_name(std::ffi::OsStr::from_bytes(&new));
        let (from, to) = (path.as_os_str().as_bytes(), to.as_os_str().as_bytes());
        self.events.event(Event::Renamed { from, to });
        Ok(true)
    }

    /// The error for a member that leaves what is at its path as it is: -k's EEXIST, or
    /// `KeptExisting` for --skip-old-files and --keep-newer-files.
    fn kept(&self, entry: &Entry, decision: Decision) -> io::Error {
        let kept = match decision {
            Decision::Refuse => return io::Error::from_raw_os_error(libc::EEXIST),
            Decision::Skip => KeptExisting::Skipped,
            // GNU tar names the path as it extracts it, a leading `./` kept.
            Decision::KeepNewer => KeptExisting::Newer { path: entry.shown_path() },
            other => unreachable!("{other:?} keeps nothing"),
        };
        io::Error::new(io::ErrorKind::AlreadyExists, kept)
    }

    /// `--keep-newer-files`: whether what is at `slot` now (fstatat of the name in the held
    /// parent directory, a symlink not followed) is a non-directory whose mtime is the same as
    /// the member's archived one or later (GNU tar's `file_newer_p`; a directory never is).
    /// Nothing there: false. Asked by the writer that found the name taken, when it is about to
    /// replace it, so the entry compared is the one replaced.
    fn newer_there(&self, entry: &Entry, dirfd: RawFd, name: &CStr) -> io::Result<bool> {
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
    fn keep_if_newer(&self, entry: &Entry, dirfd: RawFd, name: &CStr) -> io::Result<()> {
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
    ) -> io::Result<T> {
        let slot = self.slot(&entry.path)?;
        self.create_at(entry, &slot, create)
    }

    /// `create_with` at a slot the caller already resolved (it needs the slot afterwards).
    fn create_at<T>(
        &mut self,
        entry: &Entry,
        slot: &Slot,
        mut create: impl FnMut(RawFd, &CStr) -> io::Result<T>,
    ) -> io::Result<T> {
        let tree = &mut self.tree;
        match tree.retry_emfile(|| create(slot.dirfd(), &slot.name)) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.remove_existing(entry, slot)?;
                self.tree.retry_emfile(|| create(slot.dirfd(), &slot.name))
            }
            other => other,
        }
    }

    /// Creates (or keeps, if a directory is already there) the directory member and defers its
    /// metadata until the archive has left it.
    pub fn mkdir(&mut self, entry: &Entry) -> io::Result<()> {
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
                    Err(e) => return Err(e),
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
    fn make_dir(&mut self, entry: &Entry) -> io::Result<Option<DirMade>> {
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
            return Err(e);
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
    ) -> io::Result<Option<DirMade>> {
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
                    return Err(io::Error::last_os_error());
                }
                // Safety: as above.
                if restart(|| unsafe { libc::mkdirat(dirfd, name, DIR_CREATE_MODE) }) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Decision::Remake { recursive } => {
                // GNU tar's -U and --recursive-unlink: the directory there goes (when empty,
                // or with everything in it) and is made anew; a non-empty one stays under -U
                // alone, and the member fails (ENOTEMPTY), its metadata unset.
                match remove_entry(dirfd, &slot.name)? {
                    Removed::Full(e) if !recursive => return Err(e),
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
                        _ => Err(e),
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

    /// The delayed directories, last first (GNU tar's `extract_finish`), each stamped as a
    /// closing one is.
    fn apply_delayed(&mut self) -> Result<()> {
        let mut delayed = std::mem::take(&mut self.delayed);
        let applied = delayed.drain_newest_first(|r| {
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
    fn deferred_fd(&mut self, d: &DeferredDir) -> Option<Arc<OwnedFd>> {
        // A delayed directory's node is gone (`super::tree::NONE`): its path is walked.
        let cached = (d.node != super::tree::NONE).then(|| self.tree.cached_fd(d.node)).flatten();
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
fn refill_mode(mode: u32, root: bool) -> Option<u32> {
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

impl Drop for Dest {
    /// A run that failed leaves deferred directories without their metadata (GNU tar's DIR of
    /// a failed run is garbage too), but a directory of the user's that `--no-overwrite-dir`
    /// lent u+wx gets its own mode back: it existed before the run.
    fn drop(&mut self) {
        let mut borrowed: Vec<DeferredDir> =
            self.open.drain(..).chain(self.closing.drain(..)).filter(|d| d.borrowed).collect();
        let mut delayed = std::mem::take(&mut self.delayed);
        let _ = delayed.drain_newest_first(|r| {
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

/// The metadata to apply to one inode.
pub struct MetaOf<'a> {
    /// Final permission bits (after `Dest::mode`).
    pub mode: u32,
    /// None: the time is left as it is (`-m`).
    pub mtime: Option<Timestamp>,
    pub owner: Option<(u32, u32)>,
    /// `--xattrs`: the member's name (for messages) and the attributes to set.
    pub xattrs: Option<(&'a str, &'a [Xattr])>,
}

impl<'a> MetaOf<'a> {
    /// What `entry` asks for, with the final permission bits `mode`.
    pub fn of(entry: &'a Entry, mode: u32) -> MetaOf<'a> {
        MetaOf {
            mode,
            mtime: entry.mtime,
            owner: entry.owner,
            xattrs: entry.xattrs.as_deref().map(|x| (entry.name.as_str(), x)),
        }
    }
}

/// Owner (if asked), extended attributes, mode (if `set_mode`) and mtime (unless `-m`) of an
/// open file or directory, in that order: chown clears set-id bits and `security.capability`,
/// so the mode and attributes come after it; a write clears the capability too, so this runs
/// once the data is complete; attributes go before the mode, as a user.* attribute needs write
/// permission on the inode (a 0444 file of ours refuses it to a user who is not root).
/// An attribute that is not set is reported by `set_xattrs`, never fatal. Each step is tried
/// whatever the one before it did, as GNU tar does (a directory of someone else's refuses the
/// mode and the time; a FUSE filesystem without chmod still takes the time), and the first
/// failure is returned. Where the owner could not be set, the set-id bits are not: the file
/// belongs to whoever extracts it.
pub fn set_meta(fd: RawFd, m: &MetaOf, set_mode: bool, events: &dyn Events) -> io::Result<()> {
    let owner = match m.owner {
        // Safety: fd is open.
        Some((uid, gid)) => cvt(restart(|| unsafe { libc::fchown(fd, uid, gid) }))
            .map_err(|e| owner_refused(uid, gid, e)),
        None => Ok(()),
    };
    // ACLs after the mode (a mode set later would reset their mask), as GNU tar sets them;
    // other attributes before it.
    let has_acl = m.xattrs.is_some_and(|(_, xs)| xs.iter().any(|x| is_acl_attr(&x.name)));
    let only = |xs: &[Xattr], acl: bool| -> Vec<Xattr> {
        xs.iter().filter(|x| is_acl_attr(&x.name) == acl).cloned().collect()
    };
    match m.xattrs {
        Some((member, xs)) if has_acl => fset_xattrs(fd, member, &only(xs, false), events),
        Some((member, xs)) => fset_xattrs(fd, member, xs, events),
        None => {}
    }
    let mode = match (set_mode, &owner) {
        (false, _) => Ok(()),
        // Safety (both): fd is open.
        (true, Ok(())) => cvt(restart(|| unsafe { libc::fchmod(fd, m.mode) })),
        (true, Err(_)) => {
            let mode = m.mode & !(libc::S_ISUID | libc::S_ISGID);
            cvt(restart(|| unsafe { libc::fchmod(fd, mode) }))
        }
    };
    if has_acl && let Some((member, xs)) = m.xattrs {
        fset_xattrs(fd, member, &only(xs, true), events);
    }
    let time = match m.mtime {
        Some(mtime) => {
            let times = timespecs(mtime);
            // Safety: fd is open; `times` is a valid two-element array.
            cvt(restart(|| unsafe { libc::futimens(fd, times.as_ptr()) }))
        }
        None => Ok(()),
    };
    owner.and(mode).and(time)
}

/// Whether an attribute is a POSIX ACL (`--acls`, acl.rs).
fn is_acl_attr(name: &[u8]) -> bool {
    name.starts_with(b"system.posix_acl_")
}

/// `set_xattrs` through `fd`, an open file or directory of ours.
fn fset_xattrs(fd: RawFd, member: &str, xattrs: &[Xattr], events: &dyn Events) {
    set_xattrs(member, xattrs, events, |name, value| {
        // Safety: fd is open; name is a C string, value a valid slice.
        cvt(restart(|| unsafe {
            libc::fsetxattr(fd, name.as_ptr(), value.as_ptr().cast(), value.len(), 0)
        }))
    });
}

/// Sets each attribute with `set` (an fsetxattr on a descriptor of our own: never a path
/// that could be swapped for a symlink, docs/SECURITY.md), in archive order (a name given twice:
/// the last value stands, as in GNU tar). What the kernel or the filesystem refuses (ENOTSUP
/// where the filesystem has no attributes or not that namespace, EPERM for trusted.* without
/// CAP_SYS_ADMIN or user.* on a symlink, ENOSPC when they do not fit the inode, ...) makes one
/// warning for the member, naming the first refusal (`--warning=no-xattr-write` silences it);
/// the exit status stays, as in GNU tar 1.34, which warns once per attribute.
pub fn set_xattrs(
    member: &str,
    xattrs: &[Xattr],
    events: &dyn Events,
    set: impl Fn(&CStr, &[u8]) -> io::Result<()>,
) {
    let mut first: Option<(String, String)> = None;
    let mut more = 0;
    for x in xattrs {
        let result = match &x.value {
            Some(value) => {
                cstr_io(&x.name).and_then(|name| set(&name, value)).map_err(|e| e.to_string())
            }
            None => Err(format!(
                "too large to be kept (over {} KiB, or past the member's {} KiB of attributes)",
                crate::archive::MAX_XATTR_VALUE / 1024,
                crate::archive::MAX_XATTR_TOTAL / 1024
            )),
        };
        if let Err(e) = result {
            if first.is_none() {
                first = Some((crate::report::printable(&x.name), e));
            } else {
                more += 1;
            }
        }
    }
    if let Some((name, error)) = first {
        events.event(Event::XattrsNotSet { member, name: &name, error: &error, more });
    }
}

/// atime left as is (UTIME_OMIT: creation just set it to now), mtime from the archive.
pub fn timespecs(mtime: Timestamp) -> [libc::timespec; 2] {
    [
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        libc::timespec {
            tv_sec: mtime.secs as libc::time_t,
            tv_nsec: mtime.nanos.min(999_999_999) as _,
        },
    ]
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

/// What `remove_entry` did with a name.
pub(super) enum Removed {
    /// Nothing was there, or a non-directory that is gone now.
    Entry,
    /// An empty directory, gone now.
    Dir,
    /// A directory with something in it, left as it is (rmdir's error).
    Full(io::Error),
}

/// Removes `name` in `dirfd` the way a member clears its path (GNU tar's `remove_any_file`
/// without recursion): unlink, and where that finds a directory, rmdir.
pub(super) fn remove_entry(dirfd: RawFd, name: &CStr) -> io::Result<Removed> {
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
pub(super) fn empty_tree(dirfd: RawFd, name: &CStr) -> io::Result<()> {
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
        Ok(super::names_in(fd.as_raw_fd())?.into_iter().map(|n| (n, false)).collect())
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

/// Leaf creators shared by both backends (they are rare enough to stay synchronous).
impl Dest {
    /// Creates a regular file for writing; `flags` may add O_DIRECT. Set-id bits and owner are
    /// applied at the end (`finish_file`).
    pub fn create_file(&mut self, entry: &Entry, flags: i32) -> io::Result<OwnedFd> {
        let mode = self.mode(entry.mode) & 0o777;
        self.create_with(entry, |dirfd, name| {
            let f = libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOFOLLOW
                | libc::O_CLOEXEC
                | flags;
            // Safety: valid dirfd and C string.
            let fd = restart(|| unsafe { libc::openat(dirfd, name.as_ptr(), f, mode) });
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // Safety: fresh fd we own.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        })
    }

    /// A file the input ended in (the run is failing): it keeps the data that arrived, and
    /// only its owner may read or write it, as GNU tar leaves one (it creates files owner-only
    /// and sets the member's mode once the data is complete). Nothing else of the member's
    /// metadata is applied. Best effort: the run's error says what happened.
    pub fn abandon_file(&self, fd: RawFd, entry: &Entry) {
        let mode = self.mode(entry.mode) & 0o700;
        // Safety: fd is an open file of ours; fchmod takes no pointers.
        restart(|| unsafe { libc::fchmod(fd, mode as libc::mode_t) });
    }

    /// Owner, set-id bits and mtime of a file whose data is complete, through its fd.
    pub fn finish_file(&self, fd: RawFd, entry: &Entry) -> io::Result<()> {
        let mode = self.mode(entry.mode);
        // The create mode already holds the permission bits; only set-id and sticky bits need
        // an explicit chmod (after the chown, which would clear set-id bits; without them it
        // leaves the mode as it is).
        let set_mode = mode & 0o7000 != 0;
        let mut meta = MetaOf::of(entry, mode);
        // A new file already belongs to its writer, unless a set-group-ID directory gave it
        // another group (tree.rs `SetgidDirs`).
        if meta.owner == Some(self.own_ids) && !self.tree.setgid().seen() {
            meta.owner = None;
        }
        set_meta(fd, &meta, set_mode, &*self.events)
    }

    /// A symlink: created with symlinkat; owner, attributes and mtime (unless `-m`) set
    /// through an O_PATH fd of the link (a symlink has no mode of its own on Linux).
    pub fn symlink(&mut self, entry: &Entry, target: &[u8]) -> io::Result<()> {
        let target = cstr_io(target)?;
        let slot = self.slot(&entry.path)?;
        self.create_at(entry, &slot, |dirfd, name| {
            // Safety: valid C strings and dirfd.
            cvt(restart(|| unsafe { libc::symlinkat(target.as_ptr(), dirfd, name.as_ptr()) }))
        })?;
        if entry.owner.is_none() && entry.mtime.is_none() && entry.xattrs.is_none() {
            return Ok(());
        }
        self.set_meta_made(&slot, libc::S_IFLNK, &MetaOf::of(entry, 0), false)
    }

    pub fn hardlink(&mut self, entry: &Entry, target: &SafePath) -> io::Result<()> {
        if *target == entry.path {
            // `tar -cf A f f` stores the second `f` as a hard link to itself. GNU tar's
            // extract_link counts such a link done when its target is the file already there
            // (linkat's EEXIST, the same inode on both sides), and fails it when nothing is.
            let (_, dir) = self.dir(target.parent_components(), false)?;
            let name = cstr_io(target.file_name())?;
            // GNU tar checks --keep-newer-files before it tries the link, so a newer file
            // there is said to be kept.
            self.keep_if_newer(entry, dir.as_raw_fd(), &name)?;
            return match is_dir_nofollow(dir.as_raw_fd(), &name) {
                Ok(_) => Ok(()),
                // Our own refusal, so a member error (`is_member_error`), like ENOENT.
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "hard link to itself, and nothing is there",
                )),
                Err(e) => Err(e),
            };
        }
        let (_, tdir) = self.dir(target.parent_components(), false)?;
        let tname = cstr_io(target.file_name())?;
        self.create_with(entry, |dirfd, name| {
            let tdir = tdir.as_raw_fd();
            // Safety: valid dirfds and C strings; flags 0 links a symlink itself, not its target.
            cvt(restart(|| unsafe { libc::linkat(tdir, tname.as_ptr(), dirfd, name.as_ptr(), 0) }))
        })
    }

    /// A FIFO: created with mknodat, then its metadata is applied through an O_PATH fd of the
    /// node at that name, checked to be a FIFO: a name swapped for a symlink (or anything
    /// else) after the mknod is never followed or changed.
    /// A FIFO or a device node (mknodat; a device needs CAP_MKNOD, as root: otherwise EPERM,
    /// and the member is reported and skipped).
    pub fn mknod(&mut self, entry: &Entry, node: Node) -> io::Result<()> {
        let mode = self.mode(entry.mode);
        let (kind, dev) = match node {
            Node::Fifo => (libc::S_IFIFO, 0),
            Node::Char { major, minor } => (libc::S_IFCHR, device_number(major, minor)?),
            Node::Block { major, minor } => (libc::S_IFBLK, device_number(major, minor)?),
        };
        let slot = self.slot(&entry.path)?;
        self.create_at(entry, &slot, |dirfd, name| {
            let how = kind | (mode & 0o777);
            // Safety: valid dirfd and C string.
            cvt(restart(|| unsafe { libc::mknodat(dirfd, name.as_ptr(), how, dev) }))
        })?;
        let set_mode = mode & 0o7000 != 0;
        if !set_mode && entry.mtime.is_none() && entry.xattrs.is_none() {
            // Nothing to apply (`-m`): mknodat gave the permission bits.
            return Ok(());
        }
        self.set_meta_made(&slot, kind, &MetaOf::of(entry, mode), set_mode)
    }

    /// `set_meta_opath` for the FIFO or symlink just made at `slot`, held by an O_PATH fd and
    /// checked to be the one made (`made_as`): by name, an owner, attribute, mode or time
    /// could land on whatever was renamed over it in between (a hard link of a file from
    /// elsewhere, by a user who can write in this directory).
    fn set_meta_made(
        &mut self,
        slot: &Slot,
        kind: libc::mode_t,
        meta: &MetaOf,
        set_mode: bool,
    ) -> io::Result<()> {
        let node = self.tree.retry_emfile(|| open_path_nofollow(slot.dirfd(), &slot.name))?;
        made_as(&node, kind)?;
        set_meta_opath(&node, meta, set_mode, &*self.events)
            .map_err(|e| io::Error::new(e.kind(), MetadataFailed(e)))
    }
}

/// The device number of `major`, `minor` (glibc's makedev), or EINVAL for numbers it cannot
/// hold (a header's octal fields reach 2^21, base-256 ones further).
fn device_number(major: u64, minor: u64) -> io::Result<libc::dev_t> {
    let (Ok(ma), Ok(mi)) = (u32::try_from(major), u32::try_from(minor)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    Ok(libc::makedev(ma, mi))
}

/// An O_PATH fd of `name` in `dirfd` itself (a symlink is not followed): it names the inode
/// without opening it, so no open side effect (a FIFO blocking, a device) can happen.
fn open_path_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // Safety: valid dirfd and C string.
    let fd = restart(|| unsafe { libc::openat(dirfd, name.as_ptr(), flags) });
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `set_meta` for an O_PATH fd of a FIFO or a symlink, which fchown/fchmod/futimens and
/// fsetxattr refuse (EBADF): owner and times through the fd itself (AT_EMPTY_PATH), mode and
/// attributes through the fd's /proc/self/fd entry, which names exactly the inode the fd holds
/// (a magic link, not a path that can be swapped).
fn set_meta_opath(fd: &OwnedFd, m: &MetaOf, set_mode: bool, events: &dyn Events) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // Each step is tried whatever the one before did, as in `set_meta` (a symlink whose owner
    // cannot be set still gets its time), and the first failure is returned.
    let owner = match m.owner {
        // Safety: valid fd and an empty C string, which AT_EMPTY_PATH applies to the fd itself.
        Some((uid, gid)) => cvt(restart(|| unsafe {
            libc::fchownat(raw, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH)
        }))
        .map_err(|e| owner_refused(uid, gid, e)),
        None => Ok(()),
    };
    let proc = CString::new(format!("/proc/self/fd/{raw}")).expect("no NUL in a number");
    if let Some((member, xattrs)) = m.xattrs {
        // fsetxattr refuses an O_PATH fd; setxattr through the magic link reaches the very
        // inode `fd` holds, a symlink itself included (the magic link is not a symlink to
        // follow further).
        set_xattrs(member, xattrs, events, |name, value| {
            // Safety: valid C strings and value slice.
            cvt(restart(|| unsafe {
                libc::setxattr(proc.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0)
            }))
        });
    }
    let mode = match (set_mode, &owner) {
        (false, _) => Ok(()),
        // Where the owner could not be set, neither are the set-id bits (as in `set_meta`).
        (true, o) => {
            let mode = if o.is_ok() { m.mode } else { m.mode & !(libc::S_ISUID | libc::S_ISGID) };
            // Safety: a valid C string; the magic link resolves to the inode `fd` holds.
            cvt(restart(|| unsafe { libc::chmod(proc.as_ptr(), mode) }))
        }
    };
    let time = match m.mtime {
        None => Ok(()),
        Some(mtime) => {
            let times = timespecs(mtime);
            // Safety: valid fd, an empty C string (AT_EMPTY_PATH: the fd itself) and a
            // two-element timespec array.
            let r = restart(|| unsafe {
                libc::utimensat(raw, c"".as_ptr(), times.as_ptr(), libc::AT_EMPTY_PATH)
            });
            if r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                cvt(r)
            } else {
                // A kernel that does not take AT_EMPTY_PATH here: through the magic link.
                // Safety: a valid C string and a two-element timespec array.
                cvt(restart(|| unsafe {
                    libc::utimensat(libc::AT_FDCWD, proc.as_ptr(), times.as_ptr(), 0)
                }))
            }
        }
    };
    owner.and(mode).and(time)
}

/// Checks that `node` (an O_PATH fd of a name just created) is what was created: of type
/// `kind` and with no other name (a hard link of some other inode renamed over it would have
/// two, or be of another type).
fn made_as(node: &OwnedFd, kind: libc::mode_t) -> io::Result<()> {
    let st = fstat(node.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT != kind || st.st_nlink != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "replaced by something else while being created; left alone",
        ));
    }
    Ok(())
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_gives_a_user_write_and_search_back() {
        assert_eq!(refill_mode(0o555, false), Some(0o755));
        assert_eq!(refill_mode(0o444, false), Some(0o744));
        assert_eq!(refill_mode(0o2550, false), Some(0o2750));
        assert_eq!(refill_mode(0o700, false), None);
        assert_eq!(refill_mode(0o755, false), None);
        assert_eq!(refill_mode(0o555, true), None);
    }

    /// What was just made, and only that, passes: a name that now holds a second link to
    /// another inode (renamed over the new one) or another type is left alone.
    #[test]
    fn made_as_refuses_a_swapped_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::os::unix::fs::symlink("t", d.join("link")).unwrap();
        std::fs::write(d.join("file"), b"x").unwrap();
        std::os::unix::fs::symlink("t", d.join("twice")).unwrap();
        std::fs::hard_link(d.join("twice"), d.join("twice2")).unwrap();
        let dirfd = open_path_nofollow(libc::AT_FDCWD, &cstr_io(d.as_os_str().as_bytes()).unwrap())
            .unwrap();
        let node = |name: &str| open_path_nofollow(dirfd.as_raw_fd(), &CString::new(name).unwrap());
        assert!(made_as(&node("link").unwrap(), libc::S_IFLNK).is_ok());
        assert!(made_as(&node("file").unwrap(), libc::S_IFLNK).is_err());
        assert!(made_as(&node("twice").unwrap(), libc::S_IFLNK).is_err());
    }

    fn dest(dir: &Path) -> Dest {
        dest_with(
            dir,
            OldFiles::Replace,
            None,
            Arc::new(super::super::events::Said::new(false, Default::default(), Arc::default())),
        )
    }

    fn dest_with(
        dir: &Path,
        old_files: OldFiles,
        backup: Option<Backup>,
        events: Arc<dyn Events>,
    ) -> Dest {
        let opts = DestOptions {
            old_files,
            events,
            exact: true,
            user_umask: 0o022,
            dir_fds: 8,
            files: FileCount::new(None),
            keep_dir_symlinks: false,
            dereference: false,
            delay_restore: false,
            recursive_unlink: false,
            backup: backup.map(Arc::new),
            one_file_system: false,
            removals: None,
            setgid: Arc::default(),
        };
        Dest::open(dir, opts).unwrap()
    }

    /// The writer says what it did through its sink, and prints nothing itself: `--backup`'s
    /// rename, what `--skip-old-files` and `--keep-newer-files` kept, and a member it could
    /// not restore (`member_failed`), which the sink counts for the exit status.
    #[test]
    fn what_is_done_goes_to_the_sink() {
        use super::super::events::Kept;
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "old").unwrap();
        let kept = Arc::new(Kept::default());
        let backup = Backup::new("simple", "~").unwrap();
        let mut d = dest_with(t.path(), OldFiles::Replace, backup, kept.clone());
        drop(d.create_file(&entry("f", 0o644, 0), 0).unwrap());
        assert_eq!(std::fs::read(t.path().join("f~")).unwrap(), b"old");

        for (old, secs) in [(OldFiles::Skip, 0), (OldFiles::KeepNewer, 0)] {
            let mut d = dest_with(t.path(), old, None, kept.clone());
            let e = entry("f", 0o644, secs);
            let err = d.create_file(&e, 0).unwrap_err();
            super::super::member_failed(&d, &e, "cannot create", err).unwrap();
        }
        let gone = io::Error::from_raw_os_error(libc::ENOENT);
        super::super::member_failed(&d, &entry("g", 0o644, 0), "cannot create", gone).unwrap();
        let said = kept.0.lock().unwrap().clone();
        let not_restored = "not restored g: cannot create: No such file or directory (os error 2)";
        assert_eq!(said, ["renamed f f~", "skipped f", "kept newer f", not_restored]);
    }

    /// Attributes the kernel refuses are an event to the sink, one per member naming the
    /// first refusal (escaped) and counting the rest; none when every one is set.
    #[test]
    fn attributes_not_set_go_to_the_sink() {
        use super::super::events::Kept;
        let kept = Kept::default();
        let x = |name: &[u8], value: Option<&[u8]>| Xattr {
            name: name.to_vec(),
            value: value.map(|v| v.to_vec()),
        };
        let refuse_b = |name: &CStr, _: &[u8]| match name.to_bytes().starts_with(b"user.b") {
            true => Err(io::Error::from_raw_os_error(libc::ENOTSUP)),
            false => Ok(()),
        };
        let all = [x(b"user.a", Some(b"1")), x(b"user.b\n", Some(b"2")), x(b"user.c", None)];
        set_xattrs("m", &all, &kept, refuse_b);
        set_xattrs("n", &all[..1], &kept, refuse_b);
        let said = kept.0.lock().unwrap().clone();
        let enotsup = io::Error::from_raw_os_error(libc::ENOTSUP).to_string();
        assert_eq!(said, [format!("xattrs not set m user.b\\n: {enotsup} +1")]);
    }

    fn entry(path: &str, mode: u32, secs: i64) -> Entry {
        Entry {
            name: path.to_string(),
            path: SafePath(path.into()),
            mode,
            mtime: Some(Timestamp { secs, nanos: 0 }),
            archived_mtime: Timestamp { secs, nanos: 0 },
            owner: None,
            offset: 0,
            xattrs: None,
            delay_restore: false,
        }
    }

    #[test]
    fn deferred_dirs_are_bounded_by_depth() {
        let t = tempfile::tempdir().unwrap();
        let mut d = dest(t.path());
        for i in 0..2000 {
            let e = entry(&format!("d{i}"), 0o755, 1000);
            d.enter(&e.path);
            d.mkdir(&e).unwrap();
            d.settle().unwrap();
            assert!(d.open.len() + d.closing.len() <= 2);
        }
        d.leave_all();
        d.settle().unwrap();
        assert_eq!(d.closing(), 0);
        let m = std::fs::metadata(t.path().join("d7")).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::mtime(&m), 1000);
        // The tree keeps only cached fds and DIR.
        assert!(d.tree.len() <= 1 + 8);
    }

    #[test]
    fn a_member_inside_a_closing_dir_waits_for_it() {
        let t = tempfile::tempdir().unwrap();
        let mut d = dest(t.path());
        let a = entry("a", 0o755, 1000);
        d.enter(&a.path);
        d.mkdir(&a).unwrap();
        let b = entry("b", 0o755, 2000);
        assert!(!d.enter(&b.path));
        assert!(d.enter(&entry("a/x", 0o644, 0).path));
        d.settle().unwrap();
        assert!(!d.enter(&entry("a/x", 0o644, 0).path));
    }
}
