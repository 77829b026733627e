//! What the process may use, decided once at start-up from its resource limits: how many file
//! descriptors the writer may hold (RLIMIT_NOFILE), and how threads allocate under an address
//! space limit (RLIMIT_AS). Users' shells commonly give a soft limit of 1024 (or less) open
//! files; fastuntar raises the soft limit to the hard limit first, as Go's runtime and many
//! servers do, and then divides what it got.

use std::io;

/// Descriptors kept free for everything that is not a cached directory or a file in flight:
/// stdio (3), the archive, the io_uring ring, a hard link's target directory, the O_PATH fd of
/// a FIFO, a directory being reopened, and slack for libraries.
const RESERVED_FDS: usize = 16;

/// Files open at once, at most. Bounds fds and the directory-inode contention Agave measured
/// with many concurrent opens in one directory.
pub const MAX_FILES_IN_FLIGHT: usize = 128;

/// Directory fds cached, at most. Snapshots have a handful of directories; archives with many
/// more get their least recently used directories closed (reopening costs one openat2).
pub const MAX_CACHED_DIRS: usize = 4096;

/// glibc malloc arenas at most under RLIMIT_AS: each arena reserves 64 MiB of address space
/// (HEAP_MAX_SIZE on 64-bit), and by default a process gets up to 8 per CPU, one for nearly
/// every thread that allocates. `--threads 8` under `ulimit -v 262144` ran out of address
/// space in a different allocation from run to run, one of them an abort inside the allocator
/// (docs/DESIGN.md, "Resource limits and filesystems").
#[cfg(target_env = "gnu")]
const ARENAS_UNDER_RLIMIT_AS: libc::c_int = 2;

/// The type of getrlimit's resource argument, which differs between C libraries.
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// The soft limit on `resource`, None when there is none (or it cannot be read).
pub fn soft_limit(resource: Resource) -> Option<u64> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // Safety: getrlimit writes the struct it is given.
    let got = unsafe { libc::getrlimit(resource, &mut rl) } == 0;
    (got && rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur)
}

/// Whether RLIMIT_AS (`ulimit -v`) limits the address space.
pub fn address_space_limited() -> bool {
    soft_limit(libc::RLIMIT_AS).is_some()
}

/// Under RLIMIT_AS, caps glibc's malloc arenas (ARENAS_UNDER_RLIMIT_AS) before any thread
/// starts, so that threads share address space instead of each reserving its own. (Other C
/// libraries have no such arenas: nothing to do.)
pub fn fit_address_space() {
    #[cfg(target_env = "gnu")]
    if address_space_limited() {
        // Safety: mallopt only sets an allocator parameter; called before other threads exist.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENAS_UNDER_RLIMIT_AS) };
    }
}

/// How the writer may spend its file descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdBudget {
    /// Open files in flight (each holds its fd until closed).
    pub files: usize,
    /// Cached directory fds.
    pub dirs: usize,
}

impl FdBudget {
    /// Raises the soft RLIMIT_NOFILE to the hard limit (best effort) and divides what is
    /// left after the descriptors already open and RESERVED_FDS: a quarter for files in flight
    /// (at most MAX_FILES_IN_FLIGHT), the rest for directories (at most MAX_CACHED_DIRS). Never
    /// less than one of each: running out later shrinks the directory cache and retries
    /// (`write/tree.rs`).
    pub fn from_rlimit() -> FdBudget {
        let limit = raise_nofile().unwrap_or(1024);
        FdBudget::divide(limit, open_fds().unwrap_or(RESERVED_FDS))
    }

    fn divide(limit: u64, open_now: usize) -> FdBudget {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let avail = limit.saturating_sub(open_now.saturating_add(RESERVED_FDS));
        let files = (avail / 4).clamp(1, MAX_FILES_IN_FLIGHT);
        let dirs = avail.saturating_sub(files).clamp(1, MAX_CACHED_DIRS);
        FdBudget { files, dirs }
    }
}

/// Sets the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
fn raise_nofile() -> io::Result<u64> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // Safety: `rl` is a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if rl.rlim_cur < rl.rlim_max {
        let raised = libc::rlimit { rlim_cur: rl.rlim_max, rlim_max: rl.rlim_max };
        // Safety: as above; raising the soft limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(raised.rlim_cur);
        }
    }
    Ok(rl.rlim_cur)
}

/// Descriptors open in this process now.
fn open_fds() -> Option<usize> {
    // The directory stream's own fd is among the entries.
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        assert_eq!(FdBudget::divide(20_000, 5), FdBudget { files: 128, dirs: 4096 });
        assert_eq!(FdBudget::divide(1024, 5), FdBudget { files: 128, dirs: 875 });
        assert_eq!(FdBudget::divide(64, 5), FdBudget { files: 10, dirs: 33 });
        assert_eq!(FdBudget::divide(16, 5), FdBudget { files: 1, dirs: 1 });
    }
}
