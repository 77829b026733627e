//! When files are written with O_DIRECT: `--direct-io` (always), `--no-direct-io` (never), or
//! by default `auto`, which decides from the destination filesystem, its O_DIRECT alignment,
//! the archive's size and each file's size (docs/PERFORMANCE.md, "Direct IO by default").
//!
//! `decide` is the decision, a pure function of those facts; `Destination::probe` finds the
//! facts (one fstatfs of DIR, and a statx and an ioctl on an unnamed O_TMPFILE file in it).
//!
//! Why auto writes large files direct on ext4, XFS, btrfs without checksums and FUSE: buffered
//! data
//! reaches the disk through the kernel's writeback (one flusher per disk; on this VM ~450 MB/s
//! to the virtio disk and ~260 MB/s through a RAM-backed loop device), direct writes go at the
//! device's rate (1.0-1.7 GB/s). Extract + sync of the 4 GB Agave-shaped archive: 1.7-2.3 s
//! buffered against 1.15-1.4 s direct (issue 31). Through FUSE (bindfs over ext4, libfuse 2)
//! a 190 MB tree took 5.48 s buffered against 0.81 s direct (medians of 3; not traced, likely
//! the small requests libfuse 2 gets for buffered writes). Where it stays buffered:
//! - files under the threshold: a small file is mostly its unaligned tail, and its fallocate and
//!   fcntl cost more than the copy they save (`AUTO_THRESHOLD`);
//! - tmpfs and ramfs: the "disk" is the page cache (tmpfs takes O_DIRECT since Linux 6.6 and
//!   copies into the same pages; ramfs refuses it);
//! - btrfs with data checksums (the default): btrfs turns an O_DIRECT write into a buffered
//!   one and then waits for its writeback, so it is slower than buffered (a 1.1 GB tree on the
//!   virtio disk: 2.95 s against 1.91 s);
//! - filesystems not measured (NFS, overlayfs, f2fs, ...): as GNU tar, buffered;
//! - a filesystem that says no to O_DIRECT for a new file (STATX_DIOALIGN 0: ext4 with
//!   `data=journal`), or needs more alignment than the buffer pool gives;
//! - an archive under 1 GiB (`AUTO_MIN_ARCHIVE`): written buffered, its tree stays in the page
//!   cache for whatever reads it next, and below that size reading it back from the cache gains
//!   more than direct extraction does (the trade-off Agave met: their index build, which reads
//!   the files back, took 42.8 s after a buffered untar and 51.0 s after a direct one).
//!
//! An archive of unknown size (a pipe, `-I PROG`) counts as large: that is how large restores
//! arrive (`zstd -dc | fastuntar`, `curl | fastuntar`), and small files stay buffered anyway.
//! A URL's Content-Length, once URLs are read, is an archive size like a file's.

use std::os::fd::RawFd;

use super::align::{self, NewFile};
use super::direct::DirectPolicy;
use super::plan::DirectIo;

/// Smallest file written direct by `auto` (and by `--direct-io` unless
/// `--direct-io-threshold` says otherwise).
// 64 KiB measured best for `--direct-io` (docs/perf-log.md, "Where the time goes"): the
// snapshot 3.62/3.15 s against 4.28/3.44 s at 4K and 3.70/3.19 s at 1M.
pub const DEFAULT_THRESHOLD: u64 = 64 << 10;

/// `auto` writes every file buffered when the archive is smaller than this (its size as it
/// arrives, compressed or not).
// Extract + sync, then `sha256sum` of every file with the caches kept (docs/PERFORMANCE.md,
// "Direct IO by default"; snapshot-shaped archives, medians of 3, load 4-8), buffered against
// direct, on the RAM-backed ext4 / the virtio disk:
//   97 MB archive (190 MB tree):  1.29 / 1.17 s against 1.38 / 1.83 s
//   552 MB archive (1.1 GB tree): 6.71 / 4.69 s against 13.00 / 7.03 s
//   2.0 GB archive (4.0 GB tree): 23.30 / 25.17 s against 16.76 / 21.11 s
// Extraction alone gains from 552 MB on (2.05 → 1.38 s, 1.28 → 0.94 s), but the read back of a
// tree that stayed in the page cache gains more below 1 GiB; above it direct wins both.
pub const AUTO_MIN_ARCHIVE: u64 = 1 << 30;

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
    /// checksums, FUSE), and a large archive.
    Wins,
    /// auto: an archive smaller than AUTO_MIN_ARCHIVE.
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
            Why::Wins => "large_archive",
            Why::SmallArchive => "small_archive",
            Why::InMemory => "in_memory_fs",
            Why::Checksums => "btrfs_checksums",
            Why::Unmeasured => "unmeasured_fs",
            Why::Unsupported => "no_o_direct",
            Why::Alignment(_) => "alignment",
        }
    }
}

/// What the writers do, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub asked: DirectIo,
    /// Files of at least this many bytes (and not sparse) are written direct; None: none is.
    pub threshold: Option<u64>,
    /// The O_DIRECT alignment used (the pool's when no file goes direct).
    pub align: usize,
    pub fs: Fs,
    /// What the filesystem said it needs (None: no O_DIRECT for a new file), for `--json`.
    pub fs_align: Option<usize>,
    pub why: Why,
}

