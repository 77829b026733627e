//! The memory budget: how `--memory` (or the default, sized to what the process may use) is
//! divided into buffers, between file data in flight to the writers and the frames that
//! decoder workers decode ahead (decode/parallel.rs), less a URL's reorder window. Pure: what
//! the machine allows (`usable_memory`) is read once at the edge (`options::Machine`) and passed
//! in as a number.

use anyhow::{Result, bail};

use crate::pool::BUF_ALIGN;
use crate::resources::soft_limit;

/// Size of one pool buffer and so of the largest single write. 1 MiB: large enough that a
/// direct write reaches the disk's streaming rate (`dd bs=1M oflag=direct` writes 1.5 GB/s
/// here, the device's ceiling), small enough that a 64 MiB pool keeps 64 writes in flight.
pub const CHUNK_SIZE: usize = 1 << 20;

/// Fewest buffers the pool may have: one being filled, some in flight.
pub const MIN_BUFFERS: usize = 4;

/// File data in flight by default: 64 writes of CHUNK_SIZE.
pub const DEFAULT_MEMORY: u64 = 64 << 20;

/// Decoded frames each decoder worker may hold by default: one of Agave's frames (32 MiB of
/// tar stream each, `ZSTD_FRAME_SIZE` of agave-snapshots), which a worker decodes in place
/// only when its share of the frame pool holds it whole (decode/parallel.rs `run_for`). Until
/// frames had a pool of their own they shared the default 64 MiB with file data: with 3
/// workers (`--threads 4`) each one's share was 10 buffers, every frame was streamed and
/// copied, and together they held at most one frame ahead.
pub const FRAME_BYTES: u64 = 32 << 20;

/// Of an explicit `--memory`, file data keeps what is left after one frame and the reader's
/// extra buffer, at least this (or half, when that is less) and at most DEFAULT_MEMORY, and
/// the frames get the rest up to FRAME_BYTES per worker: `--memory 64M` with one worker keeps
/// one whole frame ahead and 31 MiB of file data, as the one shared pool did; `--memory 1G`
/// with 63 workers 64 MiB of file data and 960 MiB of frames. The default gives file data all
/// of DEFAULT_MEMORY: on the agave archive to RAM-backed ext4 with `--threads 2`, 64 MiB of
/// file data in flight extracted in 2.42 s against 2.63 s with 31 MiB (medians of 9
/// interleaved rounds, docs/PERFORMANCE.md).
pub const FILE_DATA_MIN: u64 = DEFAULT_MEMORY - FRAME_BYTES - CHUNK_SIZE as u64;

/// When extracting with decoder workers, the frames' pool gets one more frame, taken from file
/// data: the tar stage hands the workers' buffers to the writer as file data (lend.rs), so a
/// frame the writer still holds would otherwise keep the next frame from being decoded in
/// place (a worker needs its run of adjacent buffers free: `--threads 2` of the 1.8 GB agave
/// archive had 9 to 15 of its 26 worker frames in place with 64 + 33 MiB, all 26 with 32 +
/// 65 MiB). File data then carries only the reader's own frames, the small files and the
/// copied edges: 32 MiB. The total is what it was.
pub const LENT_FRAME_BYTES: u64 = FRAME_BYTES;

/// Fewest buffers of a frame pool: one frame buffer ahead and the reader's extra one
/// (parallel.rs HEAD_EXTRA). Below this and MIN_BUFFERS for file data, one thread decodes.
const MIN_FRAME_BUFFERS: usize = 2;

/// The default `--memory` is at most this fraction of the memory the process may use
/// (physical memory, a cgroup memory limit, RLIMIT_AS), beyond the DEFAULT_MEMORY of file data
/// and one worker's frames: 64 decoder threads would otherwise ask for 2 GiB on a machine that
/// may have 4. Where the fraction is less than one worker's frames (RLIMIT_AS under 264 MiB)
/// the frames get only the fraction.
const AUTO_MEMORY_FRACTION: u64 = 8;

