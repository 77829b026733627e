//! Resolved settings: sizes parsed, paths decided, modes chosen. The rest of the program reads
//! only this.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::admit::{Limits, SNAPSHOT_MAX_BYTES, SNAPSHOT_MAX_FILES};
use crate::cli::{Args, IoBackend};
use crate::pool::BUF_ALIGN;

/// Size of one pool buffer and so of the largest single write. 1 MiB: large enough that a
/// direct write reaches the disk's streaming rate (`dd bs=1M oflag=direct` writes 1.5 GB/s
/// here, the device's ceiling), small enough that a 64 MiB pool keeps 64 writes in flight.
pub const CHUNK_SIZE: usize = 1 << 20;

/// Fewest buffers the pool may have: one being filled, some in flight.
pub const MIN_BUFFERS: usize = 4;

#[derive(Debug, Clone)]
pub struct Config {
    /// None for standard input.
    pub archive: Option<PathBuf>,
    pub dest: PathBuf,
    /// List members instead of extracting.
    pub list: bool,
    pub exclude: Vec<String>,
    pub verbose: u8,
    pub keep_old_files: bool,
    pub strip_components: usize,
    pub same_owner: bool,
    pub preserve_permissions: bool,
    /// Some(threshold) when --direct-io is on.
    pub direct_io: Option<u64>,
    pub buf_size: usize,
    pub buf_count: usize,
    pub io: IoBackend,
    pub quiet: bool,
    pub sync: bool,
    pub json: bool,
    pub snapshot: bool,
    pub limits: Limits,
    /// log2 of the largest zstd window accepted.
    pub max_window_log: u32,
    /// zstd decoder threads (frames of a multi-frame archive decode in parallel).
    pub threads: usize,
    /// Writer threads (`write/multi.rs` when more than 1).
    pub writer_threads: usize,
    /// `--writeback-every`: bytes written between syncfs calls while extracting (None: off).
    pub writeback: Option<u64>,
}

impl Config {
    pub fn from_args(args: Args) -> Result<Config> {
        let archive = match args.file.or(args.archive) {
            None => bail!("no archive given (use -f ARCHIVE, or '-' for standard input)"),
            Some(p) if p.as_os_str() == "-" => None,
            Some(p) => Some(p),
        };
        let memory = parse_size(&args.memory).context("--memory")?;
        let threshold = parse_size(&args.direct_io_threshold).context("--direct-io-threshold")?;
        let (buf_size, buf_count) = pool_shape(memory)?;
        let opt_size = |s: &Option<String>, flag: &str| -> Result<Option<u64>> {
            s.as_deref().map(parse_size).transpose().with_context(|| flag.to_string())
        };
        let mut limits = Limits {
            max_files: args.max_files,
            max_bytes: opt_size(&args.max_bytes, "--max-bytes")?,
            max_member_size: opt_size(&args.max_member_size, "--max-member-size")?,
        };
        if args.snapshot {
            limits.max_files = limits.max_files.or(Some(SNAPSHOT_MAX_FILES));
            limits.max_bytes = limits.max_bytes.or(Some(SNAPSHOT_MAX_BYTES));
        }
        let max_window_log = window_log(parse_size(&args.max_window).context("--max-window")?)?;
        Ok(Config {
            archive,
            dest: args.directory,
            list: args.list,
            exclude: args.exclude,
            verbose: args.verbose,
            keep_old_files: args.keep_old_files,
            strip_components: args.strip_components,
            same_owner: args.same_owner && !args.no_same_owner,
            preserve_permissions: args.preserve_permissions,
            direct_io: args.direct_io.then_some(threshold),
            buf_size,
            buf_count,
            io: args.io,
            quiet: args.quiet,
            sync: args.sync,
            json: args.json,
            snapshot: args.snapshot,
            limits,
            max_window_log,
            threads: match args.threads {
                Some(0) => bail!("--threads: must be at least 1"),
                Some(n) => n.min(MAX_THREADS),
                None => default_threads(args.list),
            },
            writer_threads: writer_threads(args.writer_threads)?,
            writeback: Some(parse_size(&args.writeback_every).context("--writeback-every")?)
                .filter(|&n| n > 0),
        })
    }
}

/// Most decoder threads: past the 64 cores of the biggest validators, more threads only add
/// frames in flight that the pool and the writer cannot use.
const MAX_THREADS: usize = 256;

