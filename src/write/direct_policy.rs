//! When files are written with O_DIRECT: `--direct-io` (always), `--no-direct-io` (never), or
//! by default `auto`, which decides from the destination filesystem, its O_DIRECT alignment,
//! the bytes that will land (the tree's size, as far as the archive tells it ahead) and each
//! file's size (docs/PERFORMANCE.md, "Direct IO by default" and "Where direct IO starts to
//! pay").
//!
//! `decide` is the decision, a pure function of those facts; `Destination::probe` finds the
//! facts about DIR (one fstatfs of DIR, and a statx and an ioctl on an unnamed O_TMPFILE file
//! in it). `Gate` carries the plan out file by file in the decoder, which tells each file's
//! writer whether it goes direct (`Op::File`'s `direct`): a plan may start buffered and turn
//! direct once enough has landed (`Start::After`).
//!
//! Why auto writes large files direct on ext4, XFS, btrfs without checksums and FUSE: buffered
//! data reaches the disk through the kernel's writeback (one flusher per disk; on this VM
//! ~450 MB/s to the virtio disk and ~260 MB/s through a RAM-backed loop device), direct writes
//! go at the device's rate (1.0-1.7 GB/s). Extract + sync of the 4 GB Agave-shaped archive:
//! 1.7-2.3 s buffered against 1.15-1.4 s direct (issue 31); of a 1.8 GB tree from a 564 MiB
//! archive, 2.31x and 1.64x faster direct (issue 40). Through FUSE (bindfs over ext4,
//! libfuse 2) a 190 MB tree took 5.48 s buffered against 0.81 s direct (medians of 3; not
//! traced, likely the small requests libfuse 2 gets for buffered writes). Where it stays
//! buffered:
//! - files under the threshold: a small file is mostly its unaligned tail, and its fallocate and
//!   fcntl cost more than the copy they save (`DEFAULT_THRESHOLD`);
//! - a tree under `AUTO_MIN_TREE`: there buffered returns first and is as fast to durable, and
//!   the tree stays in the page cache for whatever reads it next (the trade-off Agave met:
//!   their index build, which reads the files back, took 42.8 s after a buffered untar and
//!   51.0 s after a direct one);
//! - tmpfs and ramfs: the "disk" is the page cache (tmpfs takes O_DIRECT since Linux 6.6 and
//!   copies into the same pages; ramfs refuses it);
//! - btrfs with data checksums (the default): btrfs turns an O_DIRECT write into a buffered
//!   one and then waits for its writeback, so it is slower than buffered (a 1.1 GB tree on the
//!   virtio disk: 2.95 s against 1.91 s);
//! - filesystems not measured (NFS, overlayfs, f2fs, ...): as GNU tar, buffered;
//! - a filesystem that says no to O_DIRECT for a new file (STATX_DIOALIGN 0: ext4 with
//!   `data=journal`), or needs more alignment than the buffer pool gives.
//!
//! The tree's size is known ahead only in part (`Arrival`): a plain tar's size bounds it; a
//! compressed archive's size is about the least it unpacks to (compression never grows data
//! by more than a few bytes a block), so an archive of `AUTO_MIN_TREE` or more goes direct from
//! the first file; a zstd frame header may declare its content size (the zstd CLI writes it
//! for a file it was given, Agave for every 32 MiB frame). Where that leaves it open (a
//! smaller compressed archive, gzip, xz, bzip2, a pipe, a URL without a Content-Length) the
//! run starts buffered and switches files of the threshold and more to direct once
//! `AUTO_MIN_TREE` bytes of files have landed, or earlier when the archive's size is known and
//! the ratio seen so far (bytes of files per archive byte read) says the tree will reach it.

use std::os::fd::RawFd;

use super::align::{self, NewFile};
use super::direct::DirectPolicy;
use super::plan::DirectIo;

/// Smallest file written direct by `auto` (and by `--direct-io` unless
/// `--direct-io-threshold` says otherwise).
// 64 KiB measured best for `--direct-io` (docs/perf-log.md, "Where the time goes"): the
// snapshot 3.62/3.15 s against 4.28/3.44 s at 4K and 3.70/3.19 s at 1M.
pub const DEFAULT_THRESHOLD: u64 = 64 << 10;

/// `auto` writes every file buffered when the tree is smaller than this, and files of the
/// threshold and more direct once this much has landed (or is known to land).
// The crossover measured on Agave-shaped archives (docs/PERFORMANCE.md, "Where direct IO
// starts to pay"; scripts/direct-crossover.sh, 5 interleaved rounds): direct / buffered time,
// extract + sync, on RAM-backed ext4 / the virtio disk, at load 2.5-5.4 [and 9-12]:
//   70 MB tree: 1.26 / 1.10 [1.39 / 1.39]        190 MB: 0.81 / 0.86 [0.87 / 1.23]
//   247 MB: [1.09 / 0.74]                        381 MB: 1.06 / 0.96 [0.95 / 1.40]
//   868 MB: 0.97 / 0.90 [0.93 / 0.85]            1.8 GB: 1.22 / 1.01 [0.97 / 0.88]
// (issue 40's measurement of its 1.8 GB tree: 0.43 / 0.61). To return (no
// sync) buffered stays ahead up to 381-868 MB. Under ~200 MB buffered wins or ties both
// ways; from ~400 MB direct wins to durable and costs less CPU (0.61 against 0.71 CPU-s at
// 868 MB). 256 MiB lies between the two crossovers.
pub const AUTO_MIN_TREE: u64 = 256 << 20;