/// What the run's options fixed about memory (options/input.rs), from which each run's pools are
/// divided once the decoder threads are known (`Budget::pools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `--memory` in bytes, or the default where the process may use little (`tight_memory`).
    pub memory: Option<u64>,
    /// Whether `--memory` was given: then more threads never mean more memory (decode's
    /// `Input::threads`).
    pub explicit: bool,
    /// Bytes this process may use (`usable_memory`, read at the edge).
    pub usable: u64,
    /// A URL's reorder window, taken from the budget first (0 for a file or a pipe).
    pub window: u64,
    /// The run only reads (`-t`, `-O`): no file-data pool.
    pub reads_only: bool,
}

impl Budget {
    /// The buffer pools for a run whose zstd frames `workers` threads decode besides the
    /// reader (0: one thread decodes, or the format is not zstd): see `divide`.
    pub fn pools(&self, workers: usize) -> Result<Pools> {
        let cap = match self.memory {
            Some(_) => u64::MAX,
            None => self.usable / AUTO_MEMORY_FRACTION,
        };
        divide(self.memory, workers, self.reads_only, cap, self.window)
    }
}

/// How the buffer memory is divided between the two pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pools {
    /// Bytes of every buffer, in both pools.
    pub buf_size: usize,
    /// Buffers of file data in flight to the writer (0 when listing).
    pub files: usize,
    /// Buffers where frames decoded ahead wait for the reader (0: one thread decodes).
    pub frames: usize,
}

/// Divides the buffer memory between file data and the frames of `workers` decoder threads
/// besides the reader. By default (`memory` None) file data gets DEFAULT_MEMORY and the frames
/// FRAME_BYTES per worker and the reader's extra buffer, as far as `cap` (a fraction of the
/// machine's memory) allows beyond DEFAULT_MEMORY, and at least the first worker's where `cap`
/// holds that: 64 MiB with one decoder thread, 97 MiB with two, ~1.1 GiB with 32; when
/// extracting, file data gives LENT_FRAME_BYTES of its share to the frames. An explicit
/// `memory` is never exceeded: the frames get up to as much, leaving file data what
/// FILE_DATA_MIN says. When listing (or with `-O`) there is no file data and the
/// frames get everything (by default at least DEFAULT_MEMORY). An extraction budget too small
/// for both pools (under 32 KiB) gets no frame pool, and one thread decodes: more threads than
/// the memory allows means fewer frames in flight, never more memory.
///
/// `window` (a URL's reorder window, `url_window`) is taken from the budget first: from the
/// file data's DEFAULT_MEMORY by default, from `memory` when given.
fn divide(
    memory: Option<u64>,
    workers: usize,
    listing: bool,
    cap: u64,
    window: u64,
) -> Result<Pools> {
    let w = workers as u64;
    let one_frame = FRAME_BYTES + CHUNK_SIZE as u64;
    let want = w.saturating_mul(FRAME_BYTES).saturating_add(CHUNK_SIZE as u64);
    let memory = memory.map(|m| m.min(1 << 40).saturating_sub(window));
    let default_files = DEFAULT_MEMORY - window.min(DEFAULT_MEMORY / 2);
    let (files, frames) = match memory {
        _ if workers == 0 => (memory.unwrap_or(default_files), 0),
        None if listing => (0, want.max(DEFAULT_MEMORY).min(cap.max(DEFAULT_MEMORY))),
        None => {
            let room = cap.saturating_sub(DEFAULT_MEMORY).max(one_frame.min(cap));
            let frames = want.min(room);
            // The writer's frame (see LENT_FRAME_BYTES), from file data.
            let lent =
                match frames >= one_frame && default_files >= FILE_DATA_MIN + LENT_FRAME_BYTES {
                    true => LENT_FRAME_BYTES,
                    false => 0,
                };
            (default_files - lent, frames + lent)
        }
        Some(m) if listing => (0, m),
        Some(m) => {
            // File data keeps what is left after one frame, between FILE_DATA_MIN (or half,
            // when that is less) and DEFAULT_MEMORY; the frames get the rest they want.
            let keep = m
                .saturating_sub(FRAME_BYTES + CHUNK_SIZE as u64)
                .clamp((m / 2).min(FILE_DATA_MIN), DEFAULT_MEMORY);
            let frames = want.min(m - keep);
            (m - frames, frames)
        }
    };
    if frames > 0 {
        let per_file_buf = if listing { u64::MAX } else { files / MIN_BUFFERS as u64 };
        let size = (frames / MIN_FRAME_BUFFERS as u64).min(per_file_buf).min(CHUNK_SIZE as u64)
            as usize
            / BUF_ALIGN
            * BUF_ALIGN;
        if size > 0 {
            let count = |bytes: u64| usize::try_from(bytes / size as u64).unwrap_or(usize::MAX);
            return Ok(Pools { buf_size: size, files: count(files), frames: count(frames) });
        }
    }
    if listing {
        return Ok(Pools { buf_size: CHUNK_SIZE, files: 0, frames: 0 });
    }
    let (buf_size, files) = pool_shape(files + frames)?;
    Ok(Pools { buf_size, files, frames: 0 })
}

