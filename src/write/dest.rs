//! The destination directory: every path resolution and namespace change in DIR happens here.
//!
//! Directories are opened one component at a time, relative to their parent's cached fd, with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (O_NOFOLLOW | O_DIRECTORY where openat2 is
//! missing). A symlink anywhere in a member's parent path, whether the archive made it or it was
//! there before, therefore fails the member instead of being followed; the kernel enforces it,
//! not a string check. Leaves are created with O_EXCL / O_NOFOLLOW and, when something is in the
//! way, that thing is unlinked first (GNU tar's default), so nothing is ever written through an
//! existing symlink or into an existing hard link's inode.
//!
//! Directory permissions and times are applied at the end (`finish_dirs`), deepest first, after
//! their contents, on the directory that was created (checked by inode).

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::plan::{Entry, SafePath, Timestamp};

/// Most directory fds kept open. Snapshots have a handful of directories; archives with many
/// more get their cache cleared when it fills (reopening costs one openat2 per component).
const MAX_CACHED_DIRS: usize = 4096;

/// Mode a directory member is created with; its own mode is applied at the end, so a 0555
/// directory can still be filled.
const DIR_CREATE_MODE: u32 = 0o700;

/// An error that concerns one member only: report it and go on. Anything else is fatal.
pub fn is_member_error(e: &io::Error) -> bool {
    // Our own refusals (no errno) concern the member.
    if e.raw_os_error().is_none() {
        return e.kind() == io::ErrorKind::InvalidInput;
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
        )
    )
}

struct DeferredDir {
    entry: Entry,
    dev: u64,
    ino: u64,
}

pub struct Dest {
    root: Arc<OwnedFd>,
    /// Open directories by path relative to DIR ("" is DIR itself, kept in `root`). Shared so
    /// an operation in flight keeps its directory open even if the cache lets go of it.
    dirs: HashMap<PathBuf, Arc<OwnedFd>>,
    keep_old: bool,
    /// Modes are restored exactly (root, or `-p`).
    exact: bool,
    /// The user's umask, applied when not `exact`.
    umask: u32,
    /// Mode of directories created on the way to a member: 0777 minus the user's umask,
    /// as GNU tar makes them.
    implied_dir_mode: u32,
    deferred: Vec<DeferredDir>,
    /// Index in `deferred` by path, so a repeated directory member updates its metadata.
    deferred_at: HashMap<PathBuf, usize>,
}

/// Where a member goes: its parent directory and the last component.
pub struct Slot {
    pub dir: Arc<OwnedFd>,
    pub name: CString,
}

impl Slot {
    pub fn dirfd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }
}

