//! What the process may use, decided once at start-up from its resource limits: how many file
//! descriptors the writer may hold (RLIMIT_NOFILE), and how threads allocate under an address
//! space limit (RLIMIT_AS). Users' shells commonly give a soft limit of 1024 (or less) open
//! files; fastuntar raises the soft limit to the hard limit first, as Go's runtime and many
//! servers do, and then divides what it got.

use std::io;

/// Descriptors kept free for the process besides the writers: stdio and the archive are
/// counted as open when the budget is made; this is for what opens later (the archive again
/// with O_DIRECT, /proc and cgroup files read at start-up) and slack for libraries.
const RESERVED_FDS: usize = 8;

/// Descriptors a writer thread holds besides its cached directories and its files in flight:
/// its own fd of DIR, its io_uring ring, a directory the walk opens before it evicts another
/// (`write/tree.rs`, `dir`), and an evicted directory an operation in flight still holds (or
/// a hard link's target directory, a FIFO's O_PATH fd). Measured (a 3,776-entry tree, as an
/// unprivileged user, `ulimit -n` raised from 8 until the extraction succeeded): each writer
/// thread more needed 4 more descriptors with the portable writer, 4-6 with io_uring.
const FDS_PER_WRITER: usize = 4;

/// What the dispatcher's own `Dest` holds when there are several writers, besides its one
/// cached directory: its fd of DIR and a directory being opened.
const DISPATCHER_FDS: usize = 2;

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

/// How many of `asked` connections (a socket each) the open-file limit allows: see
/// `fit_connections`.
pub fn connections_fit(asked: usize) -> usize {
    let limit = nofile_limit().unwrap_or(1024);
    fit_connections(asked, limit, open_fds().unwrap_or(RESERVED_FDS))
}

/// Of the descriptors left after those open, RESERVED_FDS and one writer's fixed ones and
/// its one file and one directory, connections get at most half, and at least one: under
/// `ulimit -n 20` 16 connections failed to open DIR (EMFILE); 8 fit under `ulimit -n 64`.
fn fit_connections(asked: usize, limit: u64, open_now: usize) -> usize {
    let avail = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(open_now.saturating_add(RESERVED_FDS + FDS_PER_WRITER + 2));
    (avail / 2).clamp(1, asked.max(1))
}

/// How the writer may spend its file descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdBudget {
    /// Writer threads the descriptors allow (at most the number asked for).
    pub writers: usize,
    /// Open files in flight, all writers together (each holds its fd until closed).
    pub files: usize,
    /// Cached directory fds, all writers (and the dispatcher) together.
    pub dirs: usize,
    /// The soft RLIMIT_NOFILE the budget was made for.
    pub limit: u64,
}

impl FdBudget {
    /// Divides what the soft RLIMIT_NOFILE in force leaves (the command line raised it to the
    /// hard limit before, `raise_nofile`; a library run works within what its caller has)
    /// after the descriptors already open and RESERVED_FDS among `writers` writer threads:
    /// fewer when each cannot get FDS_PER_WRITER plus one file and one directory (under
    /// `ulimit -n 20`, 4 writers failed with EMFILE where 1 extracts the same tree). Of what
    /// the writers' fixed descriptors leave, a quarter is for files in flight (at most
    /// MAX_FILES_IN_FLIGHT), the rest for directories (at most MAX_CACHED_DIRS). Never less
    /// than one of each per writer: running out later shrinks the directory cache and retries
    /// (`write/tree.rs`). `later`: descriptors the input will open after this budget is made
    /// (a URL's connections, a socket each), counted as open now.
    pub fn from_rlimit(writers: usize, later: usize) -> FdBudget {
        let limit = nofile_limit().unwrap_or(1024);
        FdBudget::divide(limit, open_fds().unwrap_or(RESERVED_FDS) + later, writers)
    }