/// Archive bytes read before the ratio seen so far is trusted to predict the tree
/// (`Switch::reached`): past the first frames, whose read-ahead by the decoder threads makes
/// the ratio look smaller than it is, and a few MiB of a gzip or xz stream; of an archive
/// smaller than 8 times this, an eighth.
pub const RATIO_SAMPLE: u64 = 16 << 20;

/// Filesystem magic numbers (statfs(2) f_type) that the policy tells apart. RAMFS_MAGIC is not
/// in the libc crate.
mod magic {
    pub const EXT4: u32 = 0xEF53;
    pub const XFS: u32 = 0x5846_5342;
    pub const BTRFS: u32 = 0x9123_683E;
    pub const TMPFS: u32 = 0x0102_1994;
    pub const RAMFS: u32 = 0x8584_58F6;
    pub const FUSE: u32 = 0x6573_5546;
}

/// The destination's filesystem, as far as direct IO goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    /// ext2, ext3 and ext4 (one magic number).
    Ext4,
    Xfs,
    Btrfs,
    Tmpfs,
    Ramfs,
    Fuse,
    /// Anything else, by its statfs magic number (0 when statfs failed).
    Other(u32),
}

impl Fs {
    fn from_magic(m: u32) -> Fs {
        match m {
            magic::EXT4 => Fs::Ext4,
            magic::XFS => Fs::Xfs,
            magic::BTRFS => Fs::Btrfs,
            magic::TMPFS => Fs::Tmpfs,
            magic::RAMFS => Fs::Ramfs,
            magic::FUSE => Fs::Fuse,
            m => Fs::Other(m),
        }
    }

    /// For `-v` and `--json`.
    pub fn name(&self) -> String {
        match self {
            Fs::Ext4 => "ext4".into(),
            Fs::Xfs => "xfs".into(),
            Fs::Btrfs => "btrfs".into(),
            Fs::Tmpfs => "tmpfs".into(),
            Fs::Ramfs => "ramfs".into(),
            Fs::Fuse => "fuse".into(),
            Fs::Other(m) => format!("0x{m:x}"),
        }
    }
}

/// The facts about DIR that the decision reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destination {
    pub fs: Fs,
    pub new_file: NewFile,
}

impl Destination {
    /// Looks at the directory `dirfd` (the destination, open).
    pub fn probe(dirfd: RawFd) -> Destination {
        let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // Safety: dirfd is open and st points to writable memory of the right size.
        let r = unsafe { libc::fstatfs(dirfd, st.as_mut_ptr()) };
        let fs = match r {
            // Safety: fstatfs succeeded and the buffer was zero-initialised.
            0 => Fs::from_magic(unsafe { st.assume_init() }.f_type as u32),
            _ => Fs::Other(0),
        };
        Destination { fs, new_file: align::new_file(dirfd) }
    }
}

/// Why the plan is what it is (`-v`, `--json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// `--direct-io`.
    Asked,
    /// `--no-direct-io`.
    Declined,
    /// auto: a filesystem where direct writes of large files win (ext4, XFS, btrfs without
    /// checksums, FUSE), and an archive of at least AUTO_MIN_TREE: its tree is at least that.
    LargeArchive,
    /// auto: as LargeArchive, a zstd frame that declares at least AUTO_MIN_TREE.
    LargeFrame,
    /// auto: the tree's size is not known ahead: buffered until it is seen to pass
    /// AUTO_MIN_TREE (`Start::After`).
    UnknownTree,
    /// auto: a plain tar smaller than AUTO_MIN_TREE (its tree is smaller still).
    SmallArchive,
    /// auto: tmpfs or ramfs.
    InMemory,
    /// auto: btrfs with data checksums.
    Checksums,
    /// auto: a filesystem not measured.
    Unmeasured,
    /// The filesystem does not do O_DIRECT for a new file.
    Unsupported,
    /// The filesystem needs more alignment than the buffer pool gives.
    Alignment(usize),
}

impl Why {
    /// One word for `--json`.
    pub fn key(&self) -> &'static str {
        match self {
            Why::Asked => "asked",
            Why::Declined => "declined",
            Why::LargeArchive => "large_archive",
            Why::LargeFrame => "large_frame",
            Why::UnknownTree => "unknown_tree",
            Why::SmallArchive => "small_archive",
            Why::InMemory => "in_memory_fs",
            Why::Checksums => "btrfs_checksums",
            Why::Unmeasured => "unmeasured_fs",
            Why::Unsupported => "no_o_direct",
            Why::Alignment(_) => "alignment",
        }
    }
}

/// What is known of the archive before it is read: what tells the size of the tree ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Its bytes as they arrive: a regular file's size, a URL's Content-Length; None from a
    /// pipe, a device, `-I PROG`'s output or a URL without a length.
    pub size: Option<u64>,
    pub packing: Packing,
}

impl Arrival {
    /// An archive of `format` (as detected: a `-I` program's output is the tar stream, of
    /// unknown size), `size` bytes when known, whose first zstd frame declares `first_frame`.
    pub fn new(format: crate::decode::Format, size: Option<u64>, first_frame: Option<u64>) -> Self {
        use crate::decode::Format;
        let packing = match format {
            Format::Plain => Packing::Plain,
            Format::Zstd => Packing::Zstd { first_frame },
            Format::Gzip | Format::Bzip2 | Format::Lz4 | Format::Xz => Packing::Compressed,
        };
        Arrival { size, packing }
    }
}

/// How the tar stream is packed in the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// The tar stream itself: the tree is at most the archive's size.
    Plain,
    /// zstd, with the first frame's Frame_Content_Size where its header has one.
    Zstd { first_frame: Option<u64> },
    /// gzip, xz, bzip2, lz4, or a program's output: nothing of the content's size ahead
    /// (gzip's ISIZE and xz's index sit at the end, and not on a pipe).
    Compressed,
}

