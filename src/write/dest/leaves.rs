//! Files, links and nodes: created beneath their parent's fd, a file's fd handed to the
//! writer and closed when its data has landed, a FIFO's or symlink's metadata set through an
//! O_PATH fd checked to hold what was made.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::*;
use crate::plan::{Entry, Node};
use crate::policy::safety::SafePath;
use crate::write::restart;
use crate::write::tree::open_file_in_root;

impl Dest {
    /// Creates a regular file for writing; `flags` may add O_DIRECT. Set-id bits and owner are
    /// applied at the end (`finish_file`). Opened read-write (creating it grants that
    /// whatever its mode), so that the library can hand the landed file to a program that
    /// reads it back (api/observe.rs `Landed::file`).
    /// With `--overwrite -h`, a symlink at its path is written through (`open_through`).
    pub fn create_file(&mut self, entry: &Entry, flags: i32) -> Result<OwnedFd, MemberError> {
        if self.policy.write_through {
            let slot = self.slot(&entry.path)?;
            if self.link_at(&slot) {
                return self.open_through(entry, flags);
            }
        }
        let mode = self.mode(entry.mode) & 0o777;
        self.create_with(entry, |dirfd, name| {
            let f = libc::O_RDWR
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

    /// `--overwrite -h` (`conflict::writes_through`): whether a symlink stands at `slot`, the
    /// path of a file member, which then writes through it (`open_through`). One fstatat, and
    /// only with those options.
    pub fn link_at(&self, slot: &Slot) -> bool {
        self.policy.write_through && is_symlink_nofollow(slot.dirfd(), &slot.name)
    }

    /// `--overwrite -h`: the file the symlink at `entry`'s path leads to, opened for writing
    /// and emptied (made, where the symlink dangles), as GNU tar's open without O_EXCL and
    /// O_NOFOLLOW; resolved as if DIR were `/` (`tree::open_file_in_root`), so nothing outside
    /// DIR is written. It gets the member's permission bits now: it was not created with
    /// them. `flags` may add O_DIRECT, as for `create_file`.
    pub fn open_through(&mut self, entry: &Entry, flags: i32) -> Result<OwnedFd, MemberError> {
        let mode = self.mode(entry.mode) & 0o777;
        let path = cstr_io(entry.path.as_path().as_os_str().as_encoded_bytes())?;
        let root = self.root_fd();
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | flags;
        let opened = self.tree.retry_emfile(|| open_file_in_root(root, &path, flags, mode));
        let fd =
            opened.map_err(|e| MemberError::beyond_link(entry.path.display().to_string(), e))?;
        // Safety: fd is an open file of ours; fchmod takes no pointers.
        if restart(|| unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) }) != 0 {
            return Err(io::Error::last_os_error().into());
        }
        Ok(fd)
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

    /// Whether a node created with `mode` needs a chmod to have it: set-id and sticky bits,
    /// and permission bits the process umask cleared at creation (exact modes only: other
    /// modes have the umask's bits cleared already).
    fn needs_chmod(&self, mode: u32) -> bool {
        mode & 0o7000 != 0 || mode & 0o777 & self.umask != 0
    }

    /// Owner, set-id bits and mtime of a file whose data is complete, through its fd: a
    /// failure is `MemberError::Metadata` or `OwnerRefused` (the file is there).
    pub fn finish_file(&self, fd: RawFd, entry: &Entry) -> Result<(), MemberError> {
        let mode = self.mode(entry.mode);
        // The create mode already holds the permission bits, less those the process umask
        // took (the umask is left as the caller set it: exact modes may need bits it clears);
        // set-id and sticky bits always need an explicit chmod (after the chown, which would
        // clear set-id bits; without them it leaves the mode as it is).
        let set_mode = self.needs_chmod(mode);
        let mut meta = MetaOf::of(entry, mode);
        // A new file already belongs to its writer, unless a set-group-ID directory gave it
        // another group (tree.rs `SetgidDirs`).
        if meta.owner == Some(self.own_ids) && !self.tree.setgid().seen() {
            meta.owner = None;
        }
        set_meta(fd, &meta, set_mode, &*self.events).map_err(MemberError::of_metadata)
    }

    /// A symlink: created with symlinkat; owner, attributes and mtime (unless `-m`) set
    /// through an O_PATH fd of the link (a symlink has no mode of its own on Linux).
    pub fn symlink(&mut self, entry: &Entry, target: &[u8]) -> Result<(), MemberError> {
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

    pub fn hardlink(&mut self, entry: &Entry, target: &SafePath) -> Result<(), MemberError> {
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
                // Our own refusal, so a member error (`outcome::judge`), like ENOENT.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    Err(MemberError::Refused("hard link to itself, and nothing is there"))
                }
                Err(e) => Err(e.into()),
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
    pub fn mknod(&mut self, entry: &Entry, node: Node) -> Result<(), MemberError> {
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
        let set_mode = self.needs_chmod(mode);
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
    ) -> Result<(), MemberError> {
        let node = self.tree.retry_emfile(|| open_path_nofollow(slot.dirfd(), &slot.name))?;
        made_as(&node, kind)?;
        set_meta_opath(&node, meta, set_mode, &*self.events).map_err(MemberError::of_metadata)
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
pub(super) fn open_path_nofollow(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // Safety: valid dirfd and C string.
    let fd = restart(|| unsafe { libc::openat(dirfd, name.as_ptr(), flags) });
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Checks that `node` (an O_PATH fd of a name just created) is what was created: of type
/// `kind` and with no other name (a hard link of some other inode renamed over it would have
/// two, or be of another type).
pub(super) fn made_as(node: &OwnedFd, kind: libc::mode_t) -> Result<(), MemberError> {
    let st = fstat(node.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT != kind || st.st_nlink != 1 {
        return Err(MemberError::Refused(
            "replaced by something else while being created; left alone",
        ));
    }
    Ok(())
}
