//! Metadata on the very inode made: owner, mode, times and extended attributes through its
//! fd (`set_meta`), or for an O_PATH fd through the fd itself and its /proc/self/fd entry
//! (`set_meta_opath`).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::*;
use crate::archive::Timestamp;
use crate::archive::Xattr;
use crate::plan::Entry;
use crate::write::events::{Event, Events};
use crate::write::restart;

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
pub fn set_meta(
    fd: RawFd,
    m: &MetaOf,
    set_mode: bool,
    events: &dyn Events,
) -> Result<(), MemberError> {
    let owner = match m.owner {
        // Safety: fd is open.
        Some((uid, gid)) => cvt(restart(|| unsafe { libc::fchown(fd, uid, gid) }))
            .map_err(|e| MemberError::owner_refused(uid, gid, e)),
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
    owner.and(mode.map_err(MemberError::Io)).and(time.map_err(MemberError::Io))
}

/// Whether an attribute is a POSIX ACL (`--acls`, acl.rs).
pub(super) fn is_acl_attr(name: &[u8]) -> bool {
    name.starts_with(b"system.posix_acl_")
}

/// `set_xattrs` through `fd`, an open file or directory of ours.
pub(super) fn fset_xattrs(fd: RawFd, member: &str, xattrs: &[Xattr], events: &dyn Events) {
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
            Some(value) => cstr_io(&x.name)
                .and_then(|name| set(&name, value))
                .map_err(|e| crate::report::strerror(&e)),
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

/// `set_meta` for an O_PATH fd of a FIFO or a symlink, which fchown/fchmod/futimens and
/// fsetxattr refuse (EBADF): owner and times through the fd itself (AT_EMPTY_PATH), mode and
/// attributes through the fd's /proc/self/fd entry, which names exactly the inode the fd holds
/// (a magic link, not a path that can be swapped).
pub(super) fn set_meta_opath(
    fd: &OwnedFd,
    m: &MetaOf,
    set_mode: bool,
    events: &dyn Events,
) -> Result<(), MemberError> {
    let raw = fd.as_raw_fd();
    // Each step is tried whatever the one before did, as in `set_meta` (a symlink whose owner
    // cannot be set still gets its time), and the first failure is returned.
    let owner = match m.owner {
        // Safety: valid fd and an empty C string, which AT_EMPTY_PATH applies to the fd itself.
        Some((uid, gid)) => cvt(restart(|| unsafe {
            libc::fchownat(raw, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH)
        }))
        .map_err(|e| MemberError::owner_refused(uid, gid, e)),
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
    owner.and(mode.map_err(MemberError::Io)).and(time.map_err(MemberError::Io))
}