    fn divide(limit: u64, open_now: usize, wanted: usize) -> FdBudget {
        let avail = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .saturating_sub(open_now.saturating_add(RESERVED_FDS));
        let writers = if wanted <= 1 {
            1
        } else {
            let fit = avail.saturating_sub(DISPATCHER_FDS + 1) / (FDS_PER_WRITER + 2);
            wanted.min(fit).max(1)
        };
        let (fixed, dests) = match writers {
            1 => (FDS_PER_WRITER, 1),
            n => (n * FDS_PER_WRITER + DISPATCHER_FDS, n + 1),
        };
        let spare = avail.saturating_sub(fixed);
        let files = (spare / 4).clamp(writers, MAX_FILES_IN_FLIGHT.max(writers));
        let dirs = spare.saturating_sub(files).clamp(dests, MAX_CACHED_DIRS.max(dests));
        FdBudget { writers, files, dirs, limit }
    }
}

/// The soft RLIMIT_NOFILE in force.
fn nofile_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // Safety: `rl` is a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rl.rlim_cur)
}

/// Sets the soft RLIMIT_NOFILE to the hard limit (the command line, before a run: a process
/// setting, which the library leaves to its caller); returns the soft limit now in force.
pub fn raise_nofile() -> io::Result<u64> {
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

/// The process's umask, read without changing it: `Umask:` in /proc/self/status (Linux 4.7
/// and later). umask(2) can only be read by setting it, and a library run must not touch
/// what other threads of the caller create meanwhile (issue 43); only where /proc is not
/// mounted is it read that way, set and put back at once.
pub fn process_umask() -> libc::mode_t {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let line = status.as_deref().and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:")));
    if let Some(m) = line.and_then(|m| libc::mode_t::from_str_radix(m.trim(), 8).ok()) {
        return m;
    }
    // Safety: umask has no memory effects; this reads it and puts it back.
    let old = unsafe { libc::umask(0o022) };
    // Safety: as above.
    unsafe { libc::umask(old) };
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_room_for_a_writer() {
        assert_eq!(fit_connections(8, 1024, 5), 8);
        assert_eq!(fit_connections(8, 64, 5), 8);
        assert_eq!(fit_connections(16, 64, 5), 16);
        assert_eq!(fit_connections(16, 40, 5), 10);
        assert_eq!(fit_connections(16, 20, 5), 1);
        assert_eq!(fit_connections(8, 0, 5), 1);
        assert_eq!(fit_connections(0, 1024, 5), 1);
    }

    #[test]
    fn budgets() {
        let b = |limit, writers| {
            let b = FdBudget::divide(limit, 5, writers);
            (b.writers, b.files, b.dirs)
        };
        assert_eq!(b(20_000, 1), (1, 128, 4096));
        assert_eq!(b(1024, 1), (1, 128, 879));
        assert_eq!(b(1024, 8), (8, 128, 849));
        assert_eq!(b(64, 1), (1, 11, 36));
        assert_eq!(b(64, 8), (8, 8, 9));
        // Too few for more than one writer (4 failed with EMFILE at 20): one, as at 16.
        assert_eq!(b(20, 4), (1, 1, 2));
        assert_eq!(b(16, 2), (1, 1, 1));
        assert_eq!(b(8, 1), (1, 1, 1));
        // Every writer (and the dispatcher) gets at least one file and one directory.
        for limit in 0..200 {
            for wanted in 1..=16 {
                let f = FdBudget::divide(limit, 5, wanted);
                assert!(f.writers >= 1 && f.writers <= wanted);
                assert!(f.files >= f.writers);
                assert!(f.dirs >= f.writers + usize::from(f.writers > 1));
                // Within what is available, unless even one writer does not fit.
                let fixed =
                    f.writers * FDS_PER_WRITER + if f.writers > 1 { DISPATCHER_FDS } else { 0 };
                let avail = (limit as usize).saturating_sub(5 + RESERVED_FDS);
                assert!(f.writers == 1 || fixed + f.files + f.dirs <= avail, "{limit} {wanted}");
            }
        }
    }
}