/// A URL's reorder window by default (`url_window`): 16 MiB of the 64 MiB of file data, so a
/// restore from a URL stays within the default budget (peak RSS under 100 MiB). On 127.0.0.1
/// with 8 connections at 50 MB/s each it keeps them all busy (docs/PERFORMANCE.md).
pub const URL_WINDOW: u64 = 16 << 20;

/// The reorder window of a download for `memory` (`--memory`, None for the default): a
/// quarter of an explicit budget, between 1 MiB and 64 MiB, in whole blocks of `block` bytes
/// (the download's, `decode::url::ranges::BLOCK`).
pub fn url_window(memory: Option<u64>, block: u64) -> u64 {
    match memory {
        None => URL_WINDOW,
        Some(m) => (m / 4).clamp(1 << 20, 64 << 20) / block * block,
    }
}

/// Where the process may use less than this many times DEFAULT_MEMORY (a container or a
/// systemd unit with `MemoryMax` under 256 MiB, `ulimit -v` under 256 MiB), the default budget
/// is this fraction of what it may use, as if `--memory` had said so. In a cgroup v1 memory
/// limit of 64 MiB the default 64 MiB pool was killed by the OOM killer (peak RSS 77 MB on a
/// tarball of /usr/share; GNU tar's is 5 MB); with a 16 MiB budget the peak is 28 MB.
const TIGHT_MEMORY_FRACTION: u64 = 4;

/// The smallest default budget (TIGHT_MEMORY_FRACTION of a smaller limit would be refused as
/// too small for the pool; a process limited to so little fails at its first allocations
/// anyway).
const TIGHT_MEMORY_MIN: u64 = 4 << 20;

/// The default budget where the memory the process may use is tight (TIGHT_MEMORY_FRACTION),
/// None where DEFAULT_MEMORY fits.
pub fn tight_memory(usable: u64) -> Option<u64> {
    let share = usable / TIGHT_MEMORY_FRACTION;
    (share < DEFAULT_MEMORY).then(|| share.max(TIGHT_MEMORY_MIN))
}

/// Bytes of memory this process may use: the least of physical memory, its cgroup's memory
/// limit (a container's; `cgroup_memory_max`) and RLIMIT_AS. Anything unreadable counts as no
/// limit.
pub fn usable_memory() -> u64 {
    // Safety: sysconf has no preconditions.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let mut least = match (u64::try_from(pages), u64::try_from(page)) {
        (Ok(n), Ok(p)) if n > 0 && p > 0 => n.saturating_mul(p),
        _ => u64::MAX,
    };
    for limit in [soft_limit(libc::RLIMIT_AS), cgroup_memory_max()].into_iter().flatten() {
        least = least.min(limit);
    }
    least
}