impl Dest {
    /// Opens (creating if missing, like `tar -C` with `mkdir -p`) the destination directory.
    pub fn open(dir: &Path, keep_old: bool, exact: bool, user_umask: u32) -> Result<Dest> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        let c = cstr(dir.as_os_str())?;
        // Safety: `c` is a valid NUL-terminated path; the returned fd is checked below.
        let fd =
            unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("{}: cannot open", dir.display()));
        }
        // Safety: fd is a fresh descriptor we own.
        let root = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Dest {
            root,
            dirs: HashMap::new(),
            keep_old,
            exact,
            umask: user_umask,
            implied_dir_mode: 0o777 & !user_umask,
            deferred: Vec::new(),
            deferred_at: HashMap::new(),
        })
    }

    pub fn root_fd(&self) -> RawFd {
        self.root.as_raw_fd()
    }

    pub fn keep_old(&self) -> bool {
        self.keep_old
    }

    /// Final permission bits for a member's `mode`: exact as root or with `-p`; otherwise,
    /// like GNU tar without `-p`, minus the umask and without set-id and sticky bits.
    pub fn mode(&self, mode: u32) -> u32 {
        if self.exact { mode & 0o7777 } else { mode & 0o777 & !self.umask }
    }

    /// Directory `rel` (relative to DIR), opening and, if `create`, making every missing
    /// component on the way. Fails with ELOOP/ENOTDIR when a component is a symlink or not a
    /// directory.
    fn dir(&mut self, rel: &Path, create: bool) -> io::Result<Arc<OwnedFd>> {
        if rel.as_os_str().is_empty() {
            return Ok(self.root.clone());
        }
        if let Some(fd) = self.dirs.get(rel) {
            return Ok(fd.clone());
        }
        let parent = self.dir(rel.parent().unwrap_or(Path::new("")), create)?;
        let parent = parent.as_raw_fd();
        let name = cstr_io(rel.file_name().unwrap_or_default())?;
        let fd = match open_dir_beneath(parent, &name) {
            Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                // Safety: parent is an open directory fd, name a valid C string.
                let r = unsafe { libc::mkdirat(parent, name.as_ptr(), self.implied_dir_mode) };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(e);
                    }
                }
                open_dir_beneath(parent, &name)?
            }
            other => other?,
        };
        if self.dirs.len() >= MAX_CACHED_DIRS {
            self.dirs.clear();
        }
        let fd = Arc::new(fd);
        self.dirs.insert(rel.to_path_buf(), fd.clone());
        Ok(fd)
    }

    /// The parent directory of `path` (created as needed) and its last component.
    pub fn slot(&mut self, path: &SafePath) -> io::Result<Slot> {
        let p = path.as_path();
        let dir = self.dir(p.parent().unwrap_or(Path::new("")), true)?;
        let name = cstr_io(p.file_name().unwrap_or_default())?;
        Ok(Slot { dir, name })
    }

    /// Clears the way for a new non-directory at `slot`: with -k refuses (EEXIST), otherwise
    /// unlinks what is there (an empty directory is removed; a non-empty one is an error).
    pub fn remove_existing(&mut self, path: &SafePath, slot: &Slot) -> io::Result<()> {
        if self.keep_old {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        // Safety: valid dirfd and C string.
        if unsafe { libc::unlinkat(slot.dirfd(), slot.name.as_ptr(), 0) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EISDIR) | Some(libc::EPERM) => {
                // Safety: as above.
                if unsafe { libc::unlinkat(slot.dirfd(), slot.name.as_ptr(), libc::AT_REMOVEDIR) }
                    != 0
                {
                    return Err(io::Error::last_os_error());
                }
                self.forget_dirs_under(path.as_path());
                Ok(())
            }
            Some(libc::ENOENT) => Ok(()),
            _ => Err(e),
        }
    }

    fn forget_dirs_under(&mut self, p: &Path) {
        self.dirs.retain(|k, _| !k.starts_with(p));
    }

    /// Runs `create` at the member's slot; when it fails with EEXIST, clears the way and tries
    /// once more. `create` gets the parent fd and the leaf name.
    pub fn create_with<T>(
        &mut self,
        path: &SafePath,
        create: impl FnMut(RawFd, &CStr) -> io::Result<T>,
    ) -> io::Result<T> {
        let slot = self.slot(path)?;
        self.create_at(path, &slot, create)
    }

    /// `create_with` at a slot the caller already resolved (it needs the slot afterwards).
    fn create_at<T>(
        &mut self,
        path: &SafePath,
        slot: &Slot,
        mut create: impl FnMut(RawFd, &CStr) -> io::Result<T>,
    ) -> io::Result<T> {
        match create(slot.dirfd(), &slot.name) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.remove_existing(path, slot)?;
                create(slot.dirfd(), &slot.name)
            }
            other => other,
        }
    }

    /// Creates (or keeps, if a directory is already there) the directory member and defers its
    /// metadata to `finish_dirs`.
    pub fn mkdir(&mut self, entry: &Entry) -> io::Result<()> {
        let p = entry.path.as_path();
        if !p.as_os_str().is_empty() {
            let slot = self.slot(&entry.path)?;
            // Safety: valid dirfd and C string.
            let r = unsafe { libc::mkdirat(slot.dirfd(), slot.name.as_ptr(), DIR_CREATE_MODE) };
            if r != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
                if !is_dir_nofollow(slot.dirfd(), &slot.name)? {
                    // Something else is in the way: replace it (never with -k).
                    if self.keep_old {
                        return Err(io::Error::from_raw_os_error(libc::EEXIST));
                    }
                    // Safety: valid dirfd and C string.
                    if unsafe { libc::unlinkat(slot.dirfd(), slot.name.as_ptr(), 0) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // Safety: as above.
                    if unsafe { libc::mkdirat(slot.dirfd(), slot.name.as_ptr(), DIR_CREATE_MODE) }
                        != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
        }
        let fd = self.dir(p, false)?;
        let st = fstat(fd.as_raw_fd())?;
        let d = DeferredDir { entry: entry.clone(), dev: st.st_dev, ino: st.st_ino };
        match self.deferred_at.get(p) {
            Some(&i) => self.deferred[i] = d,
            None => {
                self.deferred_at.insert(p.to_path_buf(), self.deferred.len());
                self.deferred.push(d);
            }
        }
        Ok(())
    }

    /// Applies directory owners, modes and mtimes, deepest first. A directory that was removed
    /// or replaced since is left alone.
    pub fn finish_dirs(&mut self) -> Result<()> {
        let mut dirs = std::mem::take(&mut self.deferred);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.entry.path.as_path().components().count()));
        for d in dirs {
            let Ok(fd) = self.dir(d.entry.path.as_path(), false) else {
                continue;
            };
            let fd = fd.as_raw_fd();
            let Ok(st) = fstat(fd) else { continue };
            if st.st_dev != d.dev || st.st_ino != d.ino {
                continue;
            }
            set_meta(fd, &d.entry, self.mode(d.entry.mode), true)
                .with_context(|| format!("{}: cannot set directory metadata", d.entry.name))?;
        }
        self.dirs.clear();
        Ok(())
    }
}

