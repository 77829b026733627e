//! One directory opened beneath another without following a symlink: `openat2` with
//! RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or O_NOFOLLOW one component at a time where openat2
//! is missing or refused (`OPENAT2_REFUSED`); with `--keep-directory-symlink`, symlinks
//! followed as if DIR were `/` (`open_in_root`).

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::write::restart;

/// EMFILE (this process) or ENFILE (the system) from an open.
pub fn is_out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Opens directory `name` inside `parent` without following any symlink and without leaving
/// `parent` (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; O_NOFOLLOW where openat2 is missing
/// or refused, `OPENAT2_REFUSED`).
pub fn open_dir_beneath(parent: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let known = OPENAT2_REFUSED.load(Ordering::Relaxed);
    let mut fd = if known { -1 } else { openat2(parent, name, flags, resolve) };
    let errno = (fd < 0).then(|| io::Error::last_os_error().raw_os_error()).flatten();
    if known || matches!(errno, Some(libc::ENOSYS | libc::EPERM)) {
        // Safety: valid dirfd and C string. `name` is a single plain component, so
        // O_NOFOLLOW alone keeps the open beneath `parent`.
        fd = restart(|| unsafe { libc::openat(parent, name.as_ptr(), flags) });
        // ENOSYS: no openat2 here. EPERM where openat may open it: a seccomp filter's, not
        // the directory's. Either way openat2 is not asked again.
        if !known && (errno == Some(libc::ENOSYS) || fd >= 0) {
            OPENAT2_REFUSED.store(true, Ordering::Relaxed);
        }
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `--keep-directory-symlink`: opens the directory at `path` (from DIR, open as `root`),
/// following symlinks as if DIR were `/` (openat2 RESOLVE_IN_ROOT): `lib -> usr/lib` and
/// `lib -> /usr/lib` both reach DIR/usr/lib, and no symlink, `..` or absolute target leads
/// out of DIR. Without openat2 (Linux before 5.6) nothing is followed: the member fails as
/// without the option.
pub(super) fn open_in_root(root: RawFd, path: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let fd = openat2(root, path, flags, libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS);
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// openat2 is missing (ENOSYS, before Linux 5.6) or refused by a seccomp filter that predates
/// it (EPERM: Docker before 20.10, other sandboxes), as the first open found: directories are
/// opened with O_NOFOLLOW, one component at a time.
static OPENAT2_REFUSED: AtomicBool = AtomicBool::new(false);

/// openat2(2) with `flags` and `resolve`: the fd, or -1 with errno set.
fn openat2(dirfd: RawFd, path: &CStr, flags: libc::c_int, resolve: u64) -> RawFd {
    // Safety: open_how is plain integers; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    // Safety: valid dirfd, C string, and an open_how of the size we pass.
    restart(|| unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    }) as RawFd
}