/// The least memory limit of this process's cgroup and its ancestors, when one sets a limit:
/// `memory.max` under cgroup v2 (the "0::/path" line of /proc/self/cgroup), else
/// `memory.limit_in_bytes` of the v1 memory controller (the "N:memory:/path" line; containers
/// on older hosts).
fn cgroup_memory_max() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let limit = |root: &str, path: &str, file: &str| {
        let root = std::path::Path::new(root);
        let dir = root.join(path.trim_start_matches('/'));
        dir.ancestors()
            .take_while(|d| d.starts_with(root))
            .filter_map(|d| std::fs::read_to_string(d.join(file)).ok()?.trim().parse().ok())
            .min()
    };
    let v2 = cgroups.lines().find_map(|l| l.strip_prefix("0::"));
    let v1 = cgroups.lines().find_map(|l| {
        let (controllers, path) = l.split_once(':')?.1.split_once(':')?;
        controllers.split(',').any(|c| c == "memory").then_some(path)
    });
    let v2 = v2.and_then(|p| limit("/sys/fs/cgroup", p, "memory.max"));
    let v1 = v1.and_then(|p| limit("/sys/fs/cgroup/memory", p, "memory.limit_in_bytes"));
    v2.into_iter().chain(v1).min()
}

/// The least memory budget: MIN_BUFFERS buffers of one alignment unit.
pub const MIN_MEMORY: u64 = (MIN_BUFFERS * BUF_ALIGN) as u64;