/// From when files of the threshold and more go direct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// From the first file.
    Now,
    /// Once the files seen before one reach `Switch::reached`.
    After(Switch),
}

/// The turn from buffered to direct of a plan that starts buffered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Bytes of files that land first (AUTO_MIN_TREE).
    pub landed: u64,
    /// The archive's size, when known: the ratio seen so far predicts the tree from it.
    pub archive: Option<u64>,
}

impl Switch {
    /// Whether files go direct from here on, after `landed` bytes of files and `consumed`
    /// bytes of the archive read: the tree has passed the mark, or (the archive's size known,
    /// RATIO_SAMPLE or an eighth of it read) `landed / consumed` of the whole archive will.
    pub fn reached(&self, landed: u64, consumed: u64) -> bool {
        if landed >= self.landed {
            return true;
        }
        let Some(archive) = self.archive else { return false };
        if consumed < RATIO_SAMPLE.min(archive / 8) || consumed == 0 {
            return false;
        }
        let predicted = u128::from(landed) * u128::from(archive) / u128::from(consumed);
        predicted >= u128::from(self.landed)
    }
}

/// The plan carried out file by file, in the decoder (extract.rs): whether each file goes
/// direct, as its header arrives, from the files before it.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    threshold: Option<u64>,
    start: Start,
    /// Bytes of the files seen so far.
    landed: u64,
    /// Files of the threshold and more go direct from here on.
    open: bool,
}

/// A file's way through the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Passage {
    /// The file is written with O_DIRECT.
    pub direct: bool,
    /// This file opened the gate: the archive's pages may be dropped behind the reader from
    /// now on (`Input::drop_behind`).
    pub opened: bool,
}

impl Gate {
    pub fn new(plan: &Plan) -> Gate {
        let open = plan.threshold.is_some() && plan.start == Start::Now;
        Gate { threshold: plan.threshold, start: plan.start, landed: 0, open }
    }

    /// A file of `size` bytes (`sparse`: never direct) whose header came after `consumed`
    /// bytes of the archive were read.
    pub fn file(&mut self, size: u64, sparse: bool, consumed: u64) -> Passage {
        let mut opened = false;
        if !self.open
            && self.threshold.is_some()
            && let Start::After(switch) = self.start
            && switch.reached(self.landed, consumed)
        {
            self.open = true;
            opened = true;
        }
        self.landed = self.landed.saturating_add(size);
        let direct = self.open && !sparse && self.threshold.is_some_and(|t| size >= t);
        Passage { direct, opened }
    }
}

/// What the writers do, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub asked: DirectIo,
    /// Files of at least this many bytes (and not sparse) are written direct; None: none is.
    pub threshold: Option<u64>,
    /// From when they are (`Now` where none is).
    pub start: Start,
    /// The O_DIRECT alignment used (the pool's when no file goes direct).
    pub align: usize,
    pub fs: Fs,
    /// What the filesystem said it needs (None: no O_DIRECT for a new file), for `--json`.
    pub fs_align: Option<usize>,
    pub why: Why,
}

/// Under this many bytes of archive, a plan that starts buffered keeps the portable writers
/// (`Plan::ring_for_direct`): between the 84 MB archive measured faster that way and the
/// 129 MB one measured faster through io_uring.
pub const SMALL_ARCHIVE_PORTABLE: u64 = 96 << 20;

impl Plan {
    /// Whether `--io auto` takes io_uring for its direct writes (`write::uring_first`): where
    /// files may go direct, except for a plan that starts buffered where the process may use
    /// little memory (`tight`: budget.rs `tight_memory`, a container's cgroup limit). There
    /// io_uring's buffered writes, run by io-wq workers, outran the cgroup's dirty-page
    /// throttling: in a memory cgroup of 64 MiB the OOM killer took fastuntar in 2 of 6 runs
    /// of `small_memory_limits_shrink_the_default_budget` (an io-wq worker charging a
    /// page-cache folio), the portable writer in none of 8; that writer writes direct too once
    /// the gate opens, though synchronously (on the virtio disk a 381 MB tree took 0.94 s that
    /// way against 0.63 s through io_uring).
    ///
    /// Nor for a plan that starts buffered on an archive known to be under
    /// `SMALL_ARCHIVE_PORTABLE`: quiet, io_uring's set-up and buffered path cost 20-30 ms more
    /// than the portable writers on trees of 70 and 247 MB (23 and 84 MB of zstd; extract +
    /// sync 1.12-1.36x issue 31's default, the portable writers 1.00x; PERFORMANCE.md, "Where
    /// direct IO starts to pay"), while from the 129 MB archive of a 381 MB tree on, the gate
    /// opens early and the ring's direct writes pay (0.63 against 0.94 s).
    pub fn ring_for_direct(&self, tight: bool) -> bool {
        match (self.threshold, self.start) {
            (None, _) => false,
            (Some(_), Start::Now) => true,
            (Some(_), Start::After(s)) => {
                !tight && s.archive.is_none_or(|a| a >= SMALL_ARCHIVE_PORTABLE)
            }
        }
    }

    /// The writers' share of it.
    pub fn policy(&self) -> DirectPolicy {
        DirectPolicy { threshold: self.threshold, align: self.align, asked: self.asked }
    }

    /// The warning `--direct-io` gets when the destination cannot do what it asked.
    pub fn warning(&self) -> Option<String> {
        match (self.asked, self.why) {
            (DirectIo::Always, Why::Alignment(a)) => Some(format!(
                "the destination needs {a}-byte alignment for O_DIRECT, more than the pool gives; writing buffered"
            )),
            (DirectIo::Always, Why::Unsupported) => Some(
                "the destination filesystem does not support O_DIRECT; writing buffered".into(),
            ),
            _ => None,
        }
    }