/// Owner (if asked), mode and mtime of an open file or directory, in that order (chown clears
/// set-id bits, so the mode comes after it).
pub fn set_meta(fd: RawFd, entry: &Entry, mode: u32, set_mode: bool) -> io::Result<()> {
    if let Some((uid, gid)) = entry.owner {
        // Safety: fd is open.
        if unsafe { libc::fchown(fd, uid, gid) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if set_mode {
        // Safety: fd is open.
        if unsafe { libc::fchmod(fd, mode) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let times = timespecs(entry.mtime);
    // Safety: fd is open; `times` is a valid two-element array.
    if unsafe { libc::futimens(fd, times.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fstat succeeded, so st is initialised.
    Ok(unsafe { st.assume_init() })
}

fn is_dir_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<bool> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // Safety: valid dirfd, C string and output buffer.
    if unsafe { libc::fstatat(dirfd, name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) }
        != 0
    {
        return Err(io::Error::last_os_error());
    }
    // Safety: fstatat succeeded.
    Ok(unsafe { st.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// Opens directory `name` inside `parent` without following any symlink and without leaving
/// `parent` (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; O_NOFOLLOW where openat2 is missing).
fn open_dir_beneath(parent: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // Safety: open_how is plain integers; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // Safety: valid dirfd, C string, and an open_how of the size we pass.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            parent,
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as RawFd;
    let fd = if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        // Safety: valid dirfd and C string. `name` is a single plain component, so
        // O_NOFOLLOW alone keeps the open beneath `parent`.
        unsafe { libc::openat(parent, name.as_ptr(), flags) }
    } else {
        fd
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn cstr_io(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn cstr(s: &OsStr) -> Result<CString> {
    CString::new(s.as_bytes()).context("path contains a NUL byte")
}

/// Leaf creators shared by both backends (they are rare enough to stay synchronous).
impl Dest {
    /// Creates a regular file for writing; `flags` may add O_DIRECT. Set-id bits and owner are
    /// applied at the end (`finish_file`).
    pub fn create_file(&mut self, entry: &Entry, flags: i32) -> io::Result<OwnedFd> {
        let mode = self.mode(entry.mode) & 0o777;
        self.create_with(&entry.path, |dirfd, name| {
            let f = libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOFOLLOW
                | libc::O_CLOEXEC
                | flags;
            // Safety: valid dirfd and C string.
            let fd = unsafe { libc::openat(dirfd, name.as_ptr(), f, mode) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // Safety: fresh fd we own.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        })
    }

    /// Owner, set-id bits and mtime of a file whose data is complete.
    pub fn finish_file(&self, fd: RawFd, entry: &Entry) -> io::Result<()> {
        let mode = self.mode(entry.mode);
        // The create mode already holds the permission bits; only chown (which clears set-id
        // bits) or set-id/sticky bits need an explicit chmod.
        let set_mode = entry.owner.is_some() || mode & 0o7000 != 0;
        set_meta(fd, entry, mode, set_mode)
    }

    pub fn symlink(&mut self, entry: &Entry, target: &[u8]) -> io::Result<()> {
        let target =
            CString::new(target).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let slot = self.slot(&entry.path)?;
        self.create_at(&entry.path, &slot, |dirfd, name| {
            // Safety: valid C strings and dirfd.
            cvt(unsafe { libc::symlinkat(target.as_ptr(), dirfd, name.as_ptr()) })
        })?;
        self.set_meta_nofollow(&slot, entry, false)
    }

    pub fn hardlink(&mut self, entry: &Entry, target: &SafePath) -> io::Result<()> {
        if *target == entry.path {
            // GNU tar: "Cannot hard link to 'x'". Whatever is there is not what the archive meant.
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "hard link to itself"));
        }
        let t = target.as_path();
        let tdir = self.dir(t.parent().unwrap_or(Path::new("")), false)?;
        let tname = cstr_io(t.file_name().unwrap_or_default())?;
        self.create_with(&entry.path, |dirfd, name| {
            // Safety: valid dirfds and C strings; flags 0 links a symlink itself, not its target.
            cvt(unsafe { libc::linkat(tdir.as_raw_fd(), tname.as_ptr(), dirfd, name.as_ptr(), 0) })
        })
    }

    pub fn mkfifo(&mut self, entry: &Entry) -> io::Result<()> {
        let mode = self.mode(entry.mode);
        let slot = self.slot(&entry.path)?;
        self.create_at(&entry.path, &slot, |dirfd, name| {
            // Safety: valid dirfd and C string.
            cvt(unsafe { libc::mknodat(dirfd, name.as_ptr(), libc::S_IFIFO | (mode & 0o777), 0) })
        })?;
        self.set_meta_nofollow(&slot, entry, mode & 0o7000 != 0 || entry.owner.is_some())
    }

    /// Owner, mode and mtime by name, never following a symlink at the leaf.
    fn set_meta_nofollow(&self, slot: &Slot, entry: &Entry, set_mode: bool) -> io::Result<()> {
        let (dirfd, name) = (slot.dirfd(), slot.name.as_ptr());
        if let Some((uid, gid)) = entry.owner {
            // Safety: valid dirfd and C string.
            cvt(unsafe { libc::fchownat(dirfd, name, uid, gid, libc::AT_SYMLINK_NOFOLLOW) })?;
        }
        if set_mode {
            // Safety: as above. The leaf is not a symlink here (only fifos ask for a mode).
            cvt(unsafe { libc::fchmodat(dirfd, name, self.mode(entry.mode), 0) })?;
        }
        let times = timespecs(entry.mtime);
        // Safety: valid dirfd, C string and a two-element timespec array.
        cvt(unsafe { libc::utimensat(dirfd, name, times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
    }
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}