/// Splits the memory budget into buffers: CHUNK_SIZE each while that leaves MIN_BUFFERS,
/// smaller (still BUF_ALIGN multiples) below that.
pub fn pool_shape(memory: u64) -> Result<(usize, usize)> {
    if memory < MIN_MEMORY {
        bail!("--memory must be at least {MIN_MEMORY} bytes");
    }
    let memory = usize::try_from(memory.min(1 << 40)).unwrap_or(usize::MAX);
    let size = (memory / MIN_BUFFERS).min(CHUNK_SIZE) / BUF_ALIGN * BUF_ALIGN;
    Ok((size, memory / size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_window_is_part_of_the_budget() {
        // A download's block (decode::url::ranges::BLOCK).
        const BLOCK: u64 = 256 << 10;
        let mib = |p: Pools| (p.files * p.buf_size) as u64 >> 20;
        let big = 1 << 40;
        assert_eq!(url_window(None, BLOCK), 16 << 20);
        assert_eq!(mib(divide(None, 0, false, big, url_window(None, BLOCK)).unwrap()), 48);
        let m = 64 << 20;
        assert_eq!(mib(divide(Some(m), 0, false, big, url_window(Some(m), BLOCK)).unwrap()), 48);
        assert_eq!(url_window(Some(4 << 20), BLOCK), 1 << 20);
        assert_eq!(url_window(Some(1 << 32), BLOCK), 64 << 20);
        assert_eq!(url_window(Some(10 << 20), BLOCK) % (256 << 10), 0);
    }
    const MIB: u64 = 1 << 20;

    /// Bytes of file data and of frames.
    fn bytes(p: Pools) -> (u64, u64) {
        let b = p.buf_size as u64;
        (p.files as u64 * b, p.frames as u64 * b)
    }

    fn mib(p: Pools) -> (u64, u64) {
        let (f, d) = bytes(p);
        (f / MIB, d / MIB)
    }

    #[test]
    fn default_memory_grows_with_workers() {
        let big = 1 << 40;
        // One thread decodes: 64 MiB of file data, as always.
        assert_eq!(mib(divide(None, 0, false, big, 0).unwrap()), (64, 0));
        // One worker: one frame and the reader's extra buffer besides, and the frame the
        // writer holds, from file data.
        assert_eq!(mib(divide(None, 1, false, big, 0).unwrap()), (32, 65));
        // Three workers: a frame each.
        assert_eq!(mib(divide(None, 3, false, big, 0).unwrap()), (32, 129));
        // 31 workers: ~1 GiB, unless a fraction of the machine's memory is less.
        assert_eq!(mib(divide(None, 31, false, big, 0).unwrap()), (32, 1025));
        assert_eq!(mib(divide(None, 31, false, 256 * MIB, 0).unwrap()), (32, 224));
        // One worker's where an eighth of the memory holds it, whatever the rest; less where
        // it does not (`ulimit -v 196608`: 24 MiB, frames streamed, not decoded in place, and
        // file data keeps its share).
        assert_eq!(mib(divide(None, 31, false, 64 * MIB, 0).unwrap()), (32, 65));
        assert_eq!(mib(divide(None, 31, false, 24 * MIB, 0).unwrap()), (64, 24));
        // A URL's window leaves file data too little to give a frame.
        assert_eq!(mib(divide(None, 1, false, big, URL_WINDOW).unwrap()), (48, 33));
        // Listing: the frames only, at least 64 MiB.
        assert_eq!(mib(divide(None, 1, true, big, 0).unwrap()), (0, 64));
        assert_eq!(mib(divide(None, 3, true, big, 0).unwrap()), (0, 97));
        assert_eq!(mib(divide(None, 3, true, 8 * MIB, 0).unwrap()), (0, 64));
        assert_eq!(divide(None, 0, true, big, 0).unwrap().frames, 0);
        // Where less than 256 MiB may be used, a quarter of it, at least 4 MiB.
        assert_eq!(tight_memory(24 << 30), None);
        assert_eq!(tight_memory(256 * MIB), None);
        assert_eq!(tight_memory(64 * MIB), Some(16 * MIB));
        assert_eq!(tight_memory(8 * MIB), Some(4 * MIB));
        assert_eq!(mib(divide(tight_memory(64 * MIB), 1, false, 0, 0).unwrap()), (8, 8));
    }

    #[test]
    fn explicit_memory_is_never_exceeded() {
        for m in [24 << 10, 64 << 10, MIB, 16 * MIB, 64 * MIB, 100 * MIB, 1 << 30] {
            for workers in [0, 1, 3, 63] {
                for listing in [false, true] {
                    let p = divide(Some(m), workers, listing, 0, 0).unwrap();
                    let (f, d) = bytes(p);
                    assert!(f + d <= m, "{m} {workers} {listing}: {p:?}");
                    assert!(p.buf_size.is_multiple_of(BUF_ALIGN) && p.buf_size > 0);
                    if !listing {
                        assert!(p.files >= MIN_BUFFERS, "{m} {workers}: {p:?}");
                    }
                    if workers > 0 && m >= 32 << 10 {
                        assert!(p.frames >= MIN_FRAME_BUFFERS, "{m} {workers} {listing}: {p:?}");
                    }
                }
            }
        }
        // 64M with one worker keeps one whole frame ahead, as the shared pool did.
        assert_eq!(mib(divide(Some(64 * MIB), 1, false, 0, 0).unwrap()), (31, 33));
        // 1G with 3 workers: a frame each, the rest for file data; with 63 workers the frames
        // get all but 64 MiB.
        assert_eq!(mib(divide(Some(1 << 30), 3, false, 0, 0).unwrap()), (927, 97));
        assert_eq!(mib(divide(Some(1 << 30), 63, false, 0, 0).unwrap()), (64, 960));
        // 100M with 3 workers: 64 MiB of file data, the rest (not a frame each) for frames.
        assert_eq!(mib(divide(Some(100 * MIB), 3, false, 0, 0).unwrap()), (64, 36));
        // Too little for two pools: one thread decodes, in all of it.
        let p = divide(Some(28 << 10), 3, false, 0, 0).unwrap();
        assert_eq!((p.buf_size, p.files, p.frames), (4096, 7, 0));
        // The least that has both: 4 buffers of file data, 4 of frames.
        let p = divide(Some(32 << 10), 3, false, 0, 0).unwrap();
        assert_eq!((p.buf_size, p.files, p.frames), (4096, 4, 4));
    }

    #[test]
    fn pool_shapes() {
        assert_eq!(pool_shape(64 << 20).unwrap(), (1 << 20, 64));
        assert_eq!(pool_shape(1 << 20).unwrap(), (256 << 10, 4));
        assert!(pool_shape(100).is_err());
    }
}