    /// The `-v` words: which files went which way, and why.
    pub fn describe(&self) -> String {
        let mode = match self.asked {
            DirectIo::Auto => "auto",
            DirectIo::Always => "--direct-io",
            DirectIo::Never => "--no-direct-io",
        };
        let when = match self.start {
            Start::Now => String::new(),
            Start::After(s) => format!(" once {} of files have landed", size(s.landed)),
        };
        let what = match self.threshold {
            Some(0) => format!("every file direct{when}"),
            Some(t) => format!("files of {} and more direct{when}, smaller ones buffered", size(t)),
            None => "every file buffered".to_string(),
        };
        let fs = self.fs.name();
        let why = match (self.why, self.start) {
            (Why::Asked | Why::Declined, _) => String::new(),
            (Why::LargeArchive, _) => {
                format!(": {fs} writes large files faster direct, and the archive is large")
            }
            (Why::LargeFrame, _) => {
                format!(": {fs} writes large files faster direct, and a zstd frame is large")
            }
            (Why::UnknownTree, Start::After(s)) if s.archive.is_some() => format!(
                ": {fs} writes large files faster direct past {}, or sooner where the ratio so \
                 far says the tree will reach it",
                size(s.landed)
            ),
            (Why::UnknownTree, _) => {
                format!(": {fs} writes large files faster direct past the size not known ahead")
            }
            (Why::SmallArchive, _) => format!(": a tar under {}", size(AUTO_MIN_TREE)),
            (Why::InMemory, _) => format!(": {fs} keeps files in memory"),
            (Why::Checksums, _) => {
                ": btrfs with data checksums writes O_DIRECT buffered".to_string()
            }
            (Why::Unmeasured, _) => format!(": not measured on this filesystem ({fs})"),
            (Why::Unsupported, _) => ": the filesystem does not support O_DIRECT".to_string(),
            (Why::Alignment(a), _) => format!(": the filesystem needs {a}-byte alignment"),
        };
        format!("direct IO {mode}: {what}{why}")
    }

    /// The `--json` object.
    pub fn json(&self) -> String {
        let threshold = self.threshold.map_or("null".to_string(), |t| t.to_string());
        // Bytes of files that land before files go direct: 0 from the start, null for none.
        let after = match (self.threshold, self.start) {
            (None, _) => "null".to_string(),
            (Some(_), Start::Now) => "0".to_string(),
            (Some(_), Start::After(s)) => s.landed.to_string(),
        };
        let large = if self.threshold.is_some() { "direct" } else { "buffered" };
        let small = if self.threshold == Some(0) { "direct" } else { "buffered" };
        let mode = match self.asked {
            DirectIo::Auto => "auto",
            DirectIo::Always => "always",
            DirectIo::Never => "never",
        };
        format!(
            "{{\"mode\":\"{mode}\",\"filesystem\":\"{}\",\"alignment\":{},\"threshold\":{threshold},\"after\":{after},\"small\":\"{small}\",\"large\":\"{large}\",\"reason\":\"{}\"}}",
            self.fs.name(),
            self.fs_align.map_or("null".to_string(), |a| a.to_string()),
            self.why.key()
        )
    }
}

/// `n` bytes in the units of the size options (64 KiB, 1 MiB, 256 MiB).
fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n.is_multiple_of(1 << 30) => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The decision. `asked`: the flags; `threshold`: the smallest direct file; `dest`: the probed
/// destination; `arrival`: what the archive tells of its tree ahead; `min_tree`: the tree
/// from which auto writes direct (AUTO_MIN_TREE; the test suite's hidden
/// `--debug-direct-after` sets another); `pool_align`: the alignment every pool buffer has
/// (address and length), which O_DIRECT needs of the data.
pub fn decide(
    asked: DirectIo,
    threshold: u64,
    dest: &Destination,
    arrival: Arrival,
    min_tree: u64,
    pool_align: usize,
) -> Plan {
    let fs_align = dest.new_file.align;
    let buffered = |why| Plan {
        asked,
        threshold: None,
        start: Start::Now,
        align: pool_align,
        fs: dest.fs,
        fs_align,
        why,
    };
    match (asked, dest.fs) {
        (DirectIo::Never, _) => return buffered(Why::Declined),
        (DirectIo::Always, _) => {}
        (_, Fs::Tmpfs | Fs::Ramfs) => return buffered(Why::InMemory),
        (_, Fs::Btrfs) if !dest.new_file.nocow => return buffered(Why::Checksums),
        (_, Fs::Other(_)) => return buffered(Why::Unmeasured),
        (_, Fs::Ext4 | Fs::Xfs | Fs::Btrfs | Fs::Fuse) => {}
    }
    let align = match dest.new_file.align {
        None => return buffered(Why::Unsupported),
        Some(a) if a > pool_align || !pool_align.is_multiple_of(a) => {
            return buffered(Why::Alignment(a));
        }
        Some(a) => a,
    };
    let (start, why) = match asked {
        DirectIo::Auto => match tree_ahead(arrival, min_tree) {
            Ahead::Small => return buffered(Why::SmallArchive),
            Ahead::Large(why) => (Start::Now, why),
            Ahead::Unknown => {
                let switch = Switch { landed: min_tree, archive: arrival.size };
                (Start::After(switch), Why::UnknownTree)
            }
        },
        _ => (Start::Now, Why::Asked),
    };
    Plan { asked, threshold: Some(threshold), start, align, fs: dest.fs, fs_align, why }
}