/// zstd decoder threads by default: the CPUs this process may run on (sched_getaffinity, and
/// a cgroup's CPU quota, through `available_parallelism`) when listing; one fewer when
/// extracting, because the writer needs a CPU of its own. Measured on 2 CPUs (4 GB in 119
/// frames): `-t` took 0.57x the time with 2 threads, but extraction none less, to tmpfs, to
/// RAM-backed ext4 or to the disk: the writer's system time (2.4 s of copying into the page
/// cache, or the loop device's worker) already filled the second CPU, and a second decoder
/// only added its copying (docs/PERFORMANCE.md).
fn default_threads(listing: bool) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spare = if listing { cpus } else { cpus - 1 };
    spare.clamp(1, MAX_THREADS)
}

/// Most writer threads by default. On 2 CPUs, 2 writers created the 100,000-file tree in about
/// half the time of 1 and 3-4 were no faster (docs/PERFORMANCE.md); ext4's journal and the
/// directory locks are shared, so past 8 more threads mostly add contention.
const DEFAULT_MAX_WRITERS: usize = 8;

/// `--writer-threads`, else $FASTUNTAR_WRITER_THREADS (which lets the test suites run every
/// case at any count), else the CPUs we may run on, at most DEFAULT_MAX_WRITERS.
fn writer_threads(flag: Option<usize>) -> Result<usize> {
    let env = std::env::var("FASTUNTAR_WRITER_THREADS").ok();
    let n = match (flag, env) {
        (Some(n), _) => n,
        (None, Some(v)) => v.trim().parse().context("FASTUNTAR_WRITER_THREADS: not a number")?,
        (None, None) if few_threads_allowed() => 1,
        (None, None) => default_threads(true).min(DEFAULT_MAX_WRITERS),
    };
    if n == 0 {
        bail!("--writer-threads: must be at least 1");
    }
    Ok(n.min(crate::write::multi::MAX_WRITERS))
}

/// Below this RLIMIT_NPROC (`ulimit -u`, which counts every thread of the user), the default
/// is one writer: each more writer is a thread, and with io_uring its io-wq workers are more.
/// Distributions give users thousands; a limit this low is set on purpose.
const NPROC_FOR_WRITERS: u64 = 256;

/// Whether RLIMIT_NPROC applies to us and is below NPROC_FOR_WRITERS (root is not held to it).
fn few_threads_allowed() -> bool {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // Safety: getrlimit writes the struct it is given; geteuid has no preconditions.
    let (got, root) =
        unsafe { (libc::getrlimit(libc::RLIMIT_NPROC, &mut rl) == 0, libc::geteuid() == 0) };
    got && !root && rl.rlim_cur != libc::RLIM_INFINITY && rl.rlim_cur < NPROC_FOR_WRITERS
}

/// Splits the memory budget into buffers: CHUNK_SIZE each while that leaves MIN_BUFFERS,
/// smaller (still BUF_ALIGN multiples) below that.
fn pool_shape(memory: u64) -> Result<(usize, usize)> {
    let min = (MIN_BUFFERS * BUF_ALIGN) as u64;
    if memory < min {
        bail!("--memory must be at least {min} bytes");
    }
    let memory = usize::try_from(memory.min(1 << 40)).unwrap_or(usize::MAX);
    let size = (memory / MIN_BUFFERS).min(CHUNK_SIZE) / BUF_ALIGN * BUF_ALIGN;
    Ok((size, memory / size))
}

/// The zstd window log for a --max-window size: 2^10 (zstd's minimum) to 2^31 (its maximum),
/// rounded down to a power of two.
fn window_log(size: u64) -> Result<u32> {
    if !(1 << 10..=1 << 31).contains(&size) {
        bail!("--max-window must be between 1K and 2G");
    }
    Ok(63 - size.leading_zeros())
}

/// `123`, `64K`, `64KiB`, `1M`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().with_context(|| format!("invalid size '{s}'"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => bail!("invalid size '{s}' (use a number with an optional K, M, G or T)"),
    };
    n.checked_mul(1 << shift).with_context(|| format!("size '{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn window_logs() {
        assert_eq!(window_log(2 << 30).unwrap(), 31);
        assert_eq!(window_log(128 << 20).unwrap(), 27);
        assert_eq!(window_log(100 << 20).unwrap(), 26);
        assert!(window_log(4 << 30).is_err());
        assert!(window_log(10).is_err());
    }

    #[test]
    fn pool_shapes() {
        assert_eq!(pool_shape(64 << 20).unwrap(), (1 << 20, 64));
        assert_eq!(pool_shape(1 << 20).unwrap(), (256 << 10, 4));
        assert!(pool_shape(100).is_err());
    }
}