impl Plan {
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
        let what = match self.threshold {
            Some(0) => "every file direct".to_string(),
            Some(t) => format!("files of {} and more direct, smaller ones buffered", size(t)),
            None => "every file buffered".to_string(),
        };
        let why = match self.why {
            Why::Asked | Why::Declined => String::new(),
            Why::Wins => format!(": {} writes large files faster direct", self.fs.name()),
            Why::SmallArchive => format!(": an archive under {}", size(AUTO_MIN_ARCHIVE)),
            Why::InMemory => format!(": {} keeps files in memory", self.fs.name()),
            Why::Checksums => ": btrfs with data checksums writes O_DIRECT buffered".to_string(),
            Why::Unmeasured => format!(": not measured on this filesystem ({})", self.fs.name()),
            Why::Unsupported => ": the filesystem does not support O_DIRECT".to_string(),
            Why::Alignment(a) => format!(": the filesystem needs {a}-byte alignment"),
        };
        format!("direct IO {mode}: {what}{why}")
    }

    /// The `--json` object.
    pub fn json(&self) -> String {
        let threshold = self.threshold.map_or("null".to_string(), |t| t.to_string());
        let large = if self.threshold.is_some() { "direct" } else { "buffered" };
        let small = if self.threshold == Some(0) { "direct" } else { "buffered" };
        let mode = match self.asked {
            DirectIo::Auto => "auto",
            DirectIo::Always => "always",
            DirectIo::Never => "never",
        };
        format!(
            "{{\"mode\":\"{mode}\",\"filesystem\":\"{}\",\"alignment\":{},\"threshold\":{threshold},\"small\":\"{small}\",\"large\":\"{large}\",\"reason\":\"{}\"}}",
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
/// destination; `archive`: the archive's size when known; `pool_align`: the alignment every
/// pool buffer has (address and length), which O_DIRECT needs of the data.
pub fn decide(
    asked: DirectIo,
    threshold: u64,
    dest: &Destination,
    archive: Option<u64>,
    pool_align: usize,
) -> Plan {
    let fs_align = dest.new_file.align;
    let buffered =
        |why| Plan { asked, threshold: None, align: pool_align, fs: dest.fs, fs_align, why };
    let auto = asked == DirectIo::Auto;
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
    if auto && archive.is_some_and(|n| n < AUTO_MIN_ARCHIVE) {
        return buffered(Why::SmallArchive);
    }
    let why = if auto { Why::Wins } else { Why::Asked };
    Plan { asked, threshold: Some(threshold), align, fs: dest.fs, fs_align, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: usize = 4096;
    const GB: u64 = 1 << 30;

    fn dest(fs: Fs, align: Option<usize>, nocow: bool) -> Destination {
        Destination { fs, new_file: NewFile { align, nocow } }
    }

    /// (asked, filesystem, alignment, nocow, archive size) → (threshold, why).
    type Row = (DirectIo, Fs, Option<usize>, bool, Option<u64>, Option<u64>, Why);

    /// The table.
    #[test]
    fn decisions() {
        use DirectIo::{Always, Auto, Never};
        let t = DEFAULT_THRESHOLD;
        let small = Some(AUTO_MIN_ARCHIVE - 1);
        let large = Some(4 * GB);
        #[rustfmt::skip]
        let table: &[Row] = &[
            // auto, where direct IO wins: large files direct.
            (Auto, Fs::Ext4, Some(512), false, large, Some(t), Why::Wins),
            (Auto, Fs::Xfs, Some(512), false, large, Some(t), Why::Wins),
            (Auto, Fs::Ext4, Some(4096), false, large, Some(t), Why::Wins),
            // an archive of unknown size (a pipe) counts as large
            (Auto, Fs::Ext4, Some(512), false, None, Some(t), Why::Wins),
            (Auto, Fs::Ext4, Some(512), false, Some(AUTO_MIN_ARCHIVE), Some(t), Why::Wins),
            // a small archive stays buffered
            (Auto, Fs::Ext4, Some(512), false, small, None, Why::SmallArchive),
            (Auto, Fs::Ext4, Some(512), false, Some(560 << 20), None, Why::SmallArchive),
            (Auto, Fs::Xfs, Some(512), false, Some(0), None, Why::SmallArchive),
            // btrfs: direct only where new files have no checksums
            (Auto, Fs::Btrfs, Some(4096), false, large, None, Why::Checksums),
            (Auto, Fs::Btrfs, Some(4096), true, large, Some(t), Why::Wins),
            // memory, the unmeasured: buffered whatever the archive
            (Auto, Fs::Tmpfs, Some(4096), false, large, None, Why::InMemory),
            (Auto, Fs::Ramfs, None, false, large, None, Why::InMemory),
            (Auto, Fs::Fuse, Some(4096), false, large, Some(t), Why::Wins),
            (Auto, Fs::Fuse, Some(4096), false, small, None, Why::SmallArchive),
            (Auto, Fs::Other(0x6969), Some(4096), false, large, None, Why::Unmeasured),
            (Auto, Fs::Other(0), Some(4096), false, None, None, Why::Unmeasured),
            // no O_DIRECT for a new file (ext4 data=journal), or more alignment than the pool
            (Auto, Fs::Ext4, None, false, large, None, Why::Unsupported),
            (Auto, Fs::Xfs, Some(8192), false, large, None, Why::Alignment(8192)),
            (Auto, Fs::Xfs, Some(3000), false, large, None, Why::Alignment(3000)),
            // --direct-io: wherever O_DIRECT can be had, whatever the archive
            (Always, Fs::Ext4, Some(512), false, small, Some(t), Why::Asked),
            (Always, Fs::Tmpfs, Some(4096), false, small, Some(t), Why::Asked),
            (Always, Fs::Btrfs, Some(4096), false, large, Some(t), Why::Asked),
            (Always, Fs::Fuse, Some(4096), false, None, Some(t), Why::Asked),
            (Always, Fs::Ramfs, None, false, large, None, Why::Unsupported),
            (Always, Fs::Ext4, Some(8192), false, large, None, Why::Alignment(8192)),
            // --no-direct-io: never
            (Never, Fs::Ext4, Some(512), false, large, None, Why::Declined),
            (Never, Fs::Btrfs, Some(4096), true, None, None, Why::Declined),
        ];
        for &(asked, fs, align, nocow, archive, threshold, why) in table {
            let plan = decide(asked, t, &dest(fs, align, nocow), archive, POOL);
            let row = format!("{asked:?} {fs:?} align {align:?} nocow {nocow} archive {archive:?}");
            assert_eq!((plan.threshold, plan.why), (threshold, why), "{row}");
            assert_eq!(plan.fs, fs, "{row}");
            // The alignment used is the filesystem's where files go direct.
            let want_align = if threshold.is_some() { align.unwrap() } else { POOL };
            assert_eq!(plan.align, want_align, "{row}");
            // --json says what the filesystem needs, whatever was decided.
            assert_eq!(plan.fs_align, align, "{row}");
        }
    }

    /// The threshold given is the one used, in every mode that writes direct.
    #[test]
    fn threshold_is_passed_through() {
        let d = dest(Fs::Ext4, Some(512), false);
        for asked in [DirectIo::Auto, DirectIo::Always] {
            assert_eq!(decide(asked, 0, &d, None, POOL).threshold, Some(0));
            assert_eq!(decide(asked, 1 << 20, &d, None, POOL).threshold, Some(1 << 20));
        }
    }

    /// `--direct-io` is warned about when it cannot be had; auto never warns.
    #[test]
    fn warnings_only_when_asked() {
        let ramfs = dest(Fs::Ramfs, None, false);
        let wide = dest(Fs::Ext4, Some(8192), false);
        for d in [ramfs, wide] {
            assert!(decide(DirectIo::Always, 0, &d, None, POOL).warning().is_some(), "{d:?}");
            assert!(decide(DirectIo::Auto, 0, &d, None, POOL).warning().is_none(), "{d:?}");
        }
        let ok = dest(Fs::Ext4, Some(512), false);
        assert!(decide(DirectIo::Always, 0, &ok, None, POOL).warning().is_none());
    }

    /// What `-v` and `--json` say.
    #[test]
    fn descriptions() {
        let ext4 = dest(Fs::Ext4, Some(512), false);
        let p = decide(DirectIo::Auto, 64 << 10, &ext4, None, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: files of 64 KiB and more direct, smaller ones buffered: ext4 writes \
             large files faster direct"
        );
        assert_eq!(
            p.json(),
            "{\"mode\":\"auto\",\"filesystem\":\"ext4\",\"alignment\":512,\"threshold\":65536,\
             \"small\":\"buffered\",\"large\":\"direct\",\"reason\":\"large_archive\"}"
        );
        let tmpfs = dest(Fs::Tmpfs, Some(4096), false);
        let p = decide(DirectIo::Auto, 64 << 10, &tmpfs, None, POOL);
        assert_eq!(
            p.describe(),
            "direct IO auto: every file buffered: tmpfs keeps files in memory"
        );
        assert!(
            p.json().contains("\"threshold\":null,\"small\":\"buffered\",\"large\":\"buffered\"")
        );
        // The filesystem's alignment is said also where every file goes buffered.
        let p = decide(DirectIo::Auto, 64 << 10, &ext4, Some(1 << 20), POOL);
        assert!(p.json().contains("\"alignment\":512,\"threshold\":null,"), "{}", p.json());
        let p = decide(DirectIo::Auto, 64 << 10, &dest(Fs::Ext4, None, false), None, POOL);
        assert!(p.json().contains("\"alignment\":null,\"threshold\":null,"), "{}", p.json());
        let p = decide(DirectIo::Always, 0, &ext4, None, POOL);
        assert_eq!(p.describe(), "direct IO --direct-io: every file direct");
        assert!(
            p.json().contains("\"small\":\"direct\",\"large\":\"direct\",\"reason\":\"asked\"")
        );
        let p = decide(DirectIo::Never, 0, &ext4, None, POOL);
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