/// What the arrival says of the tree against `min_tree`, before any of it lands.
enum Ahead {
    /// Smaller: a plain tar under it.
    Small,
    /// At least as large.
    Large(Why),
    /// Not known ahead.
    Unknown,
}

fn tree_ahead(arrival: Arrival, min_tree: u64) -> Ahead {
    match (arrival.packing, arrival.size) {
        (Packing::Plain, Some(n)) if n < min_tree => Ahead::Small,
        // A tar stream is at least about as large as the archive that packs it.
        (_, Some(n)) if n >= min_tree => Ahead::Large(Why::LargeArchive),
        (Packing::Zstd { first_frame: Some(n) }, _) if n >= min_tree => {
            Ahead::Large(Why::LargeFrame)
        }
        _ => Ahead::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Format;

    const POOL: usize = 4096;
    const GB: u64 = 1 << 30;
    const MB: u64 = 1 << 20;
    const T: u64 = AUTO_MIN_TREE;

    fn dest(fs: Fs, align: Option<usize>, nocow: bool) -> Destination {
        Destination { fs, new_file: NewFile { align, nocow } }
    }

    fn ext4() -> Destination {
        dest(Fs::Ext4, Some(512), false)
    }

    /// Where the archive comes from: what its size is known as.
    #[derive(Clone, Copy, Debug)]
    enum Source {
        /// A regular file of this size.
        File(u64),
        /// A pipe (or `-I PROG`'s output): no size.
        Pipe,
        /// A URL, with its Content-Length or without.
        Url(Option<u64>),
    }

    fn arrival(format: Format, from: Source, first_frame: Option<u64>) -> Arrival {
        let size = match from {
            Source::File(n) => Some(n),
            Source::Pipe => None,
            Source::Url(n) => n,
        };
        Arrival::new(format, size, first_frame)
    }

    /// (format, where from, first frame's content size) → (start, why).
    type InputRow = (Format, Source, Option<u64>, Option<Start>, Why);

    /// The decision on each kind of input, on ext4 where direct writes win: (format, where
    /// from, the first zstd frame's content size) → (when files of 64 KiB and more go direct,
    /// why). None: never.
    #[test]
    fn decisions_by_input() {
        use Format::{Bzip2, Gzip, Lz4, Plain, Xz, Zstd};
        use Source::{File, Pipe, Url};
        let after = |archive| Some(Start::After(Switch { landed: T, archive }));
        let now = Some(Start::Now);
        // An archive as the issue's: 615 MB of 32 MiB zstd frames (content size in each) that
        // unpacks to 1.8 GB.
        let agave = 615_000_000;
        #[rustfmt::skip]
        let table: &[InputRow] = &[
            // zstd with the content size in its first frame: one frame of the whole tree, or
            // a large first frame, is large from the start; Agave's 32 MiB frames say little.
            (Zstd, File(100 * MB), Some(2 * GB), now, Why::LargeFrame),
            (Zstd, File(100 * MB), Some(T), now, Why::LargeFrame),
            (Zstd, Pipe, Some(3 * GB), now, Why::LargeFrame),
            (Zstd, Url(None), Some(T), now, Why::LargeFrame),
            (Zstd, File(agave), Some(32 * MB), now, Why::LargeArchive),
            (Zstd, File(T / 2), Some(32 * MB), after(Some(T / 2)), Why::UnknownTree),
            (Zstd, File(10 * MB), Some(T - 1), after(Some(10 * MB)), Why::UnknownTree),
            (Zstd, Pipe, Some(32 * MB), after(None), Why::UnknownTree),
            // zstd without it (`tar | zstd`): the archive's size where known
            (Zstd, File(agave), None, now, Why::LargeArchive),
            (Zstd, File(T), None, now, Why::LargeArchive),
            (Zstd, File(T - 1), None, after(Some(T - 1)), Why::UnknownTree),
            (Zstd, File(0), None, after(Some(0)), Why::UnknownTree),
            (Zstd, Pipe, None, after(None), Why::UnknownTree),
            // gzip, xz, bzip2, lz4: no content size ahead
            (Gzip, File(4 * GB), None, now, Why::LargeArchive),
            (Gzip, File(50 * MB), None, after(Some(50 * MB)), Why::UnknownTree),
            (Gzip, Pipe, None, after(None), Why::UnknownTree),
            (Xz, File(T), None, now, Why::LargeArchive),
            (Xz, File(T / 4), None, after(Some(T / 4)), Why::UnknownTree),
            (Xz, Pipe, None, after(None), Why::UnknownTree),
            (Bzip2, File(T / 4), None, after(Some(T / 4)), Why::UnknownTree),
            (Lz4, Pipe, None, after(None), Why::UnknownTree),
            // a plain tar: its size bounds the tree
            (Plain, File(T - 1), None, None, Why::SmallArchive),
            (Plain, File(0), None, None, Why::SmallArchive),
            (Plain, File(T), None, now, Why::LargeArchive),
            (Plain, Pipe, None, after(None), Why::UnknownTree),
            // a URL: its Content-Length is an archive size like a file's
            (Zstd, Url(Some(agave)), None, now, Why::LargeArchive),
            (Zstd, Url(Some(T / 2)), Some(32 * MB), after(Some(T / 2)), Why::UnknownTree),
            (Gzip, Url(Some(T / 2)), None, after(Some(T / 2)), Why::UnknownTree),
            (Plain, Url(Some(MB)), None, None, Why::SmallArchive),
            (Plain, Url(Some(2 * GB)), None, now, Why::LargeArchive),
            (Zstd, Url(None), None, after(None), Why::UnknownTree),
            (Gzip, Url(None), None, after(None), Why::UnknownTree),
            (Plain, Url(None), None, after(None), Why::UnknownTree),
        ];
        for &(format, from, frame, start, why) in table {
            let a = arrival(format, from, frame);
            let plan = decide(DirectIo::Auto, DEFAULT_THRESHOLD, &ext4(), a, T, POOL);
            let row = format!("{format:?} from {from:?}, first frame {frame:?}");
            let got = plan.threshold.map(|_| plan.start);
            assert_eq!((got, plan.why), (start, why), "{row}");
            if start.is_some() {
                assert_eq!(plan.threshold, Some(DEFAULT_THRESHOLD), "{row}");
            }
            // --direct-io and --no-direct-io take no notice of the archive.
            let always = decide(DirectIo::Always, DEFAULT_THRESHOLD, &ext4(), a, T, POOL);
            assert_eq!((always.start, always.why), (Start::Now, Why::Asked), "{row}");
            let never = decide(DirectIo::Never, DEFAULT_THRESHOLD, &ext4(), a, T, POOL);
            assert_eq!((never.threshold, never.why), (None, Why::Declined), "{row}");
        }
    }

    /// (asked, filesystem, alignment, nocow) with a large archive → (threshold, why).
    type Row = (DirectIo, Fs, Option<usize>, bool, Option<u64>, Why);

    /// The table of filesystems and flags.
    #[test]
    fn decisions_by_destination() {
        use DirectIo::{Always, Auto, Never};
        let t = DEFAULT_THRESHOLD;
        let large = Arrival { size: Some(4 * GB), packing: Packing::Plain };
        #[rustfmt::skip]
        let table: &[Row] = &[
            // auto, where direct IO wins: large files direct.
            (Auto, Fs::Ext4, Some(512), false, Some(t), Why::LargeArchive),
            (Auto, Fs::Xfs, Some(512), false, Some(t), Why::LargeArchive),
            (Auto, Fs::Ext4, Some(4096), false, Some(t), Why::LargeArchive),
            // btrfs: direct only where new files have no checksums
            (Auto, Fs::Btrfs, Some(4096), false, None, Why::Checksums),
            (Auto, Fs::Btrfs, Some(4096), true, Some(t), Why::LargeArchive),
            // memory, the unmeasured: buffered whatever the archive
            (Auto, Fs::Tmpfs, Some(4096), false, None, Why::InMemory),
            (Auto, Fs::Ramfs, None, false, None, Why::InMemory),
            (Auto, Fs::Fuse, Some(4096), false, Some(t), Why::LargeArchive),
            (Auto, Fs::Other(0x6969), Some(4096), false, None, Why::Unmeasured),
            (Auto, Fs::Other(0), Some(4096), false, None, Why::Unmeasured),
            // no O_DIRECT for a new file (ext4 data=journal), or more alignment than the pool
            (Auto, Fs::Ext4, None, false, None, Why::Unsupported),
            (Auto, Fs::Xfs, Some(8192), false, None, Why::Alignment(8192)),
            (Auto, Fs::Xfs, Some(3000), false, None, Why::Alignment(3000)),
            // --direct-io: wherever O_DIRECT can be had
            (Always, Fs::Ext4, Some(512), false, Some(t), Why::Asked),
            (Always, Fs::Tmpfs, Some(4096), false, Some(t), Why::Asked),
            (Always, Fs::Btrfs, Some(4096), false, Some(t), Why::Asked),
            (Always, Fs::Fuse, Some(4096), false, Some(t), Why::Asked),
            (Always, Fs::Ramfs, None, false, None, Why::Unsupported),
            (Always, Fs::Ext4, Some(8192), false, None, Why::Alignment(8192)),
            // --no-direct-io: never
            (Never, Fs::Ext4, Some(512), false, None, Why::Declined),
            (Never, Fs::Btrfs, Some(4096), true, None, Why::Declined),
        ];
        for &(asked, fs, align, nocow, threshold, why) in table {
            let plan = decide(asked, t, &dest(fs, align, nocow), large, T, POOL);
            let row = format!("{asked:?} {fs:?} align {align:?} nocow {nocow}");
            assert_eq!((plan.threshold, plan.why), (threshold, why), "{row}");
            assert_eq!(plan.fs, fs, "{row}");
            // The alignment used is the filesystem's where files go direct.
            let want_align = if threshold.is_some() { align.unwrap() } else { POOL };
            assert_eq!(plan.align, want_align, "{row}");
            // --json says what the filesystem needs, whatever was decided.
            assert_eq!(plan.fs_align, align, "{row}");
        }
        // A filesystem that keeps auto buffered does so whatever the archive says.
        let pipe = Arrival { size: None, packing: Packing::Zstd { first_frame: None } };
        for (fs, why) in [(Fs::Tmpfs, Why::InMemory), (Fs::Other(1), Why::Unmeasured)] {
            let plan = decide(Auto, t, &dest(fs, Some(512), false), pipe, T, POOL);
            assert_eq!((plan.threshold, plan.why), (None, why), "{fs:?}");
        }
    }

    /// When a plan that starts buffered turns direct: (mark, archive size, bytes of files
    /// landed, archive bytes read) → reached.
    #[test]
    fn switch_points() {
        let s = RATIO_SAMPLE;
        #[rustfmt::skip]
        let table: &[(u64, Option<u64>, u64, u64, bool)] = &[
            // The files that landed pass the mark, whatever was read.
            (T, None, T - 1, 10 * GB, false),
            (T, None, T, 0, true),
            (T, Some(MB), T + 1, MB, true),
            // The ratio so far: 3x of a 200 MiB archive will be 600 MiB, past the mark.
            (T, Some(200 * MB), 3 * s, s, true),
            // 1x of it will be 200 MiB: not yet.
            (T, Some(200 * MB), s, s, false),
            // Not before RATIO_SAMPLE has been read (the decoders read frames ahead) ...
            (T, Some(200 * MB), 3 * (s - 1), s - 1, false),
            // ... or an eighth of an archive smaller than 8 times that.
            (T, Some(s / 2), T / 2, s / 4, true),
            (T, Some(s / 2), T / 4, s / 4, false),
            (T, Some(s / 2), T / 2, s / 16, true),
            (T, Some(s / 2), T / 2, s / 16 - 1, false),
            // Exactly at the mark.
            (T, Some(T), s, s, true),
            (T, Some(T), s - 1, s, false),
            // Nothing read or no size: only the landed bytes count.
            (T, Some(0), 0, 0, false),
            (T, None, T / 2, s, false),
            // No overflow on huge counts.
            (T, Some(u64::MAX), u64::MAX / 2, u64::MAX, true),
        ];
        for &(landed_mark, archive, landed, consumed, want) in table {
            let sw = Switch { landed: landed_mark, archive };
            assert_eq!(sw.reached(landed, consumed), want, "{sw:?} {landed} {consumed}");
        }
    }

    /// The gate, file by file: (size, sparse, archive bytes read) → direct, opened.
    #[test]
    fn gate_turns_once_and_stays() {
        let t = DEFAULT_THRESHOLD;
        let mark = 200 << 10;
        let pipe = Arrival { size: None, packing: Packing::Plain };
        let plan = decide(DirectIo::Auto, t, &ext4(), pipe, mark, POOL);
        assert_eq!(plan.start, Start::After(Switch { landed: mark, archive: None }));
        let mut gate = Gate::new(&plan);
        #[rustfmt::skip]
        let files: &[(u64, bool, bool, bool)] = &[
            // 0 landed before it: buffered, large as it is
            (150 << 10, false, false, false),
            // 150 KiB before it
            (t, false, false, false),
            // 214 KiB before it: the gate opens, this one is small
            (100, false, false, true),
            (t, false, true, false),
            (t - 1, false, false, false),
            // sparse files never go direct
            (GB, true, false, false),
            (GB, false, true, false),
        ];
        for (i, &(size, sparse, direct, opened)) in files.iter().enumerate() {
            let p = gate.file(size, sparse, 0);
            assert_eq!(p, Passage { direct, opened }, "file {i} of {size} bytes");
        }
        // From the start: open at once, never "opened" (the caller drops pages behind from
        // the start).
        let large = Arrival { size: Some(GB), packing: Packing::Plain };
        let mut gate = Gate::new(&decide(DirectIo::Auto, t, &ext4(), large, mark, POOL));
        assert_eq!(gate.file(t, false, 0), Passage { direct: true, opened: false });
        assert_eq!(gate.file(t - 1, false, 0), Passage { direct: false, opened: false });
        // Never: whatever lands.
        let small = Arrival { size: Some(100 << 10), packing: Packing::Plain };
        let mut gate = Gate::new(&decide(DirectIo::Auto, t, &ext4(), small, mark, POOL));
        for _ in 0..10 {
            assert_eq!(gate.file(GB, false, GB), Passage { direct: false, opened: false });
        }
        // The ratio: a 100 MiB gzip file whose first RATIO_SAMPLE read brought 4x as much.
        let gz = Arrival::new(Format::Gzip, Some(100 * MB), None);
        let mut gate = Gate::new(&decide(DirectIo::Auto, t, &ext4(), gz, T, POOL));
        assert!(!gate.file(4 * RATIO_SAMPLE, false, RATIO_SAMPLE).direct);
        assert_eq!(gate.file(MB, false, RATIO_SAMPLE), Passage { direct: true, opened: true });
    }

    /// Which plans take io_uring for their direct writes: (arrival, asked, tight memory) →
    /// ring.
    #[test]
    fn which_plans_want_the_ring() {
        let zst = |size| Arrival { size, packing: Packing::Zstd { first_frame: None } };
        let tar = |size| Arrival { size, packing: Packing::Plain };
        #[rustfmt::skip]
        let table: &[(Arrival, DirectIo, bool, bool)] = &[
            // direct from the first file, whatever the memory
            (zst(Some(GB)), DirectIo::Auto, false, true),
            (zst(Some(GB)), DirectIo::Auto, true, true),
            (tar(Some(T)), DirectIo::Auto, true, true),
            (tar(Some(MB)), DirectIo::Always, true, true),
            // buffered until the mark: the ring unless memory is tight
            (zst(None), DirectIo::Auto, false, true),
            (zst(Some(T / 2)), DirectIo::Auto, false, true),
            (Arrival::new(Format::Gzip, Some(SMALL_ARCHIVE_PORTABLE), None), DirectIo::Auto, false, true),
            // ... but the portable writers for an archive known to be small
            (Arrival::new(Format::Gzip, Some(MB), None), DirectIo::Auto, false, false),
            (zst(Some(SMALL_ARCHIVE_PORTABLE - 1)), DirectIo::Auto, false, false),
            (zst(None), DirectIo::Auto, true, false),
            (zst(Some(T / 2)), DirectIo::Auto, true, false),
            // never direct
            (tar(Some(MB)), DirectIo::Auto, false, false),
            (zst(None), DirectIo::Never, false, false),
        ];
        for &(arrival, asked, tight, want) in table {
            let plan = decide(asked, DEFAULT_THRESHOLD, &ext4(), arrival, T, POOL);
            assert_eq!(plan.ring_for_direct(tight), want, "{arrival:?} {asked:?} tight {tight}");
        }
        let tmpfs = dest(Fs::Tmpfs, Some(4096), false);
        let plan = decide(DirectIo::Auto, DEFAULT_THRESHOLD, &tmpfs, zst(None), T, POOL);
        assert!(!plan.ring_for_direct(false));
    }

    /// The threshold given is the one used, in every mode that writes direct.
    #[test]
    fn threshold_is_passed_through() {
        let big = Arrival { size: Some(4 * GB), packing: Packing::Plain };
        for asked in [DirectIo::Auto, DirectIo::Always] {
            assert_eq!(decide(asked, 0, &ext4(), big, T, POOL).threshold, Some(0));
            let t = decide(asked, 1 << 20, &ext4(), big, T, POOL).threshold;
            assert_eq!(t, Some(1 << 20));
        }
    }

    /// `--direct-io` is warned about when it cannot be had; auto never warns.
    #[test]
    fn warnings_only_when_asked() {
        let ramfs = dest(Fs::Ramfs, None, false);
        let wide = dest(Fs::Ext4, Some(8192), false);
        let pipe = Arrival { size: None, packing: Packing::Plain };
        for d in [ramfs, wide] {
            let always = decide(DirectIo::Always, 0, &d, pipe, T, POOL);
            assert!(always.warning().is_some(), "{d:?}");
            assert!(decide(DirectIo::Auto, 0, &d, pipe, T, POOL).warning().is_none(), "{d:?}");
        }
        assert!(decide(DirectIo::Always, 0, &ext4(), pipe, T, POOL).warning().is_none());
    }

    /// What `-v` and `--json` say.
    #[test]
    fn descriptions() {
        let big = Arrival { size: Some(4 * GB), packing: Packing::Zstd { first_frame: None } };
        let p = decide(DirectIo::Auto, 64 << 10, &ext4(), big, 256 << 20, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: files of 64 KiB and more direct, smaller ones buffered: ext4 writes \
             large files faster direct, and the archive is large"
        );
        assert_eq!(
            p.json(),
            "{\"mode\":\"auto\",\"filesystem\":\"ext4\",\"alignment\":512,\"threshold\":65536,\
             \"after\":0,\"small\":\"buffered\",\"large\":\"direct\",\"reason\":\"large_archive\"}"
        );
        let frame = Arrival { size: None, packing: Packing::Zstd { first_frame: Some(4 * GB) } };
        let p = decide(DirectIo::Auto, 64 << 10, &ext4(), frame, 256 << 20, POOL);
        assert!(p.describe().ends_with("and a zstd frame is large"), "{}", p.describe());
        assert!(p.json().contains("\"reason\":\"large_frame\""), "{}", p.json());
        let gz = Arrival { size: Some(100 << 20), packing: Packing::Compressed };
        let p = decide(DirectIo::Auto, 64 << 10, &ext4(), gz, 256 << 20, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: files of 64 KiB and more direct once 256 MiB of files have landed, \
             smaller ones buffered: ext4 writes large files faster direct past 256 MiB, or \
             sooner where the ratio so far says the tree will reach it"
        );
        assert!(
            p.json().contains(
                "\"threshold\":65536,\"after\":268435456,\"small\":\"buffered\",\
                 \"large\":\"direct\",\"reason\":\"unknown_tree\"}"
            ),
            "{}",
            p.json()
        );
        let pipe = Arrival { size: None, packing: Packing::Compressed };
        let p = decide(DirectIo::Auto, 64 << 10, &ext4(), pipe, 1 << 20, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: files of 64 KiB and more direct once 1 MiB of files have landed, \
             smaller ones buffered: ext4 writes large files faster direct past the size not \
             known ahead"
        );
        let tmpfs = dest(Fs::Tmpfs, Some(4096), false);
        let p = decide(DirectIo::Auto, 64 << 10, &tmpfs, pipe, T, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: every file buffered: tmpfs keeps files in memory"
        );
        assert!(
            p.json().contains(
                "\"threshold\":null,\"after\":null,\"small\":\"buffered\",\"large\":\"buffered\""
            ),
            "{}",
            p.json()
        );
        // The filesystem's alignment is said also where every file goes buffered.
        let tar = Arrival { size: Some(1 << 20), packing: Packing::Plain };
        let p = decide(DirectIo::Auto, 64 << 10, &ext4(), tar, 256 << 20, POOL);
        assert!(p.json().contains("\"alignment\":512,\"threshold\":null,"), "{}", p.json());
        assert_eq!(p.describe(), "direct IO auto: every file buffered: a tar under 256 MiB");
        let p = decide(DirectIo::Auto, 64 << 10, &dest(Fs::Ext4, None, false), tar, T, POOL);
        assert!(p.json().contains("\"alignment\":null,\"threshold\":null,"), "{}", p.json());
        let p = decide(DirectIo::Always, 0, &ext4(), tar, T, POOL);
        assert_eq!(p.describe(), "direct IO --direct-io: every file direct");
        assert!(p.json().contains(
            "\"after\":0,\"small\":\"direct\",\"large\":\"direct\",\"reason\":\"asked\""
        ));
        let p = decide(DirectIo::Never, 0, &ext4(), tar, T, POOL);
        assert_eq!(p.describe(), "direct IO --no-direct-io: every file buffered");
        assert_eq!(Fs::Other(0x6969).name(), "0x6969");
    }

    /// The probe on this machine's temporary directory names a filesystem and an alignment
    /// that a pool buffer satisfies (or none at all).
    #[test]
    fn probe_of_a_real_directory() {
        use std::os::fd::AsRawFd;
        let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
        let d = Destination::probe(dir.as_raw_fd());
        assert_ne!(d.fs, Fs::Other(0), "fstatfs failed");
        if let Some(a) = d.new_file.align {
            assert!(a.is_power_of_two() && a <= 1 << 16, "{d:?}");
        }
    }
}
